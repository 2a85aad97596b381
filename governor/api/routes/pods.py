from __future__ import annotations

from fastapi import Response

from governor.api.deps import Context, Now, Operator, Paging, Tx, Viewer
from governor.api.error_responses import errors
from governor.api.route import api_router
from governor.api.schemas import (
    PodIn,
    PodOut,
    ResumedOut,
    ResumeIn,
    StopIn,
    StopOrderOut,
    page_of,
)
from governor.domain.paging import Page
from governor.domain.stop_order import StopState
from governor.services.fleet import pod_model, pods
from governor.services.fleet.pod_model import Pod, ResumedPod
from governor.services.security.safe_input import QueryName
from governor.services.stopping.stop_order_model import StopOrder

router = api_router(tags=["pods"])


@router.post(
    "/v1/budgets/{budget_id}/pods", status_code=201, response_model=PodOut, responses=errors(409)
)
def register(budget_id: str, body: PodIn, caller: Operator, ctx: Context, tx: Tx, now: Now) -> Pod:
    """Put a pod under a budget. The provider's rate is used where it reports one. A pod
    whose stop would lose its workspace is refused (422, saying what would be lost) unless
    `acknowledge_loss` says why that is acceptable; the acknowledgement is recorded with
    who gave it."""
    fields = body.model_dump()
    launch_id = fields.pop("launch")
    registration = pods.Registration(**fields, launch_id=launch_id)
    with tx() as session:
        return pod_model.register(session, ctx, budget_id, registration, now, by=caller)


@router.get("/v1/pods", response_model=page_of(PodOut))
def list_pods(
    caller: Viewer,
    ctx: Context,
    tx: Tx,
    now: Now,
    paging: Paging,
    budget_id: QueryName | None = None,
    name: QueryName | None = None,
) -> Page[Pod]:
    """Pods, oldest first, each as `GET /v1/pods/{id}` shows it; `budget_id`: that budget's,
    `name`: those so named (a name is unique within a budget, not across budgets)."""
    with tx.read() as session:
        return pod_model.page(
            session, ctx.config, now, paging, budget_id=budget_id, name=name, scope=caller.teams
        )


@router.get("/v1/pods/{pod_id}", response_model=PodOut)
def get_pod(pod_id: str, _: Viewer, ctx: Context, tx: Tx, now: Now) -> Pod:
    with tx.read() as session:
        return pod_model.get(session, ctx.config, pod_id, now)


@router.post(
    "/v1/pods/{pod_id}/stop",
    status_code=202,
    response_model=StopOrderOut,
    responses={
        200: {
            "model": StopOrderOut,
            "description": "the pod was already stopped: the stop order that stopped it (its "
            "`confirmed_at` says when); nothing new is ordered",
        },
        **errors(409),
    },
)
def stop(
    pod_id: str,
    caller: Operator,
    ctx: Context,
    tx: Tx,
    now: Now,
    response: Response,
    body: StopIn | None = None,
) -> StopOrder:
    """Stop the pod the way that keeps its workspace, after its job has had time to save.
    Asking again while a stop is under way returns that stop order; a pod already stopped is
    answered 200 with the order that stopped it: resume it with `POST /v1/pods/{id}/resume`."""
    reason = (body or StopIn()).reason
    with tx() as session:
        order = pod_model.stop(session, ctx, pod_id, reason, now, by=caller)
    if order.state is StopState.STOPPED:
        response.status_code = 200
    return order


@router.post("/v1/pods/{pod_id}/resume", response_model=ResumedOut, responses=errors(409))
def resume(pod_id: str, body: ResumeIn, caller: Operator, ctx: Context) -> ResumedPod:
    """Start a stopped pod again on its kept workspace, once its budget is open again (after
    an approved extension). The committed spend with the pod running must stay under the
    ceiling and the budget's plan must still pass preflight. The run that stopped with the
    pod continues as its next attempt, with a new job token: relaunch the job with it."""
    return pod_model.resume(ctx, pod_id, body.reason, by=caller)
