"""When the database refuses writes: a flag set by the writer that failed, cleared once a
writer that was refused commits a write again. Readiness and /metrics read it at once
(nothing is probed with a write); nothing can be committed meanwhile, so the webhooks hear of
it from memory (once per outage), and once writes commit again the outage, from its first
refused write to the first write of a refused writer that really committed, is handed to
whoever records it as a critical event.

What ends an outage is a commit that changed rows (`committed_writes`), by a writer that was
refused in it: a transaction that only read, or changed nothing, commits even on a full disk,
and so does a write that needs no room (on a full SQLite disk, the lease's renewal rewrites
its row in place while every heartbeat and pass that adds a row is refused). Neither says
that the writes that failed would pass now, so neither ends the outage. A refused writer may
not write again, though (a client that gave up, an API readiness took out of service): once
no write has been refused for QUIET_S, a write of any writer that commits ends the outage.

The log gets one line per writer and kind of failure per minute, not one per request.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.exc import OperationalError

from governor.db.engine import committed_writes
from governor.domain.model import Category, Severity
from governor.domain.notice import Notice
from governor.domain.ports import Clock
from governor.services.replica.failure_log import FailureLog

log = logging.getLogger("governor.writes")
QUIET_S = 60.0  # after this long without a refused write, any write that commits ends an outage


@dataclass(frozen=True)
class Outage:
    """Writes failed from `began` (the first failure) to `ended` (the first write after)."""

    began: datetime
    ended: datetime | None
    writers: tuple[str, ...]  # what could not write: "lease", a pass ("enforce"), "api"
    failures: int

    def seconds(self, now: datetime) -> float:
        return ((self.ended or now) - self.began).total_seconds()


class WriteWatch:
    def __init__(
        self,
        replica: str = "",
        *,
        notify: Callable[[Notice], None] | None = None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.replica = replica
        self._notify = notify
        self._said = FailureLog(log, monotonic=monotonic)
        self._lock = threading.Lock()
        self._began: datetime | None = None
        self._last_refused: datetime | None = None
        self._writers: dict[str, int] = {}
        self._ended: list[Outage] = []
        self._total: dict[str, int] = {}

    @contextmanager
    def watching(self, writer: str, clock: Clock) -> Iterator[None]:
        """Around work of `writer` that opens units of work of its own: if the database
        refuses one, the refusal is told here (and raised on); if one that changed rows
        commits, an outage `writer` was refused in has ended."""
        before = committed_writes()
        try:
            yield
        except OperationalError as exc:
            self.failed(writer, exc, clock.now())
            raise
        if committed_writes() > before:
            self.committed(writer, clock.now())

    def failed(self, writer: str, exc: BaseException, now: datetime) -> None:
        """`writer` could not write (its transaction raised `exc`)."""
        with self._lock:
            first = self._began is None
            if first:
                self._began = now
            self._last_refused = now
            self._writers[writer] = self._writers.get(writer, 0) + 1
            self._total[writer] = self._total.get(writer, 0) + 1
        kind = self.say(f"{writer} could not write to the database", exc)
        if first and self._notify is not None:
            self._notify(self._notice(writer, kind, now))

    def say(self, what: str, exc: BaseException) -> str:
        """Log `what` and why, once a minute for each kind of failure; returns the kind."""
        return self._said.tell(what, exc)

    def committed(self, writer: str, now: datetime) -> None:
        """A write of `writer` that changed rows committed: if `writer` was refused in the
        outage under way, or no write has been refused for QUIET_S, the outage has ended."""
        if self._began is None:  # the usual case: no lock taken
            return
        with self._lock:
            if self._began is None or not (writer in self._writers or self._quiet(now)):
                return
            outage = self._outage(now)
            self._ended.append(outage)
            self._began, self._writers = None, {}
        log.warning(
            "writes to the database commit again (%s): they were refused for %.0f s",
            writer,
            outage.seconds(now),
        )

    def failing(self) -> Outage | None:
        """The outage under way, if the last write failed."""
        with self._lock:
            return None if self._began is None else self._outage(None)

    def ended(self) -> list[Outage]:
        """The outages that have ended and are not recorded yet (as events)."""
        with self._lock:
            return list(self._ended)

    def recorded(self, outage: Outage) -> None:
        """`outage` is in the event log: it is not handed over again."""
        with self._lock:
            self._ended.remove(outage)

    def failures(self) -> dict[str, int]:
        """Failed writes since this process started, by writer."""
        with self._lock:
            return dict(self._total)

    def _quiet(self, now: datetime) -> bool:
        assert self._last_refused is not None
        return (now - self._last_refused).total_seconds() >= QUIET_S

    def _outage(self, ended: datetime | None) -> Outage:
        assert self._began is not None
        writers = tuple(sorted(self._writers))
        return Outage(self._began, ended, writers, sum(self._writers.values()))

    def _notice(self, writer: str, kind: str, now: datetime) -> Notice:
        return Notice(
            event_id=-int(now.timestamp() * 1000),  # not in the event log: nothing commits
            at=now,
            severity=Severity.CRITICAL,
            category=Category.GOVERNOR,
            subject=f"replica {self.replica}",
            message=(
                f"the database refuses writes ({writer}: {kind}): metering, enforcement and "
                "stop orders are paused until it takes them again; this is not in the event "
                "log yet, it will be recorded when writes commit"
            ),
            budget_id=None,
            evidence={"writer": writer, "error": kind, "since": now.isoformat()},
        )
