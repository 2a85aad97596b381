from __future__ import annotations

from typing import Annotated

from fastapi import Query

from governor.api import views
from governor.api.deps import Context, JobOfBudget, Now, Operator, Paging, Tx, Viewer
from governor.api.error_responses import errors
from governor.api.route import api_router
from governor.api.schemas import (
    AdmittedPlanOut,
    OverrideIn,
    Page,
    PlanCheckOut,
    PlanIn,
    ReleaseIn,
)
from governor.domain.money import format_usd
from governor.services.fleet import budgets
from governor.services.jobs import checkins
from governor.services.plans import admission

router = api_router(prefix="/v1/budgets/{budget_id}/plans", tags=["plans"])


@router.post("", status_code=201, responses=errors(409))
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
) -> PlanCheckOut:
    """Check a plan before renting: go, canary_only or no_go, with every reason. Kept. With
    `pod_id`, the verdict also names which of the pod's GPUs have room for it."""
    with tx() as session:
        checkins.refuse_ended_job(session, caller)
        row = admission.check(
            session,
            ctx.config,
            budget_id,
            body.to_plan(),
            body.document(),
            now,
            pod_id=pod_id,
        )
        return views.plan_check(row)


@router.get("")
def history(budget_id: str, _: Viewer, tx: Tx, paging: Paging) -> Page[PlanCheckOut]:
    """The verdicts given on the budget's plans, oldest first."""
    with tx.read() as session:
        page = admission.history(session, budget_id, paging)
        return Page[PlanCheckOut].of(page, views.plan_check)


@router.get("/admitted")
def admitted(
    budget_id: str, _: Viewer, ctx: Context, tx: Tx, now: Now, paging: Paging
) -> Page[AdmittedPlanOut]:
    """The budget's admitted plans, by their latest check, oldest first: what each has spent
    and still holds back."""
    with tx.read() as session:
        book = budgets.book(session, ctx.config, budget_id, now)
        page = admission.reservations_page(session, book, paging)
        return Page[AdmittedPlanOut].of(
            page,
            lambda r: AdmittedPlanOut(
                plan=views.plan_check(r.plan),
                spent_usd=format_usd(r.spent),
                reserved_usd=format_usd(r.reserved),
                released=r.released,
            ),
        )


@router.post("/{plan_id}/override", responses=errors(409))
def override(
    budget_id: str, plan_id: str, body: OverrideIn, caller: Operator, tx: Tx, now: Now
) -> PlanCheckOut:
    """Let a no_go plan admit pods and runs anyway, with a written reason (audited), until the
    plan is checked again."""
    with tx() as session:
        return views.plan_check(
            admission.override(session, budget_id, plan_id, body.reason, now, by=caller)
        )


@router.post("/{plan_id}/release", responses=errors(409))
def release(
    budget_id: str, plan_id: str, body: ReleaseIn, caller: Operator, tx: Tx, now: Now
) -> PlanCheckOut:
    """Release a canary_only plan's training on the canary's measured peak (a pod without
    telemetry is released only this way); 409 with the figures when the peak does not fit."""
    with tx() as session:
        return views.plan_check(
            admission.release_by_operator(
                session, budget_id, plan_id, body.measured_peak_gib, body.reason, now, by=caller
            )
        )


@router.delete("/{plan_id}")
def withdraw(budget_id: str, plan_id: str, caller: Operator, tx: Tx, now: Now) -> PlanCheckOut:
    """Take a plan back: it reserves nothing more and admits no new pod."""
    with tx() as session:
        return views.plan_check(admission.withdraw(session, budget_id, plan_id, now, by=caller))
