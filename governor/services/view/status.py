"""The dashboard's read model built from storage as of one instant (its types are in
services.view.dashboard_model): every budget with its figures, chart series, pods, GPUs, runs,
pending extensions and admitted plans, and the latest events.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from decimal import Decimal
from typing import TypeVar

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from governor.db import repository as repo
from governor.db import teams as team_queries
from governor.db.tables import (
    EventRow,
    GpuSampleRow,
    LedgerEntryRow,
    PodRow,
    RunMetricRow,
    RunRow,
    StopOrderRow,
)
from governor.domain.health import json_number
from governor.domain.model import BudgetState, ExtensionState, PodState, Severity
from governor.domain.money import ZERO
from governor.domain.policy import PRE_STOP_FRACTION, WARNING_THRESHOLD_FRACTION
from governor.domain.run_lifecycle import awaits_acknowledgement
from governor.domain.teams import EVERY_TEAM, TeamScope
from governor.domain.telemetry import owns
from governor.services import events
from governor.services.context import GovernorConfig
from governor.services.fleet import team_model, teams
from governor.services.fleet.loss_model import acknowledged_loss
from governor.services.fleet.pod_model import stop_latency
from governor.services.money.book import Book, heard_from, meter, open_books
from governor.services.monitoring import metric_history
from governor.services.monitoring.minutes import MINUTE, RAW
from governor.services.plans import admission, launches
from governor.services.replica import leadership
from governor.services.view import danger
from governor.services.view.dashboard_model import (
    BudgetStatus,
    Dashboard,
    EventLine,
    GpuPoint,
    GpuTrace,
    LeaderLine,
    MetricValue,
    PendingExtension,
    PlanLine,
    PodStatus,
    RunLine,
    SpendChart,
    SpendPoint,
    StopInfo,
    StopMark,
    Threshold,
    UngovernedLine,
)

CHART_POINTS = 240  # the most points of a spend series; older detail is thinned, never the end
GPU_WINDOW = timedelta(minutes=15)  # how far back a GPU sparkline reaches from its last sample
GPU_POINTS = 90
EVENTS = 25
RUN_METRICS = 4  # the latest metric values a run line shows
METRIC_POINTS = 60  # the most recent values of a run metric its sparkline draws
# At the current burn, the ceiling (and the stop it brings) this near wants a look, however
# small a share is spent: the line of the alert GovernorBudgetCeilingWithinAnHour.
CEILING_SOON_S = 3600.0

T = TypeVar("T")


def admitted_plans(session: Session, book: Book) -> tuple[PlanLine, ...]:
    """The budget's admitted plans, as `GET /v1/budgets/{id}/plans/admitted` gives them."""
    return tuple(
        PlanLine(
            plan_id=r.plan.id,
            job_id=r.plan.job_id,
            verdict=r.plan.verdict,
            overridden=r.plan.override_reason is not None,
            worst_case=r.plan.worst_case_usd,
            spent=r.spent,
            held=r.held,
            reserved=r.held,
            released=r.released,
        )
        for r in admission.reservations(session, book)
    )


def dashboard(
    session: Session,
    config: GovernorConfig,
    now: datetime,
    *,
    team: str | None = None,
    scope: TeamScope = EVERY_TEAM,
) -> Dashboard:
    """Everything the status page shows, read in one transaction: for the organisation (the
    teams `scope` sees), or for the one team `team` names (its id or name)."""
    if team is None:
        shown = team_model.all_of(session, scope, now)
        ids = [i for i, t in team_queries.budget_teams(session) if scope.sees(t)]
    else:
        one = teams.find(session, team, scope)
        shown = (team_model.team(session, one, now),)
        ids = [i for i, t in team_queries.budget_teams(session) if t == one.id]
    budgets = tuple(
        sorted(
            (budget_status(session, book) for book in open_books(session, ids, now, config)),
            key=urgency,
        )
    )
    names = {b.id: b.name for b in budgets}
    if team is None and scope.team_ids is None:
        rows = repo.events(session, limit=EVENTS)
    else:
        rows = team_queries.team_events(session, [t.id for t in shown], ids, EVENTS)
    latest = event_lines(session, rows, names)
    lease = leadership.current(session)
    leader = (
        LeaderLine(lease.holder, lease.term, lease.since)
        if lease.live(now) and lease.holder and lease.since
        else None
    )
    ungoverned = ungoverned_lines(session) if team is None and scope.team_ids is None else ()
    rate = sum((u.hourly_rate for u in ungoverned if u.hourly_rate is not None), ZERO)
    team_id = None if team is None else shown[0].id
    return Dashboard(now, budgets, latest, leader, shown, team_id, ungoverned, rate)


def ungoverned_lines(session: Session) -> tuple[UngovernedLine, ...]:
    """The billing pods under no budget the account sweep keeps, the longest seen first."""
    return tuple(
        UngovernedLine(
            provider=row.provider,
            provider_ref=row.provider_ref,
            name=row.name,
            labels=dict(row.labels),
            gpu_type=row.gpu_type,
            gpu_count=row.gpu_count,
            hourly_rate=row.hourly_rate_usd,
            reason=row.reason,
            launch_id=row.launch_id,
            first_seen_at=row.first_seen_at,
            last_seen_at=row.last_seen_at,
            stop_after_s=row.stop_after_s,
            stop_due_at=None
            if row.stop_after_s is None
            else row.first_seen_at + timedelta(seconds=row.stop_after_s),
            stop_sent_at=row.stop_sent_at,
            stop_detail=row.stop_detail,
        )
        for row in repo.ungoverned_pods(session)
    )


def event_lines(
    session: Session, rows: Sequence[EventRow], budget_names: Mapping[str, str]
) -> tuple[EventLine, ...]:
    """The events' lines, each naming its budget, pod and run."""
    return tuple(
        EventLine(
            e.id,
            e.at,
            e.severity,
            e.category,
            e.subject,
            e.budget_id,
            budget_names.get(e.budget_id or ""),
            e.message,
            e.count,
            e.last_at,
            e.pod_id,
            e.pod_name,
            e.run_id,
            e.run_name,
        )
        for e in events.listed(session, rows)
    )


def budget_status(session: Session, book: Book) -> BudgetStatus:
    row, f = book.budget, book.figures
    pods = tuple(pod_status(session, book, p) for p in book.pods)
    runs = run_lines(session, book.runs, book.now)
    pending = tuple(
        PendingExtension(
            e.id,
            e.amount_usd,
            e.reason,
            e.requested_by,
            e.run_id,
            e.created_at,
            f.effective_ceiling + e.amount_usd,
        )
        for e in repo.extensions(session, budget_id=row.id, state=ExtensionState.PENDING)
    )
    seconds = f.seconds_to_ceiling() if row.state is BudgetState.OPEN else None
    plans = admitted_plans(session, book)
    found = danger.problems(row.state, pods, runs, pending)
    figures = attention(row.state, f.spent_fraction, f.committed_fraction, seconds)
    return BudgetStatus(
        id=row.id,
        name=row.name,
        state=row.state,
        ceiling=row.ceiling_usd,
        approved_extensions=f.effective_ceiling - row.ceiling_usd,
        effective_ceiling=f.effective_ceiling,
        reserve=f.reserve,
        spent=f.spent,
        shutdown=f.shutdown,
        storage_tail=f.storage_tail,
        committed=f.committed,
        held_for_plans=sum((p.held for p in plans), ZERO),
        reserved_for_launches=launches.reserved_for_launches(session, [row.id], book.now)[row.id],
        remaining=f.remaining,
        burn_per_hour=f.burn_per_hour,
        projected_exhaustion_at=f.projected_exhaustion_at,
        seconds_to_ceiling=seconds,
        spent_pct=_pct(f.spent, f.effective_ceiling),
        committed_pct=_pct(f.committed, f.effective_ceiling),
        attention=danger.worst([figures, *(p.severity for p in found)]),
        next_step=danger.next_step(row.state, f, seconds, pods, runs),
        problems=found,
        chart=spend_chart(session, book),
        pods=pods,
        runs=runs,
        pending_extensions=pending,
        plans=plans,
    )


def urgency(b: BudgetStatus) -> tuple[int, float, int, int, str]:
    return danger.urgency(b.state, b.attention, b.seconds_to_ceiling, b.problems, b.name)


def attention(
    state: BudgetState, spent: Decimal, committed: Decimal, seconds_to_ceiling: float | None
) -> Severity | None:
    """How urgently the budget wants a look: the same lines the policy acts on, and a
    ceiling less than an hour away at the current burn (its pods are stopped there)."""
    if state in (BudgetState.STOPPING, BudgetState.EXHAUSTED) or committed >= 1:
        return Severity.CRITICAL
    if committed >= PRE_STOP_FRACTION or spent >= WARNING_THRESHOLD_FRACTION:
        return Severity.WARNING
    if seconds_to_ceiling is not None and seconds_to_ceiling < CEILING_SOON_S:
        return Severity.WARNING
    return None


# --- the spend chart -----------------------------------------------------------------------


def spend_chart(session: Session, book: Book) -> SpendChart:
    """Cumulative spend from the ledger, ending at the book's figure for now."""
    row, f = book.budget, book.figures
    ticks = session.execute(
        select(LedgerEntryRow.period_end, func.sum(LedgerEntryRow.amount_usd))
        .where(LedgerEntryRow.budget_id == row.id)
        .group_by(LedgerEntryRow.period_end)
        .order_by(LedgerEntryRow.period_end)
    ).all()
    points = [SpendPoint(row.created_at, ZERO)]
    total = ZERO
    for at, amount in ticks:
        total += amount or ZERO
        points.append(SpendPoint(at, total))
    end = max(book.now, points[-1].at)
    points.append(SpendPoint(end, f.spent))
    orders = session.scalars(
        select(StopOrderRow)
        .where(StopOrderRow.budget_id == row.id)
        .order_by(StopOrderRow.created_at)
    ).all()
    stops = [StopMark(o.created_at, o.pod_id, "requested", o.reason) for o in orders]
    stops += [
        StopMark(o.confirmed_at, o.pod_id, "stopped", o.reason) for o in orders if o.confirmed_at
    ]
    return SpendChart(
        start=row.created_at,
        end=end,
        points=thin(points, CHART_POINTS),
        ceiling=row.ceiling_usd,
        effective_ceiling=f.effective_ceiling,
        thresholds=tuple(
            Threshold(pct, f.effective_ceiling * pct / 100) for pct in row.alert_thresholds
        ),
        stops=tuple(sorted(stops, key=lambda s: s.at)),
        committed=f.committed,
    )


def thin(items: Sequence[T], most: int) -> tuple[T, ...]:
    """At most `most` items, evenly spread, always keeping the first and the last."""
    if len(items) <= most:
        return tuple(items)
    step = (len(items) - 1) / (most - 1)
    return tuple(items[round(i * step)] for i in range(most))


# --- pods and their GPUs ---------------------------------------------------------------------


def pod_status(session: Session, book: Book, pod: PodRow) -> PodStatus:
    m = meter(pod)
    order = repo.latest_stop_order(session, pod.id)
    stop = None
    if order is not None:
        stop = StopInfo(
            order.state.value,
            order.reason,
            order.created_at,
            order.deadline,
            order.confirmed_at,
            order.last_error,
        )
    return PodStatus(
        id=pod.id,
        name=pod.name,
        provider=pod.provider,
        provider_ref=pod.provider_ref,
        region=pod.region,
        gpu_type=pod.gpu_type,
        gpu_count=pod.gpu_count,
        state=pod.state,
        provider_state=pod.provider_state,
        state_known=pod.state_known,
        spent=book.spent_on(pod),
        stop_latency=stop_latency(pod),
        burn_per_hour=m.burn_per_hour,
        compute_per_hour=m.compute_per_hour,
        storage_per_hour=m.storage_per_hour,
        stopped_storage_per_hour=m.stopped_storage_per_hour,
        stop=stop,
        resumable=pod.state is PodState.STOPPED
        and pod.state_known
        and book.budget.state is BudgetState.OPEN,
        terminate_only=pod.terminate_only,
        acknowledged_loss=acknowledged_loss(pod),
        telemetry_note=pod.telemetry_note,
        gpus=gpu_traces(session, pod, book.runs_on(pod.id)),
    )


def gpu_traces(
    session: Session,
    pod: PodRow,
    runs: Sequence[RunRow],
    since: datetime | None = None,
    most: int = GPU_POINTS,
) -> tuple[GpuTrace, ...]:
    """Each GPU's samples: the recent ones, up to GPU_WINDOW before the pod's newest; or, from
    `since`, its whole history at every resolution kept (a minute's fold where raw ones have
    expired), thinned to `most` points."""
    resolutions = (RAW,) if since is None else (RAW, MINUTE)
    newest = session.scalar(
        select(func.max(GpuSampleRow.at)).where(
            GpuSampleRow.pod_id == pod.id, GpuSampleRow.resolution.in_(resolutions)
        )
    )
    if newest is None:
        return ()
    rows = session.scalars(
        select(GpuSampleRow)
        .where(
            GpuSampleRow.pod_id == pod.id,
            GpuSampleRow.resolution.in_(resolutions),
            GpuSampleRow.at >= (newest - GPU_WINDOW if since is None else since),
        )
        .order_by(GpuSampleRow.at, GpuSampleRow.id)
    ).all()
    by_gpu: dict[str, list[GpuSampleRow]] = defaultdict(list)
    for row in rows:
        by_gpu[row.gpu_uuid].append(row)
    peaks: dict[str, int] = {}
    for peak in repo.peaks_of(session, [r.id for r in runs]):
        peaks[peak.gpu_uuid] = max(peaks.get(peak.gpu_uuid, 0), peak.peak_used_bytes)
    traces = [
        _trace(samples, peaks.get(uuid), owns(pod.gpu_uuids, uuid), most)
        for uuid, samples in by_gpu.items()
    ]
    return tuple(sorted(traces, key=lambda t: t.index))


def _trace(
    samples: list[GpuSampleRow], run_peak: int | None, own: bool, most: int = GPU_POINTS
) -> GpuTrace:
    last = samples[-1]
    utils = [s.utilization_pct for s in samples if s.utilization_pct is not None]
    used = [s.memory_used_bytes for s in samples if s.memory_used_bytes is not None]
    window_peak = max(used, default=None)
    peak_memory = max((p for p in (run_peak, window_peak) if p is not None), default=None)
    return GpuTrace(
        uuid=last.gpu_uuid,
        index=last.gpu_index,
        name=last.name,
        own=own,
        last_at=last.at,
        utilization_pct=last.utilization_pct,
        memory_used_bytes=last.memory_used_bytes,
        memory_total_bytes=last.memory_total_bytes,
        peak_utilization_pct=max(utils, default=None),
        peak_memory_bytes=peak_memory,
        points=thin(
            [GpuPoint(s.at, s.utilization_pct, s.memory_used_bytes) for s in samples], most
        ),
    )


# --- runs ----------------------------------------------------------------------------------


def run_lines(session: Session, runs: Sequence[RunRow], now: datetime) -> tuple[RunLine, ...]:
    """The runs' lines, their metrics read in two statements whatever their number: the latest
    values, then the recent values of those shown."""
    ids = [r.id for r in runs]
    latest = metric_history.latest(session, ids)
    shown = {r.id: shown_metrics(r, latest.get(r.id, ())) for r in runs}
    names = sorted({name for values in shown.values() for name in values})
    recent = metric_history.recent(session, ids, names, METRIC_POINTS)
    return tuple(
        run_line(
            r,
            now,
            tuple(
                MetricValue(name, json_number(value), tuple(recent.get((r.id, name), ())))
                for name, value in shown[r.id].items()
            ),
        )
        for r in runs
    )


def run_line(run: RunRow, now: datetime, metrics: tuple[MetricValue, ...]) -> RunLine:
    age = None
    if run.last_heartbeat_at is not None:
        age = max(0.0, (now - run.last_heartbeat_at).total_seconds())
    progress = None
    if run.total_steps:
        progress = min(100.0, 100.0 * run.step / run.total_steps)
    return RunLine(
        id=run.id,
        name=run.name,
        pod_id=run.pod_id,
        attempt=run.attempt,
        status=run.status,
        phase=run.phase,
        step=run.step,
        total_steps=run.total_steps,
        progress_pct=progress,
        last_heartbeat_at=run.last_heartbeat_at,
        heartbeat_age_s=age,
        heartbeat_timeout_s=run.heartbeat_timeout_s,
        heartbeat_late=run.status.is_live and not heard_from(run, now),
        directive=run.directive,
        directive_reason=run.directive_reason,
        directive_message=run.directive_message,
        metrics=metrics,
        awaiting_acknowledgement=awaits_acknowledgement(
            run.status, run.ended_at, run.acknowledged_at
        ),
    )


def shown_metrics(run: RunRow, points: Sequence[RunMetricRow]) -> dict[str, float]:
    """The run's latest metric values, at most RUN_METRICS: those its health rules watch first,
    then the rest by name; a NaN its job sent last shows as NaN."""
    values = metric_history.latest_values(run.metrics, points)
    watched = dict.fromkeys(rule["metric"] for rule in run.health_rules or ())
    rank = {name: i for i, name in enumerate(watched)}
    names = sorted(values, key=lambda name: (rank.get(name, len(rank)), name))
    return {name: values[name] for name in names[:RUN_METRICS]}


def _pct(part: Decimal, whole: Decimal) -> float:
    return 0.0 if whole <= 0 else round(float(part / whole * 100), 1)
