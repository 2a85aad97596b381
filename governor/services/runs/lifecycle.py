"""A run's start (the job on a pod that must check in, with its own token) and its end with
its pod."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.orm import Session

from governor.db import repository as repo
from governor.db.tables import PodRow, RunRow
from governor.domain.errors import Conflict
from governor.domain.health import HealthRule, rules_for
from governor.domain.model import (
    Action,
    BudgetState,
    Category,
    PodState,
    Reason,
    Role,
    RunStatus,
    Severity,
)
from governor.domain.run_lifecycle import after_pod_stopped
from governor.services import events
from governor.services.context import (
    DEFAULT_CHECKPOINT_GRACE_S,
    DEFAULT_HEARTBEAT_TIMEOUT_S,
    GovernorConfig,
)
from governor.services.ids import new_id
from governor.services.money import team_money
from governor.services.money.book import heard_lately, open_book
from governor.services.plans import admission
from governor.services.security import tokens


@dataclass(frozen=True)
class RunSpec:
    name: str
    pod_id: str
    total_steps: int | None = None
    heartbeat_timeout_s: float = DEFAULT_HEARTBEAT_TIMEOUT_S
    checkpoint_grace_s: float = DEFAULT_CHECKPOINT_GRACE_S
    policy: dict[str, float | str] | None = None  # GPU, progress, out-of-memory policy
    health: tuple[HealthRule, ...] | None = None  # its training-health rules, over the server's


def create(
    session: Session, config: GovernorConfig, budget_id: str, spec: RunSpec, now: datetime
) -> tuple[RunRow, str]:
    """Create the run and its job token (returned once, in plain text)."""
    budget = repo.get_budget(session, budget_id, lock=True)
    pod = repo.get_of_budget(session, PodRow, spec.pod_id, "pod", budget.id)
    if budget.state is not BudgetState.OPEN:
        raise Conflict(f"budget {budget.id} is {budget.state.value}: no new runs")
    team_money.refuse_if_held(session, budget.team_id, "new run", now)
    if pod.state is not PodState.RUNNING:
        raise Conflict(f"pod {pod.id} is {pod.state.value}: a run needs a running pod")
    plan = None
    if pod.plan_id is not None or budget.require_plan:  # the pod's plan still admits it
        ceiling = open_book(session, budget.id, now, config).figures.effective_ceiling
        plan = admission.bind(session, budget, pod.plan_id, ceiling)
    canary = None if plan is None else admission.Canary.of(plan)
    run = RunRow(
        id=new_id("run"),
        budget_id=budget.id,
        pod_id=pod.id,
        name=spec.name,
        total_steps=spec.total_steps,
        heartbeat_timeout_s=spec.heartbeat_timeout_s,
        checkpoint_grace_s=spec.checkpoint_grace_s,
        step=0,
        status=RunStatus.RUNNING,
        directive=Action.CONTINUE,
        directive_reason=None if canary is None else Reason.CANARY_HOLD,
        directive_message=None if canary is None or plan is None else canary.told(plan),
        policy=spec.policy,
        health_rules=[r.as_dict() for r in rules_for(spec.health, config.health_rules)],
        progress_at=now,
        started_at=now,
        created_at=now,
    )
    session.add(run)
    session.flush()
    token = tokens.issue(session, Role.JOB, now, run_id=run.id, budget_id=budget.id)
    events.record(
        session,
        now,
        Severity.INFO,
        Category.OPERATOR,
        f"run:{run.id}",
        f"Run {run.name!r} created on pod {pod.id}; it must check in every "
        f"{run.heartbeat_timeout_s:g} s or its pod is stopped.",
        budget_id=budget.id,
        evidence={
            "pod_id": pod.id,
            "heartbeat_timeout_s": run.heartbeat_timeout_s,
            "checkpoint_grace_s": run.checkpoint_grace_s,
            "total_steps": run.total_steps,
        },
    )
    return run, token


def end_with_pod(
    session: Session, pod: PodRow, now: datetime, *, silence_told: bool = False
) -> None:
    """The pod has stopped: each of its live runs ends, stopped, or lost if its job was silent.
    A lost run is a warning unless the stop was for that silence (`silence_told`): its
    notice has gone out already."""
    for run in repo.runs_on_pod(session, pod.id):
        status = after_pod_stopped(run.status, heard=heard_lately(run, now))
        if status is run.status:
            continue
        previous, run.status, run.ended_at = run.status, status, now
        saved = (
            f" Its last checkpoint: step {run.checkpoint_step}, {run.checkpoint_path}."
            if run.checkpoint_path
            else " It named no checkpoint."
        )
        message = (
            "Run lost: its job went silent and its pod has stopped."
            if status is RunStatus.LOST
            else f"Run stopped with its pod at step {run.step}."
        )
        events.record(
            session,
            now,
            Severity.WARNING if status is RunStatus.LOST and not silence_told else Severity.INFO,
            Category.HARNESS,
            f"run:{run.id}",
            message + saved,
            budget_id=run.budget_id,
            evidence={
                "from": previous.value,
                "to": status.value,
                "step": run.step,
                "checkpoint": {"step": run.checkpoint_step, "path": run.checkpoint_path}
                if run.checkpoint_path
                else None,
                "last_heartbeat_at": run.last_heartbeat_at.isoformat()
                if run.last_heartbeat_at
                else None,
            },
        )
