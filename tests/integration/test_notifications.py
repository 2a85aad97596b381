"""Events reach the notifier only after their transaction commits (SQLite and PostgreSQL)."""

from __future__ import annotations

import pytest

from governor.domain.model import Category, Severity
from governor.services import events
from governor.services.notifications import Notifier, Subscription, route_events
from tests.integration.conftest import Governor
from tests.unit.services.test_notifications import FakeSink


class Boom(Exception):
    pass


def record(gov: Governor, severity: Severity, message: str) -> None:
    with gov.session() as s:
        events.record(
            s, gov.clock.now(), severity, Category.HARNESS, "run:r1", message, budget_id=None
        )


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
    assert all(n.severity is Severity.CRITICAL for n in sink.attempts)
