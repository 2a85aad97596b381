"""The notifier: per-sink minimum severity, bounded retries with backoff, each event at most
once per sink, identical messages collapsed within a window, a caller never blocked, every
attempt counted, and a notice given up on handed over (once, and not to the sink itself)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from governor.domain.model import Category, Severity
from governor.domain.notice import Delivery, Notice, Outcome
from governor.services.notifications import GaveUp, Notifier, Retry, Subscription

T0 = datetime(2026, 1, 1, tzinfo=UTC)
FAST = Retry(max_attempts=3, backoff_s=0.01)
Start = Callable[..., Notifier]


class FakeSink:
    """Records every attempt; answers with `script` first, then delivers."""

    def __init__(self, *script: Outcome | Exception, called: str = "fake sink") -> None:
        self.called = called
        self.script = list(script)
        self.attempts: list[Notice] = []
        self.closed = False
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        return self.called

    def send(self, notice: Notice) -> Delivery:
        with self._lock:
            self.attempts.append(notice)
            answer = self.script.pop(0) if self.script else Outcome.DELIVERED
        if isinstance(answer, Exception):
            raise answer
        return Delivery(answer, "scripted")

    def close(self) -> None:
        self.closed = True

    def ids(self) -> list[int]:
        with self._lock:
            return [n.event_id for n in self.attempts]


def notice(
    event_id: int,
    severity: Severity = Severity.WARNING,
    message: str | None = None,
    after_s: float = 0.0,
) -> Notice:
    return Notice(
        event_id=event_id,
        at=T0 + timedelta(seconds=after_s),
        severity=severity,
        category=Category.HARNESS,
        subject="run:r1",
        message=message or f"event {event_id}",
        budget_id="bud_1",
    )


def about(event_id: int, sink: str) -> Notice:
    """What the server records when `sink` gave up on a notice."""
    return replace(notice(event_id), subject=f"webhook:{sink}")


def eventually(check: Callable[[], bool], timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)


@pytest.fixture
def started() -> Iterator[Start]:
    notifiers: list[Notifier] = []

    def make(*subscriptions: Subscription, **options: object) -> Notifier:
        notifier = Notifier(subscriptions, retry=FAST, **options)  # type: ignore[arg-type]
        notifier.start()
        notifiers.append(notifier)
        return notifier

    yield make
    for notifier in notifiers:
        notifier.stop()


def test_each_sink_gets_what_reaches_its_minimum_severity(started: Start) -> None:
    warnings, criticals = FakeSink(), FakeSink()
    notifier = started(
        Subscription(warnings, Severity.WARNING), Subscription(criticals, Severity.CRITICAL)
    )
    notifier.submit(notice(1, Severity.INFO))
    notifier.submit(notice(2, Severity.WARNING))
    notifier.submit(notice(3, Severity.CRITICAL))
    notifier.stop()
    assert warnings.ids() == [2, 3]
    assert criticals.ids() == [3]


def test_a_retryable_failure_is_retried_until_delivered(started: Start) -> None:
    sink = FakeSink(Outcome.RETRYABLE, RuntimeError("sink bug"))
    notifier = started(Subscription(sink))
    notifier.submit(notice(1))
    eventually(lambda: len(sink.ids()) == 3)
    time.sleep(0.1)
    assert sink.ids() == [1, 1, 1]  # the third attempt delivered: no fourth


def test_retries_are_bounded_and_spaced_by_a_growing_backoff(started: Start) -> None:
    sink = FakeSink(*[Outcome.RETRYABLE] * 10)
    started(Subscription(sink), dedupe_window_s=0).submit(notice(1))
    eventually(lambda: len(sink.ids()) == FAST.max_attempts)
    time.sleep(0.2)
    assert sink.ids() == [1] * FAST.max_attempts
    assert [FAST.delay_s(n) for n in (1, 2, 3)] == [0.01, 0.02, 0.04]
    assert Retry(backoff_s=1, max_backoff_s=60).delay_s(20) == 60


def test_a_permanent_failure_is_not_retried(started: Start) -> None:
    sink = FakeSink(Outcome.PERMANENT)
    notifier = started(Subscription(sink))
    notifier.submit(notice(1))
    notifier.submit(notice(2))
    notifier.stop()
    assert sink.ids() == [1, 2]


def test_a_slow_retry_does_not_hold_up_other_notices() -> None:
    sink = FakeSink(Outcome.RETRYABLE)
    notifier = Notifier([Subscription(sink)], retry=Retry(max_attempts=2, backoff_s=30))
    notifier.start()
    try:
        notifier.submit(notice(1))
        notifier.submit(notice(2))
        eventually(lambda: sink.ids() == [1, 2])
    finally:
        notifier.stop(timeout_s=2)


def test_the_same_event_is_never_delivered_twice_to_a_sink(started: Start) -> None:
    sink = FakeSink()
    notifier = started(Subscription(sink), dedupe_window_s=0)
    for _ in range(3):
        notifier.submit(notice(7))
    notifier.stop()
    assert sink.ids() == [7]


def test_identical_messages_within_the_window_collapse(started: Start) -> None:
    sink = FakeSink()
    notifier = started(Subscription(sink), dedupe_window_s=60)
    notifier.submit(notice(1, message="GPU 0 could not be read"))
    notifier.submit(notice(2, message="GPU 0 could not be read", after_s=30))
    notifier.submit(notice(3, message="GPU 1 could not be read", after_s=31))
    notifier.submit(notice(4, message="GPU 0 could not be read", after_s=61))
    notifier.submit(notice(5, Severity.CRITICAL, message="GPU 0 could not be read", after_s=62))
    notifier.stop()
    assert sink.ids() == [1, 3, 4, 5]  # a different severity is a different message


def test_submitting_never_blocks_even_when_the_queue_is_full() -> None:
    sink = FakeSink()
    notifier = Notifier([Subscription(sink)], queue_size=2)  # never started: nothing drains
    began = time.monotonic()
    for n in range(100):
        notifier.submit(notice(n))
    assert time.monotonic() - began < 1.0
    notifier.start()
    notifier.stop()
    assert sink.ids() == [0, 1]


def test_stopping_delivers_what_is_queued_and_closing_closes_the_sinks() -> None:
    sink = FakeSink()
    notifier = Notifier([Subscription(sink)])
    for n in range(5):
        notifier.submit(notice(n))
    notifier.start()
    notifier.stop()
    assert sink.ids() == [0, 1, 2, 3, 4]
    notifier.close()
    assert sink.closed


def test_every_attempt_is_counted_by_sink_and_outcome(started: Start) -> None:
    flaky = FakeSink(Outcome.RETRYABLE, called="flaky")
    down = FakeSink(*[Outcome.RETRYABLE] * 10, called="down")
    notifier = started(Subscription(flaky), Subscription(down))
    assert set(notifier.deliveries().values()) == {0}  # every series from the start
    notifier.submit(notice(1))
    eventually(lambda: notifier.deliveries()["down", "gave_up"] == 1)
    assert notifier.deliveries() == {
        ("flaky", "delivered"): 1,
        ("flaky", "failed"): 1,
        ("flaky", "gave_up"): 0,
        ("down", "delivered"): 0,
        ("down", "failed"): FAST.max_attempts - 1,
        ("down", "gave_up"): 1,
    }


def test_a_notice_given_up_on_is_handed_over_once_and_never_back_to_its_sink(
    started: Start,
) -> None:
    up, down = FakeSink(called="up"), FakeSink(*[Outcome.PERMANENT] * 10, called="down")
    given_up: list[GaveUp] = []
    notifier = started(Subscription(up), Subscription(down), gave_up=given_up.append)
    notifier.submit(notice(1))
    eventually(lambda: len(given_up) == 1)
    assert (given_up[0].sink, given_up[0].notice.event_id) == ("down", 1)
    assert (given_up[0].attempts, given_up[0].detail) == (1, "scripted")
    notifier.submit(about(2, "down"))  # the server's event about it: told to the others only
    notifier.submit(about(3, "up"))  # "down" refuses this one too, but it is not recorded again
    notifier.stop()
    assert up.ids() == [1, 2] and down.ids() == [1, 3]
    assert len(given_up) == 1


def test_a_hook_that_fails_does_not_stop_the_worker(started: Start) -> None:
    def broken(_: GaveUp) -> None:
        raise RuntimeError("database down")

    sink = FakeSink(Outcome.PERMANENT)
    notifier = started(Subscription(sink), gave_up=broken)
    notifier.submit(notice(1))
    notifier.submit(notice(2))
    notifier.stop()
    assert sink.ids() == [1, 2]


def test_a_notice_for_every_sink_reaches_each_whatever_its_minimum(started: Start) -> None:
    criticals = FakeSink()
    notifier = started(Subscription(criticals, Severity.CRITICAL))
    notifier.submit(notice(1, Severity.INFO))
    notifier.submit(replace(notice(2, Severity.INFO), always=True))
    notifier.stop()
    assert criticals.ids() == [2]
