"""Liveness of the periodic passes, and readiness: database reachable, at head, passes ticking."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import Engine

from governor.db.schema import schema_status


@dataclass
class TickLog:
    """When each periodic task last finished without raising. Shared across threads."""

    interval_s: float
    enabled: bool = True
    _last: dict[str, datetime] = field(default_factory=dict)
    _failures: dict[str, int] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def succeeded(self, task: str, at: datetime) -> None:
        with self._lock:
            self._last[task] = at

    def failed(self, task: str) -> None:
        with self._lock:
            self._failures[task] = self._failures.get(task, 0) + 1

    def snapshot(self) -> tuple[dict[str, datetime], dict[str, int]]:
        with self._lock:
            return dict(self._last), dict(self._failures)


@dataclass(frozen=True)
class Readiness:
    ready: bool
    checks: dict[str, str]


STALE_AFTER_INTERVALS = 5
MIN_STALE_S = 30.0


def readiness(engine: Engine, ticks: TickLog, now: datetime) -> Readiness:
    checks: dict[str, str] = {}
    try:
        status = schema_status(engine)
        checks["database"] = "ok"
        checks["schema"] = (
            "ok"
            if status.at_head
            else (f"at {status.current or 'empty'}, head is {status.head}: run 'governor migrate'")
        )
    except Exception as exc:  # any failure to reach the database means not ready
        checks["database"] = f"unreachable: {type(exc).__name__}"
        checks["schema"] = "unknown"
    if not ticks.enabled:
        checks["scheduler"] = "disabled in this process"
    else:
        last, _ = ticks.snapshot()
        stale_s = max(MIN_STALE_S, STALE_AFTER_INTERVALS * ticks.interval_s)
        late = [t for t, at in last.items() if (now - at).total_seconds() > stale_s]
        if not last:
            checks["scheduler"] = "not ticked yet"
        elif late:
            checks["scheduler"] = f"stale: {', '.join(sorted(late))}"
        else:
            checks["scheduler"] = "ok"
    ready = all(v in ("ok", "disabled in this process") for v in checks.values())
    return Readiness(ready=ready, checks=checks)
