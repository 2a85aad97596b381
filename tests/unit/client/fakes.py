"""A scripted governor behind httpx.MockTransport, a clock that moves only when slept on,
and bounded waits for what a background thread does."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import Any

import httpx

from governor.client import Governor

Answer = dict[str, Any] | int | Exception | httpx.Response


def directive(action: str = "continue", next_heartbeat_s: float = 0.01, **fields: Any) -> dict:
    """A heartbeat reply as the server sends it."""
    return {
        "action": action,
        "reason": None,
        "message": None,
        "deadline": None,
        "next_heartbeat_s": next_heartbeat_s,
        "budget": {
            "spent_usd": "4.50",
            "committed_usd": "9.00",
            "effective_ceiling_usd": "10.00",
            "remaining_usd": "1.00",
            "burn_rate_usd_per_hour": "3600.00",
        },
        **fields,
    }


class FakeTime:
    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


class ScriptedServer:
    """Answers each request with the next scripted answer (the last one repeats).

    An answer is a reply body (200), a bare status code (an error body), an exception to
    raise as the transport would, or a whole Response. `answer` may be replaced at any time.
    """

    def __init__(self, *answers: Answer) -> None:
        self.script = list(answers)
        self.requests: list[httpx.Request] = []
        self.answered_at = 0.0  # time.monotonic() of the last 200
        self.lock = threading.Lock()

    def answer(self, *answers: Answer) -> None:
        with self.lock:
            self.script = list(answers)

    def bodies(self, path_end: str = "/heartbeat") -> list[dict[str, Any]]:
        with self.lock:
            return [json.loads(r.content) for r in self.requests if r.url.path.endswith(path_end)]

    def __call__(self, request: httpx.Request) -> httpx.Response:
        with self.lock:
            self.requests.append(request)
            answer = self.script.pop(0) if len(self.script) > 1 else self.script[0]
        if isinstance(answer, Exception):
            raise answer
        if isinstance(answer, httpx.Response):
            return answer
        if isinstance(answer, int):
            error = {"error": {"code": "refused", "message": f"status {answer}"}}
            return httpx.Response(answer, json=error)
        self.answered_at = time.monotonic()
        return httpx.Response(200, json=answer)

    def governor(self, fake_time: FakeTime | None = None, **options: Any) -> Governor:
        timing: dict[str, Callable[..., Any]] = (
            {} if fake_time is None else {"clock": fake_time.clock, "sleep": fake_time.sleep}
        )
        return Governor(
            "http://governor.test",
            "run-1",
            "job-token",
            transport=httpx.MockTransport(self),
            **timing,
            **options,
        )


def eventually(probe: Callable[[], Any], what: str, timeout_s: float = 5.0) -> Any:
    """Poll `probe` until it returns something truthy; fail saying `what` after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while not (value := probe()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.005)
    return value


def beat_with(server: ScriptedServer, **fields: Any) -> dict[str, Any]:
    """Wait for a heartbeat whose body has these fields; returns the latest such body."""

    def seen() -> dict[str, Any] | None:
        matches = [b for b in server.bodies() if fields.items() <= b.items()]
        return matches[-1] if matches else None

    result: dict[str, Any] = eventually(seen, f"a heartbeat with {fields}")
    return result
