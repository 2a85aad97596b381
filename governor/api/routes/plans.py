from __future__ import annotations

from typing import Annotated

from fastapi import Query

from governor.api.deps import Context, JobOfBudget, Now, Operator, Paging, Tx, Viewer
from governor.api.error_responses import errors
from governor.api.route import api_router
from governor.api.schemas import (
    AdmittedPlanOut,
    OverrideIn,
    PlanCheckOut,
    ReleaseIn,
    page_of,
)
from governor.domain.paging import Page
from governor.services.jobs import checkins
from governor.services.plans import plan_check_model
from governor.services.plans.document import PlanIn
from governor.services.plans.plan_check_model import AdmittedPlan, PlanCheck

router = api_router(prefix="/v1/budgets/{budget_id}/plans", tags=["plans"])


@router.post("", status_code=201, response_model=PlanCheckOut, responses=errors(409))
def check(
    budget_id: str,
    body: PlanIn,
    caller: JobOfBudget,
    ctx: Context,
    tx: Tx,
    now: Now,
    pod_id: Annotated[
        str | None,
        Query(max_length=32, description="also judge the free memory this pod's GPUs report"),
    ] = None,
) -> PlanCheck:
    """Check a plan before renting: go, canary_only or no_go, with every reason. Kept. With
    `pod_id`, the verdict also names which of the pod's GPUs have room for it."""
    with tx() as session:
        checkins.refuse_ended_job(session, caller)
        return plan_check_model.check(
            session,
            ctx.config,
            budget_id,
            body.to_plan(),
            body.document(),
            now,
            pod_id=pod_id,
        )


@router.get("", response_model=page_of(PlanCheckOut))
def history(budget_id: str, _: Viewer, tx: Tx, paging: Paging) -> Page[PlanCheck]:
    """The verdicts given on the budget's plans, oldest first."""
    with tx.read() as session:
        return plan_check_model.history(session, budget_id, paging)


@router.get("/admitted", response_model=page_of(AdmittedPlanOut))
def admitted(
    budget_id: str, _: Viewer, ctx: Context, tx: Tx, now: Now, paging: Paging
) -> Page[AdmittedPlan]:
    """The budget's admitted plans, by their latest check, oldest first: what each has spent
    and still holds back."""
    with tx.read() as session:
        return plan_check_model.admitted(session, ctx.config, budget_id, now, paging)


@router.post("/{plan_id}/override", response_model=PlanCheckOut, responses=errors(409))
def override(
    budget_id: str, plan_id: str, body: OverrideIn, caller: Operator, tx: Tx, now: Now
) -> PlanCheck:
    """Let a no_go plan admit pods and runs anyway, with a written reason (audited), until the
    plan is checked again."""
    with tx() as session:
        return plan_check_model.override(session, budget_id, plan_id, body.reason, now, by=caller)


@router.post("/{plan_id}/release", response_model=PlanCheckOut, responses=errors(409))
def release(
    budget_id: str, plan_id: str, body: ReleaseIn, caller: Operator, tx: Tx, now: Now
) -> PlanCheck:
    """Release a canary_only plan's training on the canary's measured peak (a pod without
    telemetry is released only this way); 409 with the figures when the peak does not fit."""
    with tx() as session:
        return plan_check_model.release(
            session, budget_id, plan_id, body.measured_peak_gib, body.reason, now, by=caller
        )


@router.delete("/{plan_id}", response_model=PlanCheckOut)
def withdraw(budget_id: str, plan_id: str, caller: Operator, tx: Tx, now: Now) -> PlanCheck:
    """Take a plan back: it reserves nothing more and admits no new pod."""
    with tx() as session:
        return plan_check_model.withdraw(session, budget_id, plan_id, now, by=caller)
