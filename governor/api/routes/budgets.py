from __future__ import annotations

from governor.api.deps import Context, Now, Operator, Paging, Tx, Viewer
from governor.api.error_responses import errors
from governor.api.route import api_router
from governor.api.schemas import AdoptionIn, BudgetIn, BudgetOut, CloseIn, page_of
from governor.domain.paging import Page
from governor.services.fleet import budget_model, budgets
from governor.services.fleet.budget_model import Budget
from governor.services.security.safe_input import QueryName

router = api_router(prefix="/v1/budgets", tags=["budgets"])


@router.post("", status_code=201, response_model=BudgetOut, responses=errors(404, 409))
def declare(body: BudgetIn, caller: Operator, ctx: Context, tx: Tx, now: Now) -> Budget:
    """Declare a budget and its hard ceiling, in writing, before any pod is registered. Its
    name is unique among the budgets not closed (409 otherwise). It belongs to the team
    `team` names (404 if there is none), or else to the default team."""
    declaration = budgets.Declaration(
        name=body.name.strip(),
        ceiling_usd=body.ceiling_usd,
        reserve_usd=body.reserve_usd,
        storage_tail_hours=body.storage_tail_hours,
        alert_thresholds=tuple(body.alert_thresholds),
        note=body.note,
        require_plan=ctx.config.require_plan if body.require_plan is None else body.require_plan,
        team=body.team,
        adopt_labelled_pods=body.adopt_labelled_pods,
    )
    with tx() as session:
        return budget_model.declare(session, ctx.config, declaration, now, scope=caller.teams)


@router.get("", response_model=page_of(BudgetOut))
def list_budgets(
    caller: Viewer,
    ctx: Context,
    tx: Tx,
    now: Now,
    paging: Paging,
    name: QueryName | None = None,
) -> Page[Budget]:
    """Budgets the caller may see, oldest first; `name`: those so named (one open, any number
    closed)."""
    with tx.read() as session:
        return budget_model.page(session, ctx.config, now, paging, name=name, scope=caller.teams)


@router.get("/{budget_id}", response_model=BudgetOut)
def get_budget(budget_id: str, _: Viewer, ctx: Context, tx: Tx, now: Now) -> Budget:
    with tx.read() as session:
        return budget_model.get(session, ctx.config, budget_id, now)


@router.post("/{budget_id}/close", response_model=BudgetOut, responses=errors(409))
def close(
    budget_id: str, caller: Operator, ctx: Context, tx: Tx, now: Now, body: CloseIn
) -> Budget:
    """Close the budget once none of its pods bills compute: its runs end, pending requests
    expire. With `storage_deleted` its stopped pods are released and stop counting storage
    (say so only once the storage is deleted: the governor never deletes anything)."""
    with tx() as session:
        return budget_model.close(
            session, ctx.config, budget_id, body.reason, body.storage_deleted, now, by=caller
        )


@router.post("/{budget_id}/adoption", response_model=BudgetOut)
def adoption(
    budget_id: str, body: AdoptionIn, caller: Operator, ctx: Context, tx: Tx, now: Now
) -> Budget:
    """Let a pod's `governor-budget` label alone register it under this budget when the
    account sweep finds it billing (`adopt_labelled_pods`), or stop letting it. Without it a
    labelled pod registers only as one of the budget's launches waiting for a pod. Recorded,
    with who and why; setting what is already set changes nothing."""
    with tx() as session:
        return budget_model.adopt_labelled_pods(
            session, ctx.config, budget_id, body.adopt_labelled_pods, body.reason, now, by=caller
        )
