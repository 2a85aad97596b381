"""Telling people: warning and critical events go out to webhook sinks, off the request path.

An event is handed over only once its transaction has committed; a worker thread (started
and stopped by the app's lifespan) delivers it to every sink whose minimum severity it
reaches, retrying retryable failures with exponential backoff a bounded number of times.
A sink gets each event at most once from this process, and a message identical to one it
got within the de-duplication window is collapsed (not sent again). Nothing here ever
blocks or fails the caller: a full queue drops the notice with a log line, and the event
itself is always in the log. Every attempt is counted by sink and outcome (for /metrics);
a notice a sink never got is handed to `gave_up`, which records it as an event: the other
sinks are told, and the one that gave up is not asked again about itself.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import logging
import queue
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy.orm import Session, sessionmaker

from governor.db.engine import after_commit
from governor.db.tables import BudgetRow, EventRow
from governor.domain.backoff import backoff_s
from governor.domain.ledger import figures_of
from governor.domain.model import Severity
from governor.domain.notice import Delivery, Money, Notice, Outcome, Sink, at_least

log = logging.getLogger("governor.notify")

SESSION_KEY = "governor.notifier"
REMEMBERED_EVENTS = 10_000  # per sink: ids already taken, so none is sent twice
GAVE_UP_SUBJECT = "webhook:"  # + the sink's name: the subject of an event about a sink
# what became of each attempt: taken, failed (to be tried again), or the last one failed
DELIVERED, FAILED, GAVE_UP = "delivered", "failed", "gave_up"
OUTCOMES = (DELIVERED, FAILED, GAVE_UP)


@dataclass(frozen=True)
class Subscription:
    sink: Sink
    min_severity: Severity = Severity.WARNING


@dataclass(frozen=True)
class Retry:
    max_attempts: int = 5
    backoff_s: float = 1.0
    max_backoff_s: float = 60.0

    def delay_s(self, attempt: int) -> float:
        """The wait after failed attempt number `attempt`: backoff, doubling, capped."""
        return backoff_s(attempt, first_s=self.backoff_s, most_s=self.max_backoff_s)


@dataclass(frozen=True)
class GaveUp:
    """A notice a sink will not get: its last attempt failed, or the sink refused it for good."""

    sink: str
    notice: Notice
    attempts: int
    detail: str


@dataclass(order=True)
class _Job:
    due: float
    seq: int
    subscription: int = field(compare=False)
    notice: Notice = field(compare=False)
    attempt: int = field(default=1, compare=False)


@dataclass
class _SinkMemory:
    """What one sink has already been given: event ids, and when it last saw each message."""

    events: OrderedDict[int, None] = field(default_factory=OrderedDict)
    messages: dict[tuple[str, str, str, str], datetime] = field(default_factory=dict)


class Notifier:
    def __init__(
        self,
        subscriptions: Sequence[Subscription],
        *,
        retry: Retry | None = None,
        dedupe_window_s: float = 300.0,
        queue_size: int = 10_000,
        monotonic: Callable[[], float] = time.monotonic,
        gave_up: Callable[[GaveUp], None] | None = None,
    ) -> None:
        self.subscriptions = tuple(subscriptions)
        self.retry = retry or Retry()
        self.dedupe_window_s = dedupe_window_s
        self._monotonic = monotonic
        self._gave_up = gave_up
        self._counts = {(s.sink.name, o): 0 for s in self.subscriptions for o in OUTCOMES}
        self._counts_lock = threading.Lock()
        self._inbox: queue.Queue[Notice | None] = queue.Queue(maxsize=queue_size)
        self._jobs: list[_Job] = []
        self._seq = itertools.count()
        self._memory = [_SinkMemory() for _ in self.subscriptions]
        self._thread: threading.Thread | None = None

    # the caller's side: never blocks, never raises

    def submit(self, notice: Notice) -> None:
        try:
            self._inbox.put_nowait(notice)
        except queue.Full:
            log.warning("notification queue full: event %s not sent", notice.event_id)

    def deliveries(self) -> dict[tuple[str, str], int]:
        """Attempts so far, by sink and outcome (every pair, from zero), for /metrics."""
        with self._counts_lock:
            return dict(self._counts)

    # the worker

    def start(self) -> None:
        if self._thread is not None:
            return
        self._thread = threading.Thread(target=self._run, name="governor-notify", daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float = 5.0) -> None:
        """Deliver what is already queued (within `timeout_s`); retries still waiting are lost."""
        thread, self._thread = self._thread, None
        if thread is None:
            return
        with contextlib.suppress(queue.Full):  # the worker is behind; the join still waits
            self._inbox.put(None, timeout=timeout_s)
        thread.join(timeout_s)
        if thread.is_alive():
            log.warning("the notification worker did not finish within %g s", timeout_s)
        elif self._jobs:
            log.warning("%d notification retries dropped at shutdown", len(self._jobs))
            self._jobs.clear()

    def close(self) -> None:
        for subscription in self.subscriptions:
            subscription.sink.close()

    def _run(self) -> None:
        while True:
            wait = None if not self._jobs else max(0.0, self._jobs[0].due - self._monotonic())
            try:
                notice = self._inbox.get(timeout=wait)
            except queue.Empty:
                notice = None
            else:
                if notice is None:
                    self._drain()
                    return
                self._accept(notice)
            self._work_due()

    def _drain(self) -> None:
        """At shutdown: whatever is due now goes out once; nothing waits for a backoff."""
        while True:
            try:
                notice = self._inbox.get_nowait()
            except queue.Empty:
                break
            if notice is not None:
                self._accept(notice)
        self._work_due()

    def _accept(self, notice: Notice) -> None:
        for index, subscription in enumerate(self.subscriptions):
            if notice.subject == GAVE_UP_SUBJECT + subscription.sink.name:
                continue  # news that this sink is not taking notices: it would not take it
            wanted = notice.always or at_least(notice.severity, subscription.min_severity)
            if wanted and self._first_time(self._memory[index], notice):
                self._schedule(_Job(self._monotonic(), next(self._seq), index, notice))

    def _first_time(self, memory: _SinkMemory, notice: Notice) -> bool:
        if notice.event_id in memory.events:
            return False
        memory.events[notice.event_id] = None
        if len(memory.events) > REMEMBERED_EVENTS:
            memory.events.popitem(last=False)
        for key, at in list(memory.messages.items()):
            if (notice.at - at).total_seconds() >= self.dedupe_window_s:
                del memory.messages[key]
        last = memory.messages.get(notice.fingerprint)
        if last is not None and abs((notice.at - last).total_seconds()) < self.dedupe_window_s:
            log.info("event %s collapsed into an identical message sent before", notice.event_id)
            return False
        memory.messages[notice.fingerprint] = notice.at
        return True

    def _schedule(self, job: _Job) -> None:
        heapq.heappush(self._jobs, job)

    def _work_due(self) -> None:
        while self._jobs and self._jobs[0].due <= self._monotonic():
            self._attempt(heapq.heappop(self._jobs))

    def _attempt(self, job: _Job) -> None:
        sink = self.subscriptions[job.subscription].sink
        delivery = _send(sink, job.notice)
        if delivery.outcome is Outcome.DELIVERED:
            self._count(sink, DELIVERED)
            return
        if delivery.outcome is Outcome.RETRYABLE and job.attempt < self.retry.max_attempts:
            self._count(sink, FAILED)
            delay = self.retry.delay_s(job.attempt)
            log.info(
                "%s: event %s attempt %d failed (%s); retrying in %g s",
                sink.name,
                job.notice.event_id,
                job.attempt,
                delivery.detail,
                delay,
            )
            job.due, job.attempt = self._monotonic() + delay, job.attempt + 1
            self._schedule(job)
            return
        self._count(sink, GAVE_UP)
        log.warning(
            "%s: gave up on event %s after %d attempt(s): %s",
            sink.name,
            job.notice.event_id,
            job.attempt,
            delivery.detail,
        )
        if self._gave_up is not None and not job.notice.subject.startswith(GAVE_UP_SUBJECT):
            # one about a sink that gave up is not recorded again: sinks that are all down
            # would otherwise tell each other about each other without end
            try:
                self._gave_up(GaveUp(sink.name, job.notice, job.attempt, delivery.detail))
            except Exception:  # the database may be what is down: the log line stands
                log.exception("could not record that %s gave up", sink.name)

    def _count(self, sink: Sink, outcome: str) -> None:
        with self._counts_lock:
            self._counts[sink.name, outcome] = self._counts.get((sink.name, outcome), 0) + 1


def _send(sink: Sink, notice: Notice) -> Delivery:
    try:
        return sink.send(notice)
    except Exception as exc:  # a sink bug must not kill the worker: treat it as retryable
        log.exception("%s failed on event %s", sink.name, notice.event_id)
        return Delivery(Outcome.RETRYABLE, f"{type(exc).__name__}: {exc}")


# wiring events to the notifier


def route_events(sessions: sessionmaker[Session], notifier: Notifier) -> None:
    """Have every session from `sessions` hand its committed events to `notifier`."""
    sessions.configure(info={SESSION_KEY: notifier})


def hand_over(session: Session, row: EventRow, *, always: bool = False) -> None:
    """Queue `row` for the session's notifier once (and only if) its transaction commits:
    a warning or a critical one, or any with `always` (see Notice)."""
    notifier = session.info.get(SESSION_KEY)
    if notifier is None or (row.severity is Severity.INFO and not always):
        return
    budget = None if row.budget_id is None else session.get(BudgetRow, row.budget_id)
    after_commit(session, lambda: notifier.submit(notice_of(row, budget, always=always)))


def notice_of(row: EventRow, budget: BudgetRow | None, *, always: bool = False) -> Notice:
    """The event as it leaves, with its budget's name and figures (as of the latest pass)."""
    return Notice(
        event_id=row.id,
        at=row.at,
        severity=row.severity,
        category=row.category,
        subject=row.subject,
        message=row.message,
        budget_id=row.budget_id,
        evidence=dict(row.evidence),
        budget_name=None if budget is None else budget.name,
        money=None if budget is None else _money(budget),
        always=always,
    )


def _money(budget: BudgetRow) -> Money | None:
    kept = figures_of(budget)
    return None if kept is None else Money(kept)  # None: no enforcement pass looked at it yet
