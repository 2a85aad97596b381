"""An event of the log as it is read, and the log read a page at a time."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from governor.db import repository as repo
from governor.db.tables import EventRow
from governor.domain.model import Category, Severity
from governor.domain.paging import Page, PageRequest


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
            "doc": "How many identical events (the same subject, message and severity) this "
            "one stands for: each recorded within a minute of the one before is folded into it"
        }
    )
    last_at: datetime = field(metadata={"doc": "When the latest of them was recorded"})


def event(row: EventRow) -> Event:
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
    )


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
) -> Page[Event]:
    """A page of the event log, newest first: `severity` is that one alone, `min_severity` it
    or worse."""
    rows = repo.events_page(
        session,
        request,
        budget_id=budget_id,
        severity=severity,
        min_severity=min_severity,
        category=category,
        subject=subject,
        since=since,
    )
    return Page([event(r) for r in rows.items], rows.next_cursor)
