"""A budget's book: its rows, the ledger totals and the figures, as of one instant."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from sqlalchemy.orm import Session

from governor.db import repository as repo
from governor.db.tables import BudgetRow, PodRow, RunRow, StopOrderRow
from governor.domain.ledger import BudgetTerms, Figures, PodMeter, PodPosition, figures, unaccrued
from governor.domain.money import ZERO
from governor.domain.policy import RunView
from governor.services.context import GovernorConfig


def meter(pod: PodRow) -> PodMeter:
    return PodMeter(
        state=pod.state,
        hourly_rate=pod.hourly_rate_usd,
        storage_gb=Decimal(str(pod.storage_gb)),
        storage_usd_per_gb_month=pod.storage_usd_per_gb_month,
        stopped_storage_usd_per_gb_month=pod.stopped_storage_usd_per_gb_month,
        accrued_until=pod.accrued_until,
        stop_latency_s=pod.stop_latency_s,
    )


def heard_from(run: RunRow, now: datetime) -> bool:
    """The job is alive as far as we know: live status and a heartbeat within its timeout."""
    last = run.last_heartbeat_at or run.created_at
    return run.status.is_live and (now - last).total_seconds() <= run.heartbeat_timeout_s


def run_view(run: RunRow) -> RunView:
    steps_per_s = None
    if run.pace_at is not None and run.pace_step is not None and run.last_heartbeat_at:
        elapsed = (run.last_heartbeat_at - run.pace_at).total_seconds()
        if elapsed > 0 and run.step > run.pace_step:
            steps_per_s = (run.step - run.pace_step) / elapsed
    return RunView(
        status=run.status,
        phase=run.phase,
        phase_since=run.phase_since,
        progress_at=run.progress_at or run.created_at,
        step=run.step,
        total_steps=run.total_steps,
        created_at=run.created_at,
        last_heartbeat_at=run.last_heartbeat_at,
        heartbeat_timeout_s=run.heartbeat_timeout_s,
        ended_at=run.ended_at,
        steps_per_s=steps_per_s,
        checkpoint_asked=run.checkpoint_asked,
        forecast_warned=run.forecast_warned,
        idle_alerted=run.idle_alerted,
        stall_alerted=run.stall_alerted,
        headroom_warned=run.headroom_warned,
    )


def grace_s(runs: list[RunRow], pod_id: str, now: datetime) -> float:
    """How long a stop waits for the pod's jobs to save: the longest grace of a live job."""
    graces = [r.checkpoint_grace_s for r in runs if r.pod_id == pod_id and heard_from(r, now)]
    return max(graces, default=0.0)


def _grace_left_s(
    runs: list[RunRow], pod: PodRow, orders: dict[str, StopOrderRow], now: datetime
) -> float:
    """How much of a checkpoint grace a pod may still spend before its stop is sent."""
    order = orders.get(pod.id)
    if order is None:
        return grace_s(runs, pod.id, now)
    if order.state.waits_for_job:
        return max(0.0, (order.deadline - now).total_seconds())
    return 0.0


@dataclass
class Book:
    budget: BudgetRow
    pods: list[PodRow]
    runs: list[RunRow]
    orders: dict[str, StopOrderRow]
    recorded: dict[str, Decimal]
    figures: Figures
    now: datetime

    def runs_on(self, pod_id: str) -> list[RunRow]:
        return [r for r in self.runs if r.pod_id == pod_id]

    def grace_s(self, pod_id: str) -> float:
        return grace_s(self.runs, pod_id, self.now)

    def spent_on(self, pod: PodRow) -> Decimal:
        return self.recorded.get(pod.id, ZERO) + unaccrued(meter(pod), self.now)


def open_book(
    session: Session, budget_id: str, now: datetime, config: GovernorConfig, *, lock: bool = False
) -> Book:
    """Load a budget and everything its figures depend on, as one consistent picture.

    With `lock` the budget is held for update until commit (to act on it); without, it is
    held against writers only, so the ledger cannot move between the reads below.
    """
    budget = repo.get_budget(session, budget_id, lock=lock, share=not lock)
    pods = list(repo.pods_of(session, budget_id))
    runs = list(repo.runs_of(session, budget_id))
    recorded = repo.recorded_by_pod(session, budget_id)
    terms = BudgetTerms(
        ceiling=budget.ceiling_usd,
        approved_extensions=repo.approved_extensions_total(session, budget_id),
        reserve=budget.reserve_usd,
        storage_tail_hours=Decimal(str(budget.storage_tail_hours)),
    )
    orders = {o.pod_id: o for o in repo.active_stop_orders(session, budget_id)}
    positions = [
        PodPosition(meter(p), recorded.get(p.id, ZERO), _grace_left_s(runs, p, orders, now))
        for p in pods
    ]
    return Book(
        budget, pods, runs, orders, recorded, figures(terms, positions, now, config.reaction_s), now
    )
