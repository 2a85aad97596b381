"""Starting a run: the job on a pod that must check in, with its own token."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.orm import Session

from governor.db import repository as repo
from governor.db.tables import RunRow
from governor.domain.errors import Conflict, Invalid
from governor.domain.model import Action, BudgetState, Category, PodState, Role, RunStatus, Severity
from governor.services import events, tokens
from governor.services.context import DEFAULT_CHECKPOINT_GRACE_S, DEFAULT_HEARTBEAT_TIMEOUT_S
from governor.services.ids import new_id


@dataclass(frozen=True)
class RunSpec:
    name: str
    pod_id: str
    total_steps: int | None = None
    heartbeat_timeout_s: float = DEFAULT_HEARTBEAT_TIMEOUT_S
    checkpoint_grace_s: float = DEFAULT_CHECKPOINT_GRACE_S
    policy: dict[str, float] | None = None  # per-run GPU and progress thresholds


def create(session: Session, budget_id: str, spec: RunSpec, now: datetime) -> tuple[RunRow, str]:
    """Create the run and its job token (returned once, in plain text)."""
    budget = repo.get_budget(session, budget_id, lock=True)
    pod = repo.get_pod(session, spec.pod_id)
    if pod.budget_id != budget.id:
        raise Invalid(f"pod {pod.id} belongs to budget {pod.budget_id}, not {budget.id}")
    if budget.state is not BudgetState.OPEN:
        raise Conflict(f"budget {budget.id} is {budget.state.value}: no new runs")
    if pod.state is not PodState.RUNNING:
        raise Conflict(f"pod {pod.id} is {pod.state.value}: a run needs a running pod")
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
        policy=spec.policy,
        progress_at=now,
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
