"""The append-only event log: every decision with the inputs that caused it.

An event identical to one recorded within the last `FOLD_WINDOW_S` (the same subject, message
and severity) is folded into that one: its `count` grows and its `last_at` moves on, and the
first one's evidence stands. A flood of the same warning is one line with a count, and is
told to the webhooks and the log once.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import datetime, timedelta

from sqlalchemy.orm import Session

from governor.db import repository as repo
from governor.db.engine import after_commit
from governor.db.tables import EventRow
from governor.domain.model import Category, Severity
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
) -> EventRow:
    """Record an event; a warning or critical one (or any with `always`) is told to the
    webhooks once its transaction commits."""
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
    )
    session.add(row)
    after_commit(
        session, lambda: log.log(LEVEL[severity], "[%s] %s: %s", category.value, subject, message)
    )
    hand_over(session, row, always=always)
    return row
