from __future__ import annotations

from fastapi import APIRouter

from governor.api import views
from governor.api.deps import Caller, Context, Now, Operator, Tx, Viewer
from governor.api.schemas import (
    DirectiveOut,
    EventOut,
    HeartbeatIn,
    RunCreated,
    RunEventIn,
    RunIn,
    RunOut,
)
from governor.db import repository as repo
from governor.services import checkins, events, runs

router = APIRouter(tags=["runs"])


@router.post("/v1/budgets/{budget_id}/runs", status_code=201)
def create(budget_id: str, body: RunIn, _: Operator, tx: Tx, now: Now) -> RunCreated:
    """Create a run on a pod. The response carries the job's token, once."""
    policy = body.policy.model_dump(exclude_none=True) if body.policy else None
    spec = runs.RunSpec(**body.model_dump(exclude={"policy"}), policy=policy or None)
    with tx() as session:
        row, token = runs.create(session, budget_id, spec, now)
        return RunCreated(**views.run(session, row).model_dump(), token=token)


@router.get("/v1/runs/{run_id}")
def get_run(run_id: str, _: Viewer, tx: Tx) -> RunOut:
    with tx.read() as session:
        return views.run(session, repo.get_run(session, run_id))


@router.post("/v1/runs/{run_id}/heartbeat")
def heartbeat(
    run_id: str, body: HeartbeatIn, caller: Caller, ctx: Context, now: Now
) -> DirectiveOut:
    """Check in. The answer says continue, checkpoint, or stop (with a deadline)."""
    caller.require_run(run_id)
    beat = checkins.Heartbeat(
        step=body.step,
        total_steps=body.total_steps,
        phase=body.phase,
        status=body.status,
        checkpoint=(
            None
            if body.checkpoint is None
            else checkins.Checkpoint(body.checkpoint.step, body.checkpoint.path)
        ),
        metrics=body.metrics,
    )
    directive = checkins.check_in(ctx.sessions, ctx.config, run_id, beat, now)
    return DirectiveOut(
        action=directive.action,
        reason=directive.reason,
        message=directive.message,
        deadline=directive.deadline,
        budget=views.brief(directive.figures, directive.figures_at),
        next_heartbeat_s=directive.next_heartbeat_s,
    )


@router.post("/v1/runs/{run_id}/events", status_code=201)
def report(run_id: str, body: RunEventIn, caller: Caller, tx: Tx, now: Now) -> EventOut:
    """Report a failure or a note: harness, model or provider (an OOM is always model)."""
    caller.require_run(run_id)
    with tx() as session:
        checkins.refuse_ended_job(session, caller)
        run = repo.get_run(session, run_id)
        row = events.record(
            session,
            now,
            body.severity,
            body.category,
            f"run:{run.id}",
            body.message,
            budget_id=run.budget_id,
            evidence={**(body.evidence or {}), "kind": body.kind, "reported_by": "job"},
        )
        session.flush()
        return views.event(row)
