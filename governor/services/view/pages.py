"""The read models of the dashboard's detail pages: a budget's page (its card, its events and
its run report) and a run's page (its metric history, its pod's GPU history over the run, the
phases it went through, and what happened to it). Plain values, like those of
services.view.dashboard_model.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import or_, select
from sqlalchemy.orm import Session

from governor.db import repository as repo
from governor.db.tables import EventRow, RunMetricRow, RunPhaseRow
from governor.domain.model import Phase
from governor.services.context import GovernorConfig
from governor.services.money.book import open_book
from governor.services.monitoring.metric_history import SERIES_LIMIT
from governor.services.view import report, status
from governor.services.view.dashboard_model import (
    BudgetStatus,
    EventLine,
    GpuTrace,
    PodStatus,
    RunLine,
)
from governor.services.view.status import CHART_POINTS, thin

PAGE_EVENTS = 100


@dataclass(frozen=True)
class BudgetPage:
    at: datetime
    budget: BudgetStatus
    events: tuple[EventLine, ...]  # the budget's latest, newest first
    report: report.Report


@dataclass(frozen=True)
class MetricPoint:
    at: datetime
    step: int
    value: float  # a folded minute's mean once its raw points have expired


@dataclass(frozen=True)
class MetricSeries:
    name: str
    points: tuple[MetricPoint, ...]  # oldest first, thinned to CHART_POINTS


@dataclass(frozen=True)
class PhaseMark:
    phase: Phase
    at: datetime  # when its job said it entered the phase


@dataclass(frozen=True)
class RunPage:
    at: datetime
    budget_id: str
    budget_name: str
    run: RunLine
    started_at: datetime  # this attempt
    ended_at: datetime | None
    pod: PodStatus
    phases: tuple[PhaseMark, ...]
    metrics: tuple[MetricSeries, ...]  # the watched metrics first, then by name
    gpus: tuple[GpuTrace, ...]  # the pod's GPUs over this attempt
    events: tuple[EventLine, ...]  # the run's and its pod's, newest first


def budget_page(
    session: Session, config: GovernorConfig, budget_id: str, now: datetime
) -> BudgetPage:
    """A budget's page; NotFound if there is no such budget."""
    book = open_book(session, budget_id, now, config)
    budget = status.budget_status(session, book)
    rows = repo.events(session, budget_id=budget_id, limit=PAGE_EVENTS)
    return BudgetPage(
        now,
        budget,
        status.event_lines(session, rows, {budget.id: budget.name}),
        report.build(session, config, budget_id, now),
    )


def run_page(session: Session, config: GovernorConfig, run_id: str, now: datetime) -> RunPage:
    """A run's page; NotFound if there is no such run."""
    run = repo.get_run(session, run_id)
    book = open_book(session, run.budget_id, now, config)
    [row] = [r for r in book.runs if r.id == run_id]
    [pod] = [p for p in book.pods if p.id == row.pod_id]
    [line] = status.run_lines(session, [row], now)
    phases = session.execute(
        select(RunPhaseRow.phase, RunPhaseRow.at)
        .where(RunPhaseRow.run_id == row.id)
        .order_by(RunPhaseRow.at, RunPhaseRow.id)
    ).all()
    events = session.scalars(
        select(EventRow)
        .where(or_(EventRow.subject == f"run:{row.id}", EventRow.subject == f"pod:{pod.id}"))
        .order_by(EventRow.id.desc())
        .limit(PAGE_EVENTS)
    ).all()
    return RunPage(
        at=now,
        budget_id=book.budget.id,
        budget_name=book.budget.name,
        run=line,
        started_at=row.started_at,
        ended_at=row.ended_at,
        pod=status.pod_status(session, book, pod),
        phases=tuple(PhaseMark(phase, at) for phase, at in phases),
        metrics=_series(session, row.id, [m.name for m in line.metrics]),
        gpus=status.gpu_traces(session, pod, [row], since=row.started_at, most=CHART_POINTS),
        events=status.event_lines(session, events, {book.budget.id: book.budget.name}),
    )


def _series(session: Session, run_id: str, first: list[str]) -> tuple[MetricSeries, ...]:
    """Every metric the run reported, its latest SERIES_LIMIT points each, oldest first; those
    its line shows first, in its order."""
    names = session.scalars(
        select(RunMetricRow.name).where(RunMetricRow.run_id == run_id).distinct()
    ).all()
    rank = {name: i for i, name in enumerate(first)}
    series = []
    for name in sorted(names, key=lambda n: (rank.get(n, len(rank)), n)):
        newest = session.scalars(
            select(RunMetricRow)
            .where(RunMetricRow.run_id == run_id, RunMetricRow.name == name)
            .order_by(RunMetricRow.at.desc(), RunMetricRow.id.desc())
            .limit(SERIES_LIMIT)
        ).all()
        points = [MetricPoint(p.at, p.step, p.value) for p in reversed(newest)]
        series.append(MetricSeries(name, thin(points, CHART_POINTS)))
    return tuple(series)
