"""The event log: every decision with the inputs that caused it, recorded, and read back a page
at a time as `Event`s. A decision is never rewritten or dropped.

An event identical to one recorded within the last `FOLD_WINDOW_S` (the same subject, message
and severity) is folded into that one: its `count` grows and its `last_at` moves on, and the
first one's evidence stands. A flood of the same warning is one line with a count, and is
told to the webhooks and the log once.

A routine event (an info observation: a checkpoint saved, a run's status, telemetry back, a
job's note) is no decision: once its budget is closed and it is old, the retention
(`event_retention`) may fold it with the others of its day into one line.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from governor.db import repository as repo
from governor.db.engine import after_commit
from governor.db.tables import EventRow, PodRow, RunRow
from governor.domain.model import Category, Severity
from governor.domain.paging import Page, PageRequest
from governor.domain.teams import EVERY_TEAM, TeamScope
from governor.services.notifications import hand_over

log = logging.getLogger("governor.events")
FOLD_WINDOW_S = 60.0
LEVEL = {
    Severity.INFO: logging.INFO,
    Severity.WARNING: logging.WARNING,
    Severity.CRITICAL: logging.CRITICAL,
}


def record(
    session: Session,
    now: datetime,
    severity: Severity,
    category: Category,
    subject: str,
    message: str,
    *,
    budget_id: str | None,
    evidence: Mapping[str, object] | None = None,
    always: bool = False,
    routine: bool = False,
) -> EventRow:
    """Record an event; a warning or critical one (or any with `always`) is told to the
    webhooks once its transaction commits. A `routine` one, if info, is an observation the
    retention may fold into its day's count once old (never a decision)."""
    since = now - timedelta(seconds=FOLD_WINDOW_S)
    folded = repo.foldable_event(session, severity, subject, message, since)
    if folded is not None:
        folded.count = EventRow.count + 1  # in SQL: folds from concurrent writers all count
        folded.last_at = max(folded.last_at, now)
        session.flush()
        return folded
    row = EventRow(
        at=now,
        severity=severity,
        category=category,
        subject=subject,
        budget_id=budget_id,
        message=message,
        evidence=dict(evidence or {}),
        count=1,
        last_at=now,
        routine=routine and severity is Severity.INFO,
    )
    session.add(row)
    after_commit(
        session, lambda: log.log(LEVEL[severity], "[%s] %s: %s", category.value, subject, message)
    )
    hand_over(session, row, always=always)
    return row


@dataclass(frozen=True)
class About:
    """The pod and the run an event is about, by id and by name: a run's event names its pod
    too; an event about neither (a budget's, a plan's, ...) names none."""

    pod_id: str | None = None
    pod_name: str | None = None
    run_id: str | None = None
    run_name: str | None = None


NEITHER = About()


def about(session: Session, rows: Iterable[EventRow]) -> dict[str, About]:
    """What the events' subjects name, by subject, in at most two statements."""
    subjects = {r.subject for r in rows}
    runs = [s.removeprefix("run:") for s in subjects if s.startswith("run:")]
    pods = [s.removeprefix("pod:") for s in subjects if s.startswith("pod:")]
    found: dict[str, About] = {}
    if runs:
        named = session.execute(
            select(RunRow.id, RunRow.name, PodRow.id, PodRow.name)
            .join(PodRow, PodRow.id == RunRow.pod_id)
            .where(RunRow.id.in_(runs))
        )
        for run_id, run_name, pod_id, pod_name in named:
            found[f"run:{run_id}"] = About(pod_id, pod_name, run_id, run_name)
    if pods:
        for pod_id, pod_name in session.execute(
            select(PodRow.id, PodRow.name).where(PodRow.id.in_(pods))
        ):
            found[f"pod:{pod_id}"] = About(pod_id, pod_name)
    return found


@dataclass(frozen=True)
class Event:
    id: int
    at: datetime
    severity: Severity
    category: Category
    subject: str
    budget_id: str | None
    message: str
    evidence: dict[str, Any]
    count: int = field(
        metadata={
            "doc": "How many events this one stands for: identical ones (the same subject, "
            "message and severity) each recorded within a minute of the one before are folded "
            "into it; on a day's fold (its evidence has `folded`), every routine event of its "
            "subject that day"
        }
    )
    last_at: datetime = field(metadata={"doc": "When the latest of them was recorded"})
    pod_id: str | None = field(metadata={"doc": "the pod it is about (a run's: its pod)"})
    pod_name: str | None = field(metadata={"doc": "that pod's name"})
    run_id: str | None = field(metadata={"doc": "the run it is about"})
    run_name: str | None = field(metadata={"doc": "that run's name"})


def event(row: EventRow, named: About) -> Event:
    return Event(
        id=row.id,
        at=row.at,
        severity=row.severity,
        category=row.category,
        subject=row.subject,
        budget_id=row.budget_id,
        message=row.message,
        evidence=row.evidence,
        count=row.count,
        last_at=row.last_at,
        pod_id=named.pod_id,
        pod_name=named.pod_name,
        run_id=named.run_id,
        run_name=named.run_name,
    )


def listed(session: Session, rows: Sequence[EventRow]) -> tuple[Event, ...]:
    """The events, in the order given, each naming its pod and run."""
    named = about(session, rows)
    return tuple(event(r, named.get(r.subject, NEITHER)) for r in rows)


def page(
    session: Session,
    request: PageRequest,
    *,
    budget_id: str | None = None,
    severity: Severity | None = None,
    min_severity: Severity | None = None,
    category: Category | None = None,
    subject: str | None = None,
    since: datetime | None = None,
    scope: TeamScope = EVERY_TEAM,
) -> Page[Event]:
    """A page of the event log, newest first: `severity` is that one alone, `min_severity` it
    or worse; for a team's scope, its budgets' events alone."""
    rows = repo.events_page(
        session,
        request,
        budget_id=budget_id,
        severity=severity,
        min_severity=min_severity,
        category=category,
        subject=subject,
        since=since,
        scope=scope,
    )
    return Page(list(listed(session, rows.items)), rows.next_cursor)
