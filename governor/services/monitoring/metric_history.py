"""A run's heartbeat metrics as a time series: the numbers of each beat, folded and expired
like GPU samples."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from datetime import datetime
from statistics import fmean
from typing import Any

from sqlalchemy import and_, func, select
from sqlalchemy.orm import Session

from governor.db.heartbeats import insert_points
from governor.db.keyset import Keyset
from governor.db.tables import RunMetricRow
from governor.domain.health import number
from governor.domain.paging import FIRST, Page, PageRequest
from governor.services.monitoring import minutes
from governor.services.monitoring.minutes import MINUTE, RAW

SERIES_LIMIT = 10_000  # points a chart reads
POINTS = Keyset("metrics", (RunMetricRow.at, RunMetricRow.id))


def record(
    session: Session, run_id: str, step: int, metrics: Mapping[str, object] | None, now: datetime
) -> None:
    """Keep the beat's finite numbers, in one statement (names are bounded at the edge)."""
    insert_points(session.connection(), points(run_id, step, metrics, now))


def points(
    run_id: str, step: int, metrics: Mapping[str, object] | None, now: datetime
) -> list[dict[str, Any]]:
    """The beat's finite numbers as rows to insert."""
    return [
        {
            "run_id": run_id,
            "name": name,
            "at": now,
            "step": step,
            "resolution": RAW,
            "value": value,
            "least": value,
            "most": value,
        }
        for name, value in ((n, number(v)) for n, v in (metrics or {}).items())
        if value is not None and math.isfinite(value)
    ]


def series(
    session: Session,
    run_id: str,
    name: str | None,
    since: datetime | None,
    request: PageRequest = FIRST,
) -> Page[RunMetricRow]:
    """A page of a run's points, oldest first: one metric or all, from `since` on."""
    query = select(RunMetricRow).where(RunMetricRow.run_id == run_id)
    if name is not None:
        query = query.where(RunMetricRow.name == name)
    if since is not None:
        query = query.where(RunMetricRow.at >= since)
    return POINTS.page(session, query, request)


def latest(
    session: Session, run_ids: Sequence[str], names: Sequence[str] | None = None
) -> dict[str, list[RunMetricRow]]:
    """Each run's latest point of each of its metrics (of `names` alone, when given), by name,
    in one statement."""
    if not run_ids or names == ():
        return {}
    query = select(
        RunMetricRow.run_id, RunMetricRow.name, func.max(RunMetricRow.at).label("at")
    ).where(RunMetricRow.run_id.in_(run_ids))
    if names is not None:
        query = query.where(RunMetricRow.name.in_(names))
    newest = query.group_by(RunMetricRow.run_id, RunMetricRow.name).subquery()
    rows = session.scalars(
        select(RunMetricRow)
        .join(
            newest,
            and_(
                RunMetricRow.run_id == newest.c.run_id,
                RunMetricRow.name == newest.c.name,
                RunMetricRow.at == newest.c.at,
            ),
        )
        .order_by(RunMetricRow.name, RunMetricRow.id)
    ).all()
    points: dict[str, dict[str, RunMetricRow]] = defaultdict(dict)
    for row in rows:  # of two points at the same instant, the later written
        points[row.run_id][row.name] = row
    return {run_id: list(by_name.values()) for run_id, by_name in points.items()}


def recent(
    session: Session, run_ids: Sequence[str], names: Sequence[str], most: int
) -> dict[tuple[str, str], list[float]]:
    """The last `most` values of each of these runs' metrics of these names, oldest first, by
    (run id, name), in one statement: what a sparkline draws."""
    if not run_ids or not names:
        return {}
    order = (RunMetricRow.at.desc(), RunMetricRow.id.desc())
    ranked = (
        select(
            RunMetricRow.run_id,
            RunMetricRow.name,
            RunMetricRow.value,
            func.row_number()
            .over(partition_by=(RunMetricRow.run_id, RunMetricRow.name), order_by=order)
            .label("nth"),
        )
        .where(RunMetricRow.run_id.in_(run_ids), RunMetricRow.name.in_(names))
        .subquery()
    )
    last = (
        select(ranked.c.run_id, ranked.c.name, ranked.c.value)
        .where(ranked.c.nth <= most)
        .order_by(ranked.c.nth.desc())
    )
    # a subquery's columns are untyped
    rows: Sequence[tuple[Any, ...]] = session.execute(last).all()
    values: dict[tuple[str, str], list[float]] = defaultdict(list)
    for run_id, name, value in rows:
        values[(run_id, name)].append(value)
    return dict(values)


def latest_values(
    beat: Mapping[str, object] | None, points: Sequence[RunMetricRow]
) -> dict[str, float]:
    """A run's latest value of each metric: its latest beat's own values (`runs.metrics`) over
    its series' last points. The series keeps finite numbers only, and a NaN the job sent last
    is what must show."""
    values = {p.name: p.value for p in points}
    for name, raw in (beat or {}).items():
        value = number(raw)
        if value is not None:
            values[name] = value
    return values


def fold(session: Session, now: datetime, raw_keep_s: float, minute_keep_s: float) -> int:
    """Fold raw points older than `raw_keep_s` into one row per run, metric and minute (the
    mean, the least, the most, the last step); drop minute rows older than `minute_keep_s`."""
    return minutes.fold(
        session,
        RunMetricRow,
        lambda row: (row.run_id, row.name),
        _folded,
        now,
        raw_keep_s,
        minute_keep_s,
    )


def _folded(series: Any, minute: datetime, rows: list[RunMetricRow]) -> RunMetricRow:
    run_id, name = series
    return RunMetricRow(
        run_id=run_id,
        name=name,
        at=minute,
        step=rows[-1].step,
        resolution=MINUTE,
        value=fmean(r.value for r in rows),
        least=min(r.least for r in rows),
        most=max(r.most for r in rows),
    )
