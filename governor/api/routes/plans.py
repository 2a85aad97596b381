from __future__ import annotations

from fastapi import APIRouter

from governor.api import views
from governor.api.deps import Caller, Context, Now, Tx, Viewer
from governor.api.schemas import PlanCheckOut, PlanIn
from governor.services import admission, checkins

router = APIRouter(prefix="/v1/budgets/{budget_id}/plans", tags=["plans"])


@router.post("", status_code=201)
def check(
    budget_id: str, body: PlanIn, caller: Caller, ctx: Context, tx: Tx, now: Now
) -> PlanCheckOut:
    """Check a plan before renting: go, canary_only or no_go, with every reason. Kept."""
    caller.require_budget(budget_id)
    with tx() as session:
        checkins.refuse_ended_job(session, caller)
        row = admission.check(session, ctx.config, budget_id, body.to_plan(), body.document(), now)
        return views.plan_check(row)


@router.get("")
def history(budget_id: str, _: Viewer, tx: Tx) -> list[PlanCheckOut]:
    """Every verdict given on the budget's plans, oldest first."""
    with tx.read() as session:
        return [views.plan_check(r) for r in admission.history(session, budget_id)]
