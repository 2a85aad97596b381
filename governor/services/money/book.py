"""A budget's book: its rows, the ledger totals and the figures, as of one instant."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any, Generic, Protocol, TypeVar

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from governor.db import records
from governor.db import repository as repo
from governor.db.one_of import one_of
from governor.db.records import Record
from governor.db.tables import BudgetRow, ExtensionRow, PodRow, RunRow, StopOrderRow
from governor.domain.errors import NotFound
from governor.domain.ledger import BudgetTerms, Figures, PodMeter, PodPosition, figures, unaccrued
from governor.domain.model import (
    BILLS_COMPUTE,
    Action,
    BudgetState,
    ExtensionState,
    Phase,
    PodState,
    Reason,
    RunStatus,
)
from governor.domain.money import ZERO
from governor.domain.policy import HealthStop, RunView
from governor.domain.stop_latency import in_force_s
from governor.domain.stop_order import ACTIVE_STATES, StopState
from governor.domain.teams import TeamFigures
from governor.services.context import GovernorConfig


class LiveBudget(Record):
    """A budget as an enforcement pass reads it (`_LIVE_BUDGETS`): every column, and what
    approved extensions add to its ceiling."""

    id: str
    name: str
    team_id: str
    ceiling_usd: Decimal
    reserve_usd: Decimal
    storage_tail_hours: float
    alert_thresholds: list[int]
    note: str | None
    state: BudgetState
    alerted_pct: int
    created_at: datetime
    recorded_usd: Decimal
    figures_at: datetime | None
    figures_spent_usd: Decimal | None
    figures_shutdown_usd: Decimal | None
    figures_storage_tail_usd: Decimal | None
    figures_ceiling_usd: Decimal | None
    figures_burn_usd_per_hour: Decimal | None
    closed_at: datetime | None
    require_plan: bool
    adopt_labelled_pods: bool
    approved_extensions_usd: Decimal | None  # None: no extension approved


class LivePod(Record):
    """A pod as an enforcement pass reads it (`_LIVE_PODS`): what the figures, the GPU and
    finished rules and the canary holds read."""

    id: str
    budget_id: str
    state: PodState
    plan_id: str | None
    gpu_uuids: list[str] | None
    process_pids: list[int] | None
    process_pattern: str | None
    resumed_at: datetime | None
    hourly_rate_usd: Decimal
    storage_gb: float
    storage_usd_per_gb_month: Decimal
    stopped_storage_usd_per_gb_month: Decimal
    accrued_until: datetime
    stop_latency_s: float
    learned_stop_latency_s: float | None
    recorded_usd: Decimal
    gpu_type: str | None
    gpu_count: int | None
    plan_rate_warned_usd: Decimal | None
    state_known: bool


class LiveRun(Record):
    """A run as an enforcement pass reads it (`_LIVE_RUNS`): every column a rule may read."""

    id: str
    budget_id: str
    pod_id: str
    started_at: datetime
    total_steps: int | None
    heartbeat_timeout_s: float
    checkpoint_grace_s: float
    step: int
    phase: Phase | None
    phase_since: datetime | None
    progress_at: datetime | None
    policy: dict[str, float | str] | None
    status: RunStatus
    last_heartbeat_at: datetime | None
    ended_at: datetime | None
    checkpoint_step: int | None
    checkpoint_path: str | None
    checkpoint_at: datetime | None
    directive: Action
    directive_reason: Reason | None
    directive_message: str | None
    checkpoint_asked: bool
    team_checkpoint_asked: bool
    forecast_warned: bool
    idle_alerted: bool
    stall_alerted: bool
    headroom_warned: bool
    oom_warned: bool
    health_stop: dict[str, Any] | None
    pace_step: int | None
    pace_at: datetime | None


class LiveOrder(Record):
    """A stop order under way as an enforcement pass reads it (`_ACTIVE_ORDERS`): every column."""

    id: str
    budget_id: str
    pod_id: str
    reason: Reason
    state: StopState
    deadline: datetime
    created_at: datetime
    updated_at: datetime
    notified_at: datetime | None
    acked_at: datetime | None
    ack_checkpoint: dict[str, Any] | None
    sent_at: datetime | None
    attempts: int
    next_attempt_at: datetime
    confirmed_at: datetime | None
    last_error: str | None
    alerted_at: datetime | None
    refusals: int
    refused_request_at: datetime | None
    retried_at: datetime | None
    longest_retry_s: float


# What the functions below read, from either shape: the row (ORM object) or its live record.
Budget = BudgetRow | LiveBudget
Pod = PodRow | LivePod
Run = RunRow | LiveRun
Order = StopOrderRow | LiveOrder


class Metered(Protocol):
    """What a pod's meter reads: a pod row, its live record, or a plain row of the pods table
    (`metering.accrue_budgets`)."""

    @property
    def state(self) -> PodState: ...
    @property
    def hourly_rate_usd(self) -> Decimal: ...
    @property
    def storage_gb(self) -> float: ...
    @property
    def storage_usd_per_gb_month(self) -> Decimal: ...
    @property
    def stopped_storage_usd_per_gb_month(self) -> Decimal: ...
    @property
    def accrued_until(self) -> datetime: ...
    @property
    def stop_latency_s(self) -> float: ...
    @property
    def learned_stop_latency_s(self) -> float | None: ...
    @property
    def state_known(self) -> bool: ...


def metered_state(pod: Metered) -> PodState:
    """The state a pod is charged in: its own, or running while the provider reports a state
    it does not document (whatever the pod's last known state was)."""
    return pod.state if pod.state_known else PodState.RUNNING


def meter(pod: Metered) -> PodMeter:
    """A pod's meter; its stop latency the one in force: the learned figure of its provider
    and region's latest stops, never below the declared one (`domain/stop_latency.py`)."""
    return PodMeter(
        state=metered_state(pod),
        hourly_rate=pod.hourly_rate_usd,
        storage_gb=Decimal(str(pod.storage_gb)),
        storage_usd_per_gb_month=pod.storage_usd_per_gb_month,
        stopped_storage_usd_per_gb_month=pod.stopped_storage_usd_per_gb_month,
        accrued_until=pod.accrued_until,
        stop_latency_s=in_force_s(pod.stop_latency_s, pod.learned_stop_latency_s),
    )


def heard_from(run: Run, now: datetime) -> bool:
    """The job is alive as far as we know: live status and a heartbeat within its timeout."""
    last = run.last_heartbeat_at or run.started_at
    return run.status.is_live and (now - last).total_seconds() <= run.heartbeat_timeout_s


def heard_lately(run: Run, now: datetime) -> bool:
    """The job has checked in at least once, and within its timeout: it can still save."""
    return run.last_heartbeat_at is not None and heard_from(run, now)


def run_view(run: Run) -> RunView:
    steps_per_s = None
    if run.pace_at is not None and run.pace_step is not None and run.last_heartbeat_at:
        elapsed = (run.last_heartbeat_at - run.pace_at).total_seconds()
        if elapsed > 0 and run.step > run.pace_step:
            steps_per_s = (run.step - run.pace_step) / elapsed
    return RunView(
        status=run.status,
        phase=run.phase,
        phase_since=run.phase_since,
        progress_at=run.progress_at or run.started_at,
        step=run.step,
        total_steps=run.total_steps,
        started_at=run.started_at,
        last_heartbeat_at=run.last_heartbeat_at,
        heartbeat_timeout_s=run.heartbeat_timeout_s,
        ended_at=run.ended_at,
        steps_per_s=steps_per_s,
        checkpoint_asked=run.checkpoint_asked,
        team_checkpoint_asked=run.team_checkpoint_asked,
        forecast_warned=run.forecast_warned,
        idle_alerted=run.idle_alerted,
        stall_alerted=run.stall_alerted,
        headroom_warned=run.headroom_warned,
        oom_warned=run.oom_warned,
        health_stop=None
        if run.health_stop is None
        else HealthStop(
            Reason(run.health_stop["reason"]),
            run.health_stop["message"],
            run.health_stop.get("evidence", {}),
        ),
    )


def grace_s(runs_on_pod: Sequence[Run], now: datetime) -> float:
    """How long a stop waits for a pod's jobs to save: the longest grace of a live job."""
    return max((r.checkpoint_grace_s for r in runs_on_pod if heard_from(r, now)), default=0.0)


def _grace_left_s(
    runs_on_pod: Sequence[Run], pod: Pod, orders: Mapping[str, Order], now: datetime
) -> float:
    """How much of a checkpoint grace a pod may still spend before its stop is sent."""
    order = orders.get(pod.id)
    if order is None:
        return grace_s(runs_on_pod, now)
    if order.state.waits_for_job:
        return max(0.0, (order.deadline - now).total_seconds())
    return 0.0


BudgetT = TypeVar("BudgetT", bound=Budget)
PodT = TypeVar("PodT", bound=Pod)
RunT = TypeVar("RunT", bound=Run)
OrderT = TypeVar("OrderT", bound=Order)


@dataclass
class BookOf(Generic[BudgetT, PodT, RunT, OrderT]):
    """A budget's rows and figures as of `now`, the rows of one shape: a `Book` of ORM
    objects (`open_books`), or in an enforcement pass a `LiveBook` of records (`live_books`)."""

    budget: BudgetT
    pods: list[PodT]
    runs: list[RunT]
    orders: dict[str, OrderT]
    figures: Figures
    now: datetime
    runs_by_pod: dict[str, list[RunT]]  # the same runs, by the pod they run on

    def runs_on(self, pod_id: str) -> list[RunT]:
        return self.runs_by_pod.get(pod_id, [])

    def grace_s(self, pod_id: str) -> float:
        return grace_s(self.runs_on(pod_id), self.now)

    def spent_on(self, pod: PodT) -> Decimal:
        return pod.recorded_usd + unaccrued(meter(pod), self.now)


Book = BookOf[BudgetRow, PodRow, RunRow, StopOrderRow]
# A pass's book: the orders it reads are records, those it places ORM objects (`order_stop`).
LiveBook = BookOf[LiveBudget, LivePod, LiveRun, LiveOrder | StopOrderRow]


def by_pod(runs: Sequence[RunT]) -> dict[str, list[RunT]]:
    grouped: dict[str, list[RunT]] = defaultdict(list)
    for run in runs:
        grouped[run.pod_id].append(run)
    return grouped


def open_book(
    session: Session, budget_id: str, now: datetime, config: GovernorConfig, *, lock: bool = False
) -> Book:
    """One budget's book; see `open_books`."""
    books = open_books(session, [budget_id], now, config, lock=lock)
    if not books:
        raise NotFound(f"no budget {budget_id!r}")
    return books[0]


def open_books(
    session: Session,
    budget_ids: Sequence[str],
    now: datetime,
    config: GovernorConfig,
    *,
    lock: bool = False,
) -> list[Book]:
    """Load budgets and everything their figures depend on, as one consistent picture, in a
    fixed number of queries however many budgets, pods and runs there are.

    With `lock` the budgets are held for update until commit (to act on them); without, they
    are held against writers only, so the ledger cannot move between the reads below.
    """
    budgets = repo.budgets_by_id(session, budget_ids, lock=lock, share=not lock)
    extended = repo.approved_extensions_by_budget(session, budget_ids)
    pods = by_budget(repo.pods_of_budgets(session, budget_ids))
    runs = by_budget(repo.runs_of_budgets(session, budget_ids))
    orders = by_budget(repo.active_stop_orders(session, budget_ids))
    return [_book(b, extended, pods[b.id], runs[b.id], orders[b.id], now, config) for b in budgets]


_BUDGETS, _PODS, _RUNS, _ORDERS, _EXTENSIONS = (
    BudgetRow.__table__,
    PodRow.__table__,
    RunRow.__table__,
    StopOrderRow.__table__,
    ExtensionRow.__table__,
)
_EXTENDED = "approved_extensions_usd"  # what approved extensions add to a budget's ceiling
_LIVE_BUDGETS = (
    select(
        _BUDGETS,
        select(func.sum(_EXTENSIONS.c.amount_usd))
        .where(
            _EXTENSIONS.c.budget_id == _BUDGETS.c.id,
            _EXTENSIONS.c.state == ExtensionState.APPROVED,
        )
        .scalar_subquery()
        .label(_EXTENDED),
    )
    .where(one_of(_BUDGETS.c.id, "budget_ids"))
    .order_by(_BUDGETS.c.id)
).with_for_update(key_share=True, of=_BUDGETS)
_LIVE_PODS = (  # what the figures, the GPU and finished rules and the canary holds read
    select(
        *(
            _PODS.c[name]
            for name in (
                "id",
                "budget_id",
                "state",
                "plan_id",
                "gpu_uuids",
                "process_pids",
                "process_pattern",
                "resumed_at",
                "hourly_rate_usd",
                "storage_gb",
                "storage_usd_per_gb_month",
                "stopped_storage_usd_per_gb_month",
                "accrued_until",
                "stop_latency_s",
                "learned_stop_latency_s",
                "recorded_usd",
                "gpu_type",
                "gpu_count",
                "plan_rate_warned_usd",
                "state_known",
            )
        )
    )
    .where(one_of(_PODS.c.budget_id, "budget_ids"), _PODS.c.state != PodState.GONE)
    .order_by(_PODS.c.created_at, _PODS.c.id)
)
_UNREAD = (
    "name",
    "attempt",
    "created_at",
    "metrics",
    "health_rules",
    "health_state",
    "acknowledged_at",  # an operator's word on a lost run: no rule reads it
    "acknowledged_by",
    "out_of_memory",  # its job's out-of-memory report: the measured floors read it, no rule
)
_LIVE_RUNS = (  # every column a rule may read: not the job's latest metrics nor its statistics
    select(*(c for c in _RUNS.c if c.name not in _UNREAD))
    .join_from(_RUNS, _PODS, _RUNS.c.pod_id == _PODS.c.id)
    .where(
        one_of(_RUNS.c.budget_id, "budget_ids"),
        # the pods' budgets named too: their index by state and budget finds them
        one_of(_PODS.c.budget_id, "budget_ids"),
        _PODS.c.state.in_(BILLS_COMPUTE),
    )
    .order_by(_RUNS.c.created_at, _RUNS.c.id)
)
_ACTIVE_ORDERS = select(_ORDERS).where(
    one_of(_ORDERS.c.budget_id, "budget_ids"), _ORDERS.c.state.in_(ACTIVE_STATES)
)


def live_books(
    session: Session, budget_ids: Sequence[str], now: datetime, config: GovernorConfig
) -> list[LiveBook]:
    """What an enforcement pass decides about, read as plain records (no ORM object): the
    budgets with what approved extensions add to them, locked for update until commit; their
    pods not gone, the runs on those that still bill compute, and their stop orders under way.
    The figures are `open_books`'s.

    What the pass sets on a record is written by `records.write_back`, not by the session.
    """
    params = {"budget_ids": list(budget_ids)}
    budgets = records.load(session, _LIVE_BUDGETS, params, LiveBudget)
    extended = {b.id: b.approved_extensions_usd or ZERO for b in budgets}
    pods = by_budget(records.load(session, _LIVE_PODS, params, LivePod))
    runs = by_budget(records.load(session, _LIVE_RUNS, params, LiveRun))
    orders = by_budget(records.load(session, _ACTIVE_ORDERS, params, LiveOrder))
    return [_book(b, extended, pods[b.id], runs[b.id], orders[b.id], now, config) for b in budgets]


class OfBudget(Protocol):
    @property
    def budget_id(self) -> str: ...


T = TypeVar("T", bound=OfBudget)


def by_budget(rows: Iterable[T]) -> defaultdict[str, list[T]]:
    """Rows (ORM objects or records) grouped by their `budget_id`."""
    grouped: defaultdict[str, list[T]] = defaultdict(list)
    for row in rows:
        grouped[row.budget_id].append(row)
    return grouped


def _book(
    budget: BudgetT,
    extended: dict[str, Decimal],
    pods: list[PodT],
    runs: list[RunT],
    orders: Sequence[OrderT],
    now: datetime,
    config: GovernorConfig,
) -> BookOf[BudgetT, PodT, RunT, OrderT]:
    """One budget's book from its rows: its figures as of `now`."""
    terms = BudgetTerms(
        ceiling=budget.ceiling_usd,
        approved_extensions=extended.get(budget.id, ZERO),
        reserve=budget.reserve_usd,
        storage_tail_hours=Decimal(str(budget.storage_tail_hours)),
        recorded=budget.recorded_usd,
    )
    on_pod = by_pod(runs)
    orders_by_pod = {o.pod_id: o for o in orders}
    positions = [
        PodPosition(meter(p), _grace_left_s(on_pod.get(p.id, []), p, orders_by_pod, now))
        for p in pods
        if p.state is not PodState.GONE
    ]
    f = figures(terms, positions, now, config.reaction_s)
    return BookOf(budget, pods, runs, orders_by_pod, f, now, on_pod)


KEPT_FIGURES = (
    "figures_at",
    "figures_spent_usd",
    "figures_shutdown_usd",
    "figures_storage_tail_usd",
    "reserve_usd",
    "figures_ceiling_usd",
    "figures_burn_usd_per_hour",
)  # the budget's columns a heartbeat answers with: committed spend's parts among them


def keep_figures(book: Book | LiveBook, team: TeamFigures | None = None) -> None:
    """Keep the book's figures on its budget, for heartbeats to answer with until the next
    pass: spent and the parts committed spend adds to it (the reserve is the budget's own).
    With its `team`'s figures, the ceiling kept is the one that binds first: the budget's,
    or its committed spend when the team's would reach the team's ceiling at the current
    burns, so a heartbeat's time to the ceiling is the earlier of the two."""
    budget, f = book.budget, book.figures
    budget.figures_at = book.now
    budget.figures_spent_usd = f.spent
    budget.figures_shutdown_usd = f.shutdown
    budget.figures_storage_tail_usd = f.storage_tail
    budget.figures_ceiling_usd = (
        f.effective_ceiling
        if team is None
        else min(f.effective_ceiling, team.ceiling_for(f.committed, f.burn_per_hour))
    )
    budget.figures_burn_usd_per_hour = f.burn_per_hour
