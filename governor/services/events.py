"""The append-only event log: every decision with the inputs that caused it."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import datetime

from sqlalchemy.orm import Session

from governor.db.engine import after_commit
from governor.db.tables import EventRow
from governor.domain.model import Category, Severity
from governor.services.notifications import hand_over

log = logging.getLogger("governor.events")
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
) -> EventRow:
    row = EventRow(
        at=now,
        severity=severity,
        category=category,
        subject=subject,
        budget_id=budget_id,
        message=message,
        evidence=dict(evidence or {}),
    )
    session.add(row)
    after_commit(
        session, lambda: log.log(LEVEL[severity], "[%s] %s: %s", category.value, subject, message)
    )
    hand_over(session, row)
    return row
