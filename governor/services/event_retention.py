"""The event log's retention: a closed budget's routine events (info observations, never a
decision), once older than the retention, are folded into one line per day and subject.

A day's fold is the first of its rows, kept in its place: its `count` is every occurrence
the day's rows held, its `at` and `last_at` the first and the latest of them, its message
says so, and its evidence (`folded`) names the day, the rows it stands for and the first and
the last message. The other rows are dropped. A day with a single routine event of a subject
keeps it as it was.

What a budget's report shows never changes: the events its timeline lists (the latest
`report_timeline_events` of the budget) are kept as they are, it counts a fold as the rows it
stands for, and its failures list warnings alone. Routine events with no budget belong to no
report and fold the same way; those of a budget still open wait for its closure. Warning
and critical events and every decision are kept for good.

A pass looks at `BATCH` routine events at most, each once: it marks them (`folded_rows`),
so a second pass over the same events changes nothing.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from datetime import UTC, date, datetime, timedelta
from typing import Any

from sqlalchemy import delete, or_, select
from sqlalchemy.orm import Session

from governor.db.tables import BudgetRow, EventRow
from governor.domain.model import BudgetState, Category

BATCH = 2_000  # routine events one transaction looks at, at most
UNLISTED = 2**63  # no report lists an event with no budget: every one may fold

Key = tuple[str | None, Category, str, date]  # budget, category, subject, day


def fold(session: Session, now: datetime, keep_s: float, timeline: int) -> int:
    """Fold the routine events older than `keep_s` of closed budgets (and of none) into one
    line per day, never one a report's timeline of `timeline` events lists. Returns how many
    routine events it looked at: fewer than `BATCH`, none are left to look at."""
    rows = session.scalars(
        select(EventRow)
        .outerjoin(BudgetRow, BudgetRow.id == EventRow.budget_id)
        .where(
            EventRow.routine,
            EventRow.folded_rows.is_(None),
            EventRow.at < now - timedelta(seconds=keep_s),
            or_(EventRow.budget_id.is_(None), BudgetRow.state == BudgetState.CLOSED),
        )
        .order_by(EventRow.id)
        .limit(BATCH)
    ).all()
    below = {b: _unlisted_below(session, b, timeline) for b in {r.budget_id for r in rows}}
    days: dict[Key, list[EventRow]] = defaultdict(list)
    for row in rows:
        if row.id < below[row.budget_id]:
            days[_key(row)].append(row)
        else:
            row.folded_rows = 1  # the budget's report lists it: kept as it is
    folds = _folds(session, days, below)
    dropped = [r.id for key, day_rows in days.items() for r in _fold_day(folds.get(key), day_rows)]
    if dropped:
        session.execute(delete(EventRow).where(EventRow.id.in_(dropped)))
    return len(rows)


def _unlisted_below(session: Session, budget_id: str | None, timeline: int) -> int:
    """The ids the budget's report does not list are below this one: the oldest it lists."""
    if budget_id is None:
        return UNLISTED
    oldest_listed = session.scalar(
        select(EventRow.id)
        .where(EventRow.budget_id == budget_id)
        .order_by(EventRow.id.desc())
        .offset(timeline - 1)
        .limit(1)
    )
    return 0 if oldest_listed is None else oldest_listed  # fewer than `timeline`: all listed


def _key(row: EventRow) -> Key:
    return row.budget_id, row.category, row.subject, row.at.date()


def _folds(
    session: Session, days: dict[Key, list[EventRow]], below: dict[str | None, int]
) -> dict[Key, EventRow]:
    """The lines an earlier batch kept for these days, to fold the rest of each day into."""
    if not days:
        return {}
    first, last = min(k[3] for k in days), max(k[3] for k in days)
    kept = session.scalars(
        select(EventRow).where(
            EventRow.routine,
            EventRow.folded_rows.is_not(None),
            EventRow.subject.in_({k[2] for k in days}),
            EventRow.at >= _midnight(first),
            EventRow.at < _midnight(last) + timedelta(days=1),
        )
    )
    return {_key(r): r for r in kept if _key(r) in days and r.id < below[r.budget_id]}


def _midnight(day: date) -> datetime:
    return datetime(day.year, day.month, day.day, tzinfo=UTC)


def _fold_day(kept: EventRow | None, rows: Sequence[EventRow]) -> Sequence[EventRow]:
    """Fold a day's rows (oldest first) into the line kept for it, or into the first; returns
    the rows folded into it, to drop."""
    if kept is None and len(rows) == 1:
        rows[0].folded_rows = 1  # alone on its day: kept as it was
        return ()
    line, rest = (kept, rows) if kept is not None else (rows[0], rows[1:])
    every = [line, *rest]
    first = min((_ends(r)[0] for r in every), key=_when)
    latest = max((_ends(r)[1] for r in every), key=_when)
    count = sum(r.count for r in every)
    day = line.at.date().isoformat()
    line.folded_rows = sum(r.folded_rows or 1 for r in every)
    line.count = count
    line.at = min(r.at for r in every)
    line.last_at = max(r.last_at for r in every)
    line.message = (
        f"{count} routine {line.category.value} events on {day}, folded into one line by the "
        f"event log's retention; the latest: {latest['message']}"
    )
    line.evidence = {
        "folded": {"day": day, "rows": line.folded_rows, "first": first, "last": latest}
    }
    return rest


def _ends(row: EventRow) -> tuple[dict[str, Any], dict[str, Any]]:
    """The first and the latest message a row holds, with when they were recorded."""
    if (row.folded_rows or 1) > 1:
        folded = row.evidence["folded"]
        return folded["first"], folded["last"]
    return (
        {"at": row.at.isoformat(), "message": row.message},
        {"at": row.last_at.isoformat(), "message": row.message},
    )


def _when(end: dict[str, Any]) -> datetime:
    return datetime.fromisoformat(end["at"])
