"""Events reach the notifier only after their transaction commits (SQLite and PostgreSQL);
one notice per cause, and one when a stop is done; a webhook that gives up is an event."""

from __future__ import annotations

import time
from collections.abc import Callable
from decimal import Decimal

import pytest

from governor.db import repository as repo
from governor.db.tables import EventRow
from governor.domain.model import Category, Severity
from governor.domain.notice import Outcome
from governor.services import events
from governor.services.fleet import pods
from governor.services.notifications import Notifier, Retry, Subscription, route_events
from governor.services.replica import undelivered
from tests.integration.conftest import BY, Governor
from tests.unit.services.test_notifications import FakeSink


class Boom(Exception):
    pass


def record(gov: Governor, severity: Severity, message: str) -> None:
    with gov.session() as s:
        events.record(
            s, gov.clock.now(), severity, Category.HARNESS, "run:r1", message, budget_id=None
        )


def wait_for_event(gov: Governor, subject: str, count: int) -> EventRow:
    """The one event about `subject`, once it stands for `count` (written by another thread)."""
    deadline = time.monotonic() + 30
    while True:
        with gov.session() as s:
            found = [e for e in repo.events(s, limit=100) if e.subject == subject]
        if found and found[0].count >= count:
            [event] = found
            return event
        assert time.monotonic() < deadline, f"no event about {subject} counted {count} times"
        time.sleep(0.01)


def test_committed_warnings_and_criticals_are_handed_over_once(gov: Governor) -> None:
    sink = FakeSink()
    notifier = Notifier([Subscription(sink, Severity.WARNING)])
    route_events(gov.ctx.sessions, notifier)
    record(gov, Severity.INFO, "a note")
    record(gov, Severity.WARNING, "dataloader crashed")
    with pytest.raises(Boom), gov.session() as s:
        events.record(
            s, gov.clock.now(), Severity.CRITICAL, Category.MODEL, "run:r1", "OOM", budget_id=None
        )
        raise Boom  # rolled back: no event, no notification
    record(gov, Severity.CRITICAL, "the pod is still billing")
    notifier.start()
    notifier.stop()
    assert [n.message for n in sink.attempts] == ["dataloader crashed", "the pod is still billing"]
    assert all(n.event_id > 0 for n in sink.attempts)


def test_a_scheduler_pass_notifies_what_it_decides(gov: Governor) -> None:
    sink = FakeSink()
    notifier = Notifier([Subscription(sink, Severity.CRITICAL)])
    route_events(gov.ctx.sessions, notifier)
    budget = gov.budget(ceiling="1.00")
    gov.pod(budget)
    gov.tick(1000)  # over the ceiling: the stop is ordered
    gov.tick(60)  # and carried out: the budget is exhausted (critical)
    notifier.start()
    notifier.stop()
    assert any("exhausted" in n.message for n in sink.attempts), sink.attempts
    done = [n for n in sink.attempts if n.always]
    assert [n.message for n in done] == [
        "Pod stopped; its workspace is kept and its storage is still counted."
    ]  # a completed stop goes to every sink
    assert all(n.severity is Severity.CRITICAL for n in sink.attempts if not n.always)


def told(gov: Governor, sink: FakeSink, act: Callable[[], None]) -> list[str]:
    """What `sink` (warnings and up) is told while `act` runs."""
    notifier = Notifier([Subscription(sink, Severity.WARNING)])
    route_events(gov.ctx.sessions, notifier)
    act()
    notifier.start()
    notifier.stop()
    return [n.message for n in sink.attempts]


def test_a_manual_stop_is_one_notice_and_its_end_another(gov: Governor) -> None:
    budget = gov.budget()
    pod = gov.pod(budget)

    def stop() -> None:
        with gov.session() as s:
            pods.stop_manually(s, gov.ctx, pod, "wrong image", gov.clock.now(), by=BY)
        gov.tick(1)  # no job to wait for: the provider is asked
        gov.tick(60)  # and has stopped it

    assert told(gov, FakeSink(), stop) == [
        "Pod stop asked by operator token 'tests' (tok_tests): wrong image",
        "Pod stopped; its workspace is kept and its storage is still counted.",
    ]


def test_a_lost_heartbeat_is_one_notice_and_its_end_another(gov: Governor) -> None:
    budget = gov.budget()
    pod = gov.pod(budget)
    run = gov.run(budget, pod, timeout_s=120)
    gov.beat(run)
    sink = FakeSink()

    def go_silent() -> None:
        gov.tick(200)  # past the timeout: the stop is ordered, no wait for a save
        gov.tick(1)
        gov.tick(60)

    messages = told(gov, sink, go_silent)
    assert len(messages) == 2, messages
    assert messages[0].startswith("Stop ordered (heartbeat-lost): No heartbeat for 200 s")
    assert messages[1] == "Pod stopped; its workspace is kept and its storage is still counted."
    assert [n.severity for n in sink.attempts] == [Severity.CRITICAL, Severity.INFO]
    assert sink.attempts[1].always  # told even to sinks that take only critical ones
    with gov.session() as s:  # the rest is on record, for the report and the dashboard
        recorded = [e.message for e in repo.events(s, limit=100)]
    assert any(m.startswith("Run lost: its job went silent") for m in recorded)
    assert any(m.startswith("The stop deadline passed") for m in recorded)


def test_a_notice_carries_its_budgets_name_and_money(gov: Governor) -> None:
    sink = FakeSink()
    budget = gov.budget(ceiling="1.00")
    gov.pod(budget)
    told(gov, sink, lambda: gov.tick(1000))  # over the ceiling: a critical stop order
    [ordered] = [n for n in sink.attempts if n.message.startswith("Stop ordered (ceiling)")]
    assert ordered.budget_name == "pilot"
    assert ordered.money is not None
    assert (ordered.money.spent, ordered.money.ceiling) == (Decimal("1.00"), Decimal("1.00"))
    assert ordered.money.remaining < 0  # committed includes what stopping will cost


def test_a_webhook_that_gives_up_is_recorded_once_told_to_the_others_and_counted(
    gov: Governor,
) -> None:
    up, down = FakeSink(called="up"), FakeSink(*[Outcome.PERMANENT] * 10, called="down")
    notifier = Notifier(
        [Subscription(up), Subscription(down)],
        retry=Retry(max_attempts=2, backoff_s=0.01),
        gave_up=undelivered.recorder(gov.ctx.sessions, gov.clock),
    )
    route_events(gov.ctx.sessions, notifier)
    notifier.start()
    try:
        record(gov, Severity.CRITICAL, "the pod is still billing")
        record(gov, Severity.WARNING, "disk almost full")
        gave_up = wait_for_event(gov, "webhook:down", 2)  # folded: one line with a count
    finally:
        notifier.stop()
    assert gave_up.severity is Severity.WARNING
    assert gave_up.message == (
        "The down did not take a notice after 1 attempt(s) (scripted): what it missed is in "
        "the event log."
    )
    assert gave_up.evidence["message"] == "the pod is still billing"
    assert [n.message for n in down.attempts] == ["the pod is still billing", "disk almost full"]
    assert sorted(n.message for n in up.attempts) == sorted(
        ["the pod is still billing", "disk almost full", gave_up.message]
    )
    assert notifier.deliveries()["down", "gave_up"] == 2
    assert notifier.deliveries()["up", "delivered"] == 3
