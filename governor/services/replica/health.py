"""Liveness of the periodic passes, and readiness: this replica can serve.

Ready means the database answers and its schema is at head: a replica that can serve is never
taken out of its Service because a pass is between runs, or because another replica leads.
How the leader's passes are doing is reported beside it, each judged against its own interval.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import Engine

from governor.db.schema import schema_status
from governor.services.replica.write_watch import Outage


@dataclass(frozen=True)
class Tick:
    """When a pass last finished, how often it is meant to run, and whether its latest run
    was refused by the database (it waits on the database, it is not stuck)."""

    at: datetime | None
    every_s: float
    waiting: bool = False

    def stale(self, now: datetime, since: datetime) -> bool:
        """Three intervals (and half a minute of slack) without a finished pass, counted from
        its last finish or from `since` (when its replica began to lead), whichever is later;
        never while the database refuses its writes."""
        if self.waiting:
            return False
        last = since if self.at is None else max(self.at, since)
        return (now - last).total_seconds() > 3 * self.every_s + 30

    def state(self, now: datetime, since: datetime) -> str:
        """The pass's state: ok, stale, or waiting (on the database)."""
        if self.waiting:
            return "waiting"
        return "stale" if self.stale(now, since) else "ok"


@dataclass
class TickLog:
    """When each periodic task of this process last finished without raising; thread-safe."""

    enabled: bool = True
    _every: dict[str, float] = field(default_factory=dict)
    _last: dict[str, datetime] = field(default_factory=dict)
    _failures: dict[str, int] = field(default_factory=dict)
    _refused: set[str] = field(default_factory=set)  # whose latest run the database refused
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def expect(self, task: str, every_s: float) -> None:
        with self._lock:
            self._every[task] = every_s

    def succeeded(self, task: str, at: datetime) -> None:
        with self._lock:
            self._last[task] = at
            self._refused.discard(task)

    def failed(self, task: str, *, refused: bool = False) -> None:
        """`task` raised; `refused`: because the database refused its writes."""
        with self._lock:
            self._failures[task] = self._failures.get(task, 0) + 1
            if refused:
                self._refused.add(task)
            else:
                self._refused.discard(task)

    def ticks(self) -> dict[str, Tick]:
        with self._lock:
            return {
                task: Tick(self._last.get(task), every, task in self._refused)
                for task, every in self._every.items()
            }

    def failures(self) -> dict[str, int]:
        with self._lock:
            return dict(self._failures)


@dataclass(frozen=True)
class Readiness:
    ready: bool
    checks: dict[str, str]


def readiness(engine: Engine, failing: Outage | None = None) -> Readiness:
    """Reachable and at head, and (`failing`) the last write of this replica committed."""
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
    checks["writes"] = (
        "ok"
        if failing is None
        else f"refused since {failing.began.isoformat()} ({', '.join(failing.writers)})"
    )
    return Readiness(ready=all(v == "ok" for v in checks.values()), checks=checks)
