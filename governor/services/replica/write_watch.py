"""When the database refuses writes: a flag set by the writer that failed, cleared by the next
write that commits. Readiness and /metrics read it at once (nothing is probed with a write);
nothing can be committed meanwhile, so the webhooks hear of it from memory (once per outage),
and once writes commit again the outage, from its first failure to its end, is handed to
whoever records it as a critical event.

The log gets one line per writer and kind of failure per minute, not one per request.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from governor.domain.model import Category, Severity
from governor.domain.notice import Notice
from governor.services.security.windows import FixedWindows

log = logging.getLogger("governor.writes")
LOG_WINDOW_S = 60.0


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
        self._logged = FixedWindows(LOG_WINDOW_S, monotonic=monotonic)
        self._lock = threading.Lock()
        self._began: datetime | None = None
        self._writers: dict[str, int] = {}
        self._ended: list[Outage] = []
        self._total: dict[str, int] = {}

    def failed(self, writer: str, exc: BaseException, now: datetime) -> None:
        """`writer` could not write (its transaction raised `exc`)."""
        with self._lock:
            first = self._began is None
            if first:
                self._began = now
            self._writers[writer] = self._writers.get(writer, 0) + 1
            self._total[writer] = self._total.get(writer, 0) + 1
        kind = self.say(f"{writer} could not write to the database", exc)
        if first and self._notify is not None:
            self._notify(self._notice(writer, kind, now))

    def say(self, what: str, exc: BaseException) -> str:
        """Log `what` and why, once a minute for each kind of failure; returns the kind."""
        cause = getattr(exc, "orig", None) or exc
        kind = type(cause).__name__
        if self._logged.add((what, kind)) == 1:
            detail = (str(cause).strip().splitlines() or [""])[0]
            log.error("%s (%s: %s); said once a minute while it lasts", what, kind, detail)
        return kind

    def succeeded(self, now: datetime) -> None:
        """A write committed: an outage under way has ended."""
        if self._began is None:  # the usual case: no lock taken
            return
        with self._lock:
            if self._began is None:
                return
            self._ended.append(self._outage(now))
            self._began, self._writers = None, {}
        log.warning("writes to the database commit again")

    def failing(self) -> Outage | None:
        """The outage under way, if the last write failed."""
        with self._lock:
            return None if self._began is None else self._outage(None)

    def ended(self) -> list[Outage]:
        """The outages that have ended since last asked (to be recorded as events)."""
        with self._lock:
            ended, self._ended = self._ended, []
            return ended

    def failures(self) -> dict[str, int]:
        """Failed writes since this process started, by writer."""
        with self._lock:
            return dict(self._total)

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
