"""A job's heartbeat: record what it says, let the policy decide, hand back its directive."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from governor.db import repository as repo
from governor.db.tables import RunPhaseRow, RunRow, StopOrderRow
from governor.domain.ledger import Figures
from governor.domain.model import Action, Category, Phase, Reason, RunStatus, Severity
from governor.domain.policy import next_heartbeat_s
from governor.domain.stop_order import StopState, after_ack, after_delivery
from governor.services import events
from governor.services.context import GovernorConfig
from governor.services.enforcement import enforce


@dataclass(frozen=True)
class Checkpoint:
    step: int
    path: str


@dataclass(frozen=True)
class Heartbeat:
    step: int
    total_steps: int | None = None
    phase: Phase | None = None
    status: RunStatus = RunStatus.RUNNING
    checkpoint: Checkpoint | None = None
    metrics: dict[str, Any] | None = None


@dataclass(frozen=True)
class Directive:
    action: Action
    reason: Reason | None
    message: str | None
    deadline: datetime | None
    figures: Figures
    next_heartbeat_s: float


def heartbeat(
    session: Session, config: GovernorConfig, run_id: str, beat: Heartbeat, now: datetime
) -> Directive:
    budget_id = repo.get_run(session, run_id).budget_id
    repo.get_budget(session, budget_id, lock=True)
    run = repo.get_run(session, run_id)
    session.refresh(run)
    _record(session, run, beat, now)
    book = enforce(session, config, budget_id, now)
    order = book.orders.get(run.pod_id)
    if order is not None:
        _advance_order(session, run, order, beat, now)
    deadline = None
    if run.directive is Action.STOP:
        latest = order or repo.latest_stop_order(session, run.pod_id)
        deadline = latest.deadline if latest is not None else None
    return Directive(
        action=run.directive,
        reason=run.directive_reason,
        message=run.directive_message,
        deadline=deadline,
        figures=book.figures,
        next_heartbeat_s=next_heartbeat_s(
            run.heartbeat_timeout_s, book.figures.seconds_to_ceiling()
        ),
    )


def _record(session: Session, run: RunRow, beat: Heartbeat, now: datetime) -> None:
    run.last_heartbeat_at = now
    if beat.step != run.step:
        run.progress_at, run.stall_alerted, run.idle_alerted = now, False, False
    run.step = beat.step
    if beat.total_steps is not None:
        run.total_steps = beat.total_steps
    if beat.phase is not None and beat.phase is not run.phase:
        run.phase, run.phase_since = beat.phase, now
        session.add(RunPhaseRow(run_id=run.id, phase=beat.phase, at=now))
    if beat.metrics is not None:
        run.metrics = beat.metrics
    if run.pace_at is None and beat.step > 0 and beat.phase in (None, Phase.TRAINING):
        run.pace_step, run.pace_at = beat.step, now
    if beat.status is not run.status:
        _status_changed(session, run, beat.status, now)
    if beat.checkpoint is not None:
        run.checkpoint_step = beat.checkpoint.step
        run.checkpoint_path = beat.checkpoint.path
        run.checkpoint_at = now
        if run.directive is Action.CHECKPOINT:
            run.directive, run.directive_reason, run.directive_message = Action.CONTINUE, None, None
        events.record(
            session,
            now,
            Severity.INFO,
            Category.HARNESS,
            f"run:{run.id}",
            f"Checkpoint saved at step {beat.checkpoint.step}: {beat.checkpoint.path}",
            budget_id=run.budget_id,
            evidence={"step": beat.checkpoint.step, "path": beat.checkpoint.path},
        )


def _status_changed(session: Session, run: RunRow, status: RunStatus, now: datetime) -> None:
    previous, run.status = run.status, status
    if not status.is_live and run.ended_at is None:
        run.ended_at = now
    events.record(
        session,
        now,
        Severity.WARNING if status is RunStatus.FAILED else Severity.INFO,
        Category.HARNESS,
        f"run:{run.id}",
        f"Run status {previous.value} -> {status.value} at step {run.step}.",
        budget_id=run.budget_id,
        evidence={"from": previous.value, "to": status.value, "step": run.step},
    )


def _advance_order(
    session: Session, run: RunRow, order: StopOrderRow, beat: Heartbeat, now: datetime
) -> None:
    acked = beat.status is RunStatus.STOPPED or (
        beat.status is RunStatus.STOPPING and beat.checkpoint is not None
    )
    state = after_ack(order.state) if acked else after_delivery(order.state)
    if state is order.state:
        return
    order.state, order.updated_at = state, now
    if state is StopState.JOB_NOTIFIED:
        order.notified_at = now
        message = "The job has received its stop directive."
        evidence: dict[str, object] = {"deadline": order.deadline.isoformat()}
    else:
        order.acked_at = now
        checkpoint = beat.checkpoint
        order.ack_checkpoint = (
            None if checkpoint is None else {"step": checkpoint.step, "path": checkpoint.path}
        )
        message = (
            f"The job acknowledged the stop with a checkpoint at step {checkpoint.step}."
            if checkpoint
            else "The job reported it has stopped (no checkpoint named)."
        )
        evidence = {"checkpoint": order.ack_checkpoint, "status": beat.status.value}
    events.record(
        session,
        now,
        Severity.INFO,
        Category.HARNESS,
        f"run:{run.id}",
        message,
        budget_id=run.budget_id,
        evidence={**evidence, "stop_order": order.id},
    )
