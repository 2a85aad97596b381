"""A point of a run's metric series as it is read, and a run's series read a page at a time."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal, cast

from sqlalchemy.orm import Session

from governor.db import repository as repo
from governor.db.tables import RunMetricRow
from governor.domain.paging import Page, PageRequest
from governor.services.monitoring import metric_history

Resolution = Literal["raw", "minute"]


@dataclass(frozen=True)
class MetricPoint:
    name: str
    at: datetime
    step: int
    resolution: Resolution = field(
        metadata={"doc": "one beat, or a minute of beats folded: the mean, with the least and most"}
    )
    value: float
    least: float
    most: float


def metric_point(row: RunMetricRow) -> MetricPoint:
    resolution = cast(Resolution, row.resolution)  # stored as minutes.RAW or minutes.MINUTE
    return MetricPoint(row.name, row.at, row.step, resolution, row.value, row.least, row.most)


def series(
    session: Session,
    run_id: str,
    name: str | None,
    since: datetime | None,
    request: PageRequest,
) -> Page[MetricPoint]:
    """A page of the run's points, oldest first: one metric or all, from `since` on."""
    repo.get_run(session, run_id)
    rows = metric_history.series(session, run_id, name, since, request)
    return Page([metric_point(r) for r in rows.items], rows.next_cursor)
