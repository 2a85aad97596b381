"""Time series kept in two resolutions: raw rows, folded into one row per series and minute
once they are old, and minute rows dropped once they are older still. Storage stays bounded
by the number of series, not by uptime (GPU samples and run metrics alike)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Hashable, Sequence
from datetime import datetime, timedelta
from typing import Any, TypeVar

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

RAW, MINUTE = "raw", "minute"
FOLD_BATCH = 50_000  # raw rows one pass folds at most

Row = TypeVar("Row", bound=Any)  # a table's class: its columns `id`, `at` and `resolution`
Key = TypeVar("Key", bound=Hashable)  # what names a series


def fold(
    session: Session,
    table: type[Row],
    series: Callable[[Row], Key],
    folded: Callable[[Key, datetime, list[Row]], Row],
    now: datetime,
    raw_keep_s: float,
    minute_keep_s: float,
) -> int:
    """Fold `table`'s raw rows older than `raw_keep_s` into one row per `series` and minute
    (`folded` makes it from the minute's rows, oldest first); drop minute rows older than
    `minute_keep_s`. Returns how many raw rows were folded."""
    old: Sequence[Row] = session.scalars(
        select(table)
        .where(table.resolution == RAW, table.at < now - timedelta(seconds=raw_keep_s))
        .order_by(table.id)
        .limit(FOLD_BATCH)
    ).all()
    groups: dict[tuple[Key, datetime], list[Row]] = defaultdict(list)
    for row in old:
        groups[(series(row), row.at.replace(second=0, microsecond=0))].append(row)
    for (key, minute), rows in groups.items():
        session.add(folded(key, minute, rows))
    if old:
        session.execute(delete(table).where(table.id.in_([r.id for r in old])))
    session.execute(
        delete(table).where(
            table.resolution == MINUTE, table.at < now - timedelta(seconds=minute_keep_s)
        )
    )
    return len(old)
