"""A notice a webhook never got is recorded as an event: it is then on the dashboard, in the
event log, in `governor_events_total` and told to the other webhooks.

The message leaves out the notice it missed (that is in the evidence), so a webhook that is
down for a while is one event whose count grows, not one event per missed notice.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy.orm import Session, sessionmaker

from governor.db.engine import unit_of_work
from governor.domain.model import Category, Severity
from governor.domain.ports import Clock
from governor.services import events
from governor.services.notifications import GAVE_UP_SUBJECT, GaveUp


def recorder(sessions: sessionmaker[Session], clock: Clock) -> Callable[[GaveUp], None]:
    """What the notifier calls when a sink gives up on a notice."""

    def record(gave_up: GaveUp) -> None:
        missed = gave_up.notice
        with unit_of_work(sessions) as session:
            events.record(
                session,
                clock.now(),
                Severity.WARNING,
                Category.GOVERNOR,
                GAVE_UP_SUBJECT + gave_up.sink,
                f"The {gave_up.sink} did not take a notice after {gave_up.attempts} attempt(s) "
                f"({gave_up.detail}): what it missed is in the event log.",
                budget_id=missed.budget_id,
                evidence={
                    "sink": gave_up.sink,
                    "attempts": gave_up.attempts,
                    "detail": gave_up.detail,
                    "event_id": missed.event_id,
                    "subject": missed.subject,
                    "message": missed.message,
                },
            )

    return record
