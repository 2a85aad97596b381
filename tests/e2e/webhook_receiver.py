"""A webhook receiver in the test process (127.0.0.1) that records every POST it gets."""

from __future__ import annotations

import json
import threading
from collections import Counter
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Received:
    path: str
    event_id: int
    status: int
    body: dict[str, Any]


class Receiver:
    """Records every POST. `/flaky` answers 500 to its first request, `/down` to every one."""

    def __init__(self) -> None:
        self.received: list[Received] = []
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                key = self.headers["Idempotency-Key"]
                with receiver._lock:
                    seen = [r for r in receiver.received if r.path == self.path]
                    failing = self.path == "/down" or (self.path == "/flaky" and not seen)
                    status = 500 if failing else 200
                    event_id = int(key.removeprefix("governor-event-"))
                    receiver.received.append(Received(self.path, event_id, status, body))
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *_: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def at(self, path: str) -> list[Received]:
        with self._lock:
            return [r for r in self.received if r.path == path]

    def delivered(self, path: str) -> Counter[int]:
        return Counter(r.event_id for r in self.at(path) if r.status == 200)

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
