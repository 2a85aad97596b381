"""Carrying out stop orders: wait for the job or the deadline, then the provider's preserving stop.

Every step is persisted before the external call it leads to, so a crash at any point is
resumed on the next pass and never doubles anything: stopping is idempotent.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import select
from sqlalchemy.orm import Session

from governor.db import repository as repo
from governor.db.engine import unit_of_work
from governor.db.tables import BudgetRow, PodRow, StopOrderRow
from governor.domain.model import BudgetState, Category, PodState, Severity
from governor.domain.ports import Clock, StopOutcome, StopResult
from governor.domain.stop_order import (
    ACTIVE_STATES,
    ESCALATE_AFTER_ATTEMPTS,
    StopState,
    after_clock,
    retry_delay_s,
)
from governor.services import events
from governor.services.context import ServiceContext
from governor.services.metering import accrue_pod

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class _Call:
    order_id: str
    provider: str
    ref: str


def advance(ctx: ServiceContext) -> int:
    """Move every due stop order one step; returns how many provider calls were made."""
    with unit_of_work(ctx.sessions) as session:
        budget_ids = session.scalars(
            select(StopOrderRow.budget_id).where(StopOrderRow.state.in_(ACTIVE_STATES)).distinct()
        ).all()
    calls = []
    for budget_id in budget_ids:  # one budget per transaction: writers never hold two
        with unit_of_work(ctx.sessions) as session:
            calls += _prepare(session, budget_id, ctx.clock)
    for call in calls:
        result = _call_provider(ctx, call)
        with unit_of_work(ctx.sessions) as session:
            _record_outcome(session, call.order_id, result, ctx.clock)
    return len(calls)


def _prepare(session: Session, budget_id: str, clock: Clock) -> list[_Call]:
    repo.get_budget(session, budget_id, lock=True)
    now = clock.now()  # read once the budget is ours, so the record keeps its true order
    calls = []
    for order in repo.active_stop_orders(session, budget_id):
        if order.next_attempt_at > now:
            continue
        pod = repo.get_pod(session, order.pod_id)
        _check_deadline(session, order, pod, now)
        if order.state.ready_for_provider:
            _mark_sent(session, order, pod, now)
            calls.append(_Call(order.id, pod.provider, pod.provider_ref))
    return calls


def _check_deadline(session: Session, order: StopOrderRow, pod: PodRow, now: datetime) -> None:
    state = after_clock(order.state, order.deadline, now)
    if state is order.state:
        return
    order.state, order.updated_at = state, now
    events.record(
        session,
        now,
        Severity.WARNING,
        Category.HARNESS,
        f"pod:{pod.id}",
        "The stop deadline passed without the job acknowledging a checkpoint: "
        "stopping the pod anyway.",
        budget_id=pod.budget_id,
        evidence={"stop_order": order.id, "deadline": order.deadline.isoformat()},
    )


def _mark_sent(session: Session, order: StopOrderRow, pod: PodRow, now: datetime) -> None:
    first = order.state is not StopState.PROVIDER_STOP_SENT
    order.state = StopState.PROVIDER_STOP_SENT
    order.attempts += 1
    order.sent_at = order.sent_at or now
    order.updated_at = now
    if first:
        events.record(
            session,
            now,
            Severity.INFO,
            Category.PROVIDER,
            f"pod:{pod.id}",
            f"Asking {pod.provider} to stop the pod, keeping its workspace.",
            budget_id=pod.budget_id,
            evidence={
                "stop_order": order.id,
                "provider_ref": pod.provider_ref,
                "acked": order.acked_at is not None,
            },
        )


def _call_provider(ctx: ServiceContext, call: _Call) -> StopResult:
    try:
        return ctx.provider(call.provider).stop(call.ref)
    except Exception as exc:  # a provider bug must not kill the pass: retry it
        log.exception("stop call to %s failed", call.provider)
        return StopResult(StopOutcome.RETRYABLE, f"{type(exc).__name__}: {exc}")


def _record_outcome(session: Session, order_id: str, result: StopResult, clock: Clock) -> None:
    order = repo.get_stop_order(session, order_id)
    budget = repo.get_budget(session, order.budget_id, lock=True)
    now = clock.now()
    session.refresh(order)
    pod = repo.get_pod(session, order.pod_id)
    subject = f"pod:{pod.id}"
    evidence = {"stop_order": order.id, "attempts": order.attempts, "detail": result.detail}
    if result.outcome is StopOutcome.DONE:
        accrue_pod(session, pod, now)
        pod.state, pod.stopped_at = PodState.STOPPED, now
        order.state, order.confirmed_at, order.updated_at = StopState.STOPPED, now, now
        events.record(
            session,
            now,
            Severity.INFO,
            Category.PROVIDER,
            subject,
            "Pod stopped; its workspace is kept and its storage is still counted.",
            budget_id=pod.budget_id,
            evidence=evidence,
        )
        _settle_budget(session, budget, now)
    elif result.outcome is StopOutcome.PENDING:
        order.next_attempt_at, order.updated_at = now, now
    elif result.outcome is StopOutcome.RETRYABLE:
        delay = retry_delay_s(order.attempts)
        order.last_error, order.updated_at = result.detail, now
        order.next_attempt_at = now + timedelta(seconds=delay)
        escalate = order.attempts >= ESCALATE_AFTER_ATTEMPTS
        events.record(
            session,
            now,
            Severity.CRITICAL if escalate else Severity.WARNING,
            Category.PROVIDER,
            subject,
            f"Stop attempt {order.attempts} failed ({result.detail}); retrying in {delay:g} s."
            + (" The pod is still billing." if escalate else ""),
            budget_id=pod.budget_id,
            evidence={**evidence, "retry_in_s": delay},
        )
    else:
        order.state, order.last_error, order.updated_at = StopState.FAILED, result.detail, now
        events.record(
            session,
            now,
            Severity.CRITICAL,
            Category.PROVIDER,
            subject,
            f"The provider refused to stop the pod ({result.detail}). It is still billing: "
            f"stop it by hand, then POST /v1/pods/{pod.id}/stop to record it.",
            budget_id=pod.budget_id,
            evidence=evidence,
        )


def _settle_budget(session: Session, budget: BudgetRow, now: datetime) -> None:
    """A budget stopping at its ceiling is exhausted once none of its pods bills compute."""
    if budget.state is not BudgetState.STOPPING:
        return
    pods = repo.pods_of(session, budget.id)
    if any(p.state in (PodState.RUNNING, PodState.STOPPING) for p in pods):
        return
    budget.state = BudgetState.EXHAUSTED
    events.record(
        session,
        now,
        Severity.CRITICAL,
        Category.BUDGET,
        f"budget:{budget.id}",
        "Budget exhausted: every pod is stopped with its workspace kept.",
        budget_id=budget.id,
    )
