"""What every fake cloud shares: an HTTP server on 127.0.0.1, a key, canned failures, a
request log, state kept in a JSON file, and the command line that runs one as a process.

A fake cloud answers its provider's real request and response shapes; this base only
routes requests to `FakeCloud.handle` and, when a canned failure is queued, answers that
instead. POST /_fake/answers {"answers": [...]} queues them, one per provider request:

    ""               answer normally
    "429"            rate limited, no Retry-After      "429:<s>"  with Retry-After: <s>
    "500"            the provider's own 5xx            "status:<code>"  its error with that code
    "malformed"      a 200 whose body is an HTML page  "hold"  no answer until released

and whatever else a provider's fake adds in `canned` (e.g. GraphQL errors inside a 200, or
"no-capacity": the provider's own refusal to start a stopped pod again for lack of capacity).
Each is in the words of the service the request is for (`FakeCloud.errors_for`): a fake
serving a second service beside its provider's own (the fake EC2 serves Cost Explorer)
answers that service's requests in its error shapes. A provider that documents another
answer to too many requests than a 429 (EC2's 503 RequestLimitExceeded) gives that for "429".
A held request is answered normally once `FakeCloud.release` lets it (or HOLD_MAX_S after it
came, should no one); when the server shuts down first, it gets the provider's 503 and is
never handled. Meanwhile the server answers every other request, so a client's timeout is
what ends a held call. GET /_fake/state returns the state, which is also written to the
state file after every request. Every provider request is logged, so a test can prove what
was never sent.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import parse_qs, urlsplit

from governor.domain.money import charge

HOLD = "hold"
HOLD_MAX_S = 120.0  # a held request no one releases is answered after this, all the same


def now() -> datetime:
    return datetime.now(UTC)


def bill(
    rate_per_hour: Decimal,
    started_at: str,
    ended_at: str | None,
    at: datetime,
    since: datetime | None = None,
) -> Decimal:
    """A fake cloud's own bill: the rate for every second from `started_at` (or `since`, if
    later) until `ended_at` (None: still running) or `at`, whichever comes first."""
    start = datetime.fromisoformat(started_at)
    if since is not None:
        start = max(start, since)
    end = at if ended_at is None else min(at, datetime.fromisoformat(ended_at))
    return charge(rate_per_hour, max(0.0, (end - start).total_seconds()))


def bill_runs(
    rate_per_hour: Decimal,
    runs: Iterable[Sequence[str | None]],
    at: datetime,
    since: datetime | None = None,
) -> Decimal:
    """`bill` for each run, [started_at, ended_at (None: still running)], added up: a pod
    stopped and resumed has run more than once."""
    return sum((bill(rate_per_hour, str(start), end, at, since) for start, end in runs), Decimal(0))


@dataclass(frozen=True)
class FakeRequest:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: Any  # decoded JSON; the raw text when it is not JSON; None when empty
    raw: bytes = b""  # the body as sent (a signature covers it)

    def param(self, name: str) -> str | None:
        values = self.query.get(name)
        return values[0] if values else None

    def bearer(self) -> str:
        return self.headers.get("authorization", "").removeprefix("Bearer ").strip()


@dataclass(frozen=True)
class Reply:
    status: int
    body: Any = None  # JSON-encoded unless `text` is given
    headers: dict[str, str] = field(default_factory=dict)
    text: str | None = None
    content_type: str = "application/json"


class ErrorShapes(Protocol):
    """How a service words its failures, which the canned answers take."""

    def error(self, status: int, message: str) -> Reply:
        """The service's error body for `status`."""
        ...

    def rate_limited(self, retry_after: str) -> Reply:
        """Its answer to too many requests; `retry_after` "" when none is to be said."""
        ...

    def canned(self, kind: str, arg: str) -> Reply | None:
        """A canned answer of its own; None: `kind` is not one."""
        ...


class FakeCloud(ABC):
    """A provider's cloud in one process. Subclasses answer `handle` and say what the
    provider's errors look like; the state they keep goes in `snapshot`."""

    provider = "cloud"

    def __init__(self, state_file: Path, api_key: str) -> None:
        self.state_file = state_file
        self.api_key = api_key
        self.lock = threading.RLock()
        self.answers: list[str] = []
        self.clock: Callable[[], datetime] = now  # the cloud's own time; tests may set theirs
        saved = json.loads(state_file.read_text()) if state_file.exists() else {}
        self.requests: list[dict[str, str]] = saved.get("requests", [])
        self.saved: dict[str, Any] = saved  # what the state file held: a subclass restores it
        self._holds = threading.Condition()
        self._holding = 0  # requests held now
        self._held_before = 0  # requests held earlier and answered since
        self._releases = 0  # a held request waits for the next release
        self._closed = False

    # What a subclass provides ------------------------------------------------------------

    @abstractmethod
    def add_pod(self, ref: str, hourly_rate_usd: str) -> None:
        """A running pod billing `hourly_rate_usd` from now."""

    @abstractmethod
    def handle(self, request: FakeRequest) -> Reply:
        """The provider's answer to an authorized request (called under the lock)."""

    @abstractmethod
    def snapshot(self) -> dict[str, Any]:
        """Everything a test may want to see, as JSON-ready data."""

    def authorized(self, request: FakeRequest) -> bool:
        return request.bearer() == self.api_key

    def error(self, status: int, message: str) -> Reply:
        """The provider's error body for `status`."""
        return Reply(status, {"error": message})

    def rate_limited(self, retry_after: str) -> Reply:
        headers = {"Retry-After": retry_after} if retry_after else {}
        return Reply(429, self.error(429, "Too Many Requests").body, headers)

    def canned(self, kind: str, arg: str) -> Reply | None:
        """A provider-specific canned answer; None: `kind` is not one."""
        return None

    def errors_for(self, request: FakeRequest) -> ErrorShapes:
        """Whose words `request`'s failures are in: this cloud's own, unless it serves
        another service beside its provider's."""
        return self

    # The shared machinery ----------------------------------------------------------------

    def serve_request(self, request: FakeRequest) -> Reply:
        shapes = self.errors_for(request)
        if not self.authorized(request):
            return shapes.error(401, "invalid api key")
        with self.lock:
            canned = self.answers.pop(0) if self.answers else ""
        kind, _, arg = canned.partition(":")
        if kind == HOLD:
            return self._answer_held(request)
        elif kind == "429":
            return self._logged(request, shapes.rate_limited(arg))
        elif kind == "500":
            return self._logged(request, shapes.error(500, "internal server error"))
        elif kind == "status":
            return self._logged(request, shapes.error(int(arg), f"canned HTTP {arg}"))
        elif kind == "malformed":
            page = "<html><body>502 Bad Gateway</body></html>"
            return self._logged(request, Reply(200, text=page, content_type="text/html"))
        elif kind:
            reply = shapes.canned(kind, arg)
            if reply is None:
                raise ValueError(f"unknown canned answer {canned!r}")
            return self._logged(request, reply)
        with self.lock:
            return self._logged(request, self.handle(request))

    def _answer_held(self, request: FakeRequest) -> Reply:
        """`request`'s answer once a release lets it go: normal, or a 503 if the fake closed."""
        with self._holds:
            self._holding += 1
            self._holds.notify_all()
            releases = self._releases
            self._holds.wait_for(lambda: self._releases > releases or self._closed, HOLD_MAX_S)
            closed = self._closed
        try:
            if closed:
                closing = self.errors_for(request).error(503, "the fake cloud is shutting down")
                return self._logged(request, closing)
            with self.lock:
                return self._logged(request, self.handle(request))
        finally:
            with self._holds:
                self._holding -= 1
                self._held_before += 1
                self._holds.notify_all()

    def held(self, count: int, within_s: float) -> bool:
        """Whether `count` requests have been held since the fake started, waiting up to
        `within_s` for them to arrive."""
        with self._holds:
            return self._holds.wait_for(
                lambda: self._holding + self._held_before >= count, within_s
            )

    def release(self) -> None:
        """Let every request held now be answered normally; returns once they have been."""
        with self._holds:
            answered = self._held_before + self._holding
            self._releases += 1
            self._holds.notify_all()
            self._holds.wait_for(lambda: self._held_before >= answered, HOLD_MAX_S)

    def close(self) -> None:
        """Shutting down: every request held now, or from now on, gets a 503 at once and is
        never handled."""
        with self._holds:
            self._closed = True
            self._holds.notify_all()

    def _logged(self, request: FakeRequest, reply: Reply) -> Reply:
        with self.lock:
            self.requests.append(
                {"method": request.method, "path": request.path, "at": self.clock().isoformat()}
            )
            self.save()
        return reply

    def calls(self, method: str | None = None) -> list[str]:
        """The provider requests received so far, as "METHOD /path"."""
        with self.lock:
            return [
                f"{r['method']} {r['path']}"
                for r in self.requests
                if method is None or r["method"] == method
            ]

    def dump(self) -> dict[str, Any]:
        with self.lock:
            return {"requests": list(self.requests), **self.snapshot()}

    def save(self) -> None:
        tmp = self.state_file.with_suffix(self.state_file.suffix + ".tmp")
        tmp.write_text(json.dumps(self.dump(), indent=2, default=str))
        os.replace(tmp, self.state_file)


class _Handler(BaseHTTPRequestHandler):
    server: FakeServer

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_PUT(self) -> None:
        self._dispatch("PUT")

    def do_PATCH(self) -> None:
        self._dispatch("PATCH")

    def do_DELETE(self) -> None:
        self._dispatch("DELETE")

    def _dispatch(self, method: str) -> None:
        cloud = self.server.cloud
        url = urlsplit(self.path)
        raw = self.rfile.read(int(self.headers.get("Content-Length", 0) or 0))
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode(errors="replace")
        if url.path == "/_fake/answers" and method == "POST":
            with cloud.lock:
                cloud.answers.extend(body["answers"])
            return self._send(Reply(204))
        if url.path == "/_fake/state" and method == "GET":
            return self._send(Reply(200, cloud.dump()))
        headers = {k.lower(): v for k, v in self.headers.items()}
        request = FakeRequest(method, url.path, parse_qs(url.query), headers, body, raw)
        self._send(cloud.serve_request(request))

    def _send(self, reply: Reply) -> None:
        if reply.text is not None:
            data = reply.text.encode()
        elif reply.body is None:
            data = b""
        else:
            data = json.dumps(reply.body, default=str).encode()
        self.send_response(reply.status)
        self.send_header("Content-Type", reply.content_type)
        self.send_header("Content-Length", str(len(data)))
        for name, value in reply.headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: request lines would carry a key when a caller puts one in the URL."""


class FakeServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, port: int, cloud: FakeCloud) -> None:
        super().__init__(("127.0.0.1", port), _Handler)
        self.cloud = cloud

    def shutdown(self) -> None:
        """Stop serving, answering held requests at once rather than keeping them waiting."""
        self.cloud.close()
        super().shutdown()

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Quiet about clients that hung up (a held answer outlives their timeout)."""
        if not isinstance(sys.exc_info()[1], BrokenPipeError | ConnectionResetError):
            super().handle_error(request, client_address)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_port}"


def serve(cloud: FakeCloud, port: int = 0) -> FakeServer:
    """A server for `cloud` bound on 127.0.0.1 (port 0: any free one); call serve_forever()."""
    return FakeServer(port, cloud)


@contextmanager
def running(cloud: FakeCloud) -> Iterator[FakeServer]:
    """`cloud` served on 127.0.0.1 from a thread for the block; shut down and closed after it."""
    server = serve(cloud)
    threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True).start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def parse_pods(spec: str) -> dict[str, str]:
    """'pod-1=3600,pod-2=0.44' as {ref: hourly rate}."""
    pairs = (item.split("=", 1) for item in spec.split(",") if item.strip())
    return {ref.strip(): str(Decimal(rate)) for ref, rate in pairs}


def main(
    cloud_class: type[FakeCloud],
    default_key: str,
    argv: Sequence[str] | None = None,
    *,
    path: str = "",
) -> None:
    """Run a `cloud_class` cloud as a process until it is killed; `path` is its API's."""
    parser = argparse.ArgumentParser(
        description=f"A fake {cloud_class.provider} cloud for tests and demos, over real HTTP."
    )
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--state", type=Path, required=True, help="where its state is written")
    parser.add_argument("--pods", default="", help="ref=USD-per-hour,... running from the start")
    parser.add_argument(
        "--api-key",
        default=default_key,
        help=f"the key the governor must send (default {default_key})",
    )
    args = parser.parse_args(argv)
    cloud = cloud_class(args.state, args.api_key)
    for ref, rate in parse_pods(args.pods).items():
        cloud.add_pod(ref, rate)
    with cloud.lock:
        cloud.save()
    server = serve(cloud, args.port)
    print(
        f"fake {cloud.provider} listening on {server.url}{path}, taking the key {args.api_key}",
        flush=True,
    )
    server.serve_forever()
