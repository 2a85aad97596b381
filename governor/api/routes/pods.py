from __future__ import annotations

from governor.api import views
from governor.api.deps import Context, Now, Operator, Paging, Tx, Viewer
from governor.api.error_responses import errors
from governor.api.route import api_router
from governor.api.safe_input import QueryName
from governor.api.schemas import (
    Page,
    PodIn,
    PodOut,
    ResumedOut,
    ResumeIn,
    StopIn,
    StopOrderOut,
)
from governor.db import repository as repo
from governor.services.fleet import budgets, pods, resumes
from governor.services.money.book import open_books

router = api_router(tags=["pods"])


@router.post("/v1/budgets/{budget_id}/pods", status_code=201, responses=errors(409))
def register(budget_id: str, body: PodIn, _: Operator, ctx: Context, tx: Tx, now: Now) -> PodOut:
    """Put a pod under a budget. The provider's rate is used where it reports one."""
    registration = pods.Registration(**body.model_dump())
    with tx() as session:
        row = pods.register(session, ctx, budget_id, registration, now)
        return views.pod(session, row, budgets.book(session, ctx.config, budget_id, now), None)


@router.get("/v1/pods")
def list_pods(
    _: Viewer,
    ctx: Context,
    tx: Tx,
    now: Now,
    paging: Paging,
    budget_id: QueryName | None = None,
    name: QueryName | None = None,
) -> Page[PodOut]:
    """Pods, oldest first, each as `GET /v1/pods/{id}` shows it; `budget_id`: that budget's,
    `name`: those so named (a name is unique within a budget, not across budgets)."""
    with tx.read() as session:
        page = repo.pods(session, paging, budget_id=budget_id, name=name)
        ids = sorted({row.budget_id for row in page.items})
        books = {b.budget.id: b for b in open_books(session, ids, now, ctx.config)}
        return Page[PodOut].of(
            page,
            lambda row: views.pod(
                session, row, books[row.budget_id], repo.latest_stop_order(session, row.id)
            ),
        )


@router.get("/v1/pods/{pod_id}")
def get_pod(pod_id: str, _: Viewer, ctx: Context, tx: Tx, now: Now) -> PodOut:
    with tx.read() as session:
        row = repo.get_pod(session, pod_id)
        book = budgets.book(session, ctx.config, row.budget_id, now)
        return views.pod(session, row, book, repo.latest_stop_order(session, row.id))


@router.post("/v1/pods/{pod_id}/stop", status_code=202, responses=errors(409))
def stop(
    pod_id: str, caller: Operator, ctx: Context, tx: Tx, now: Now, body: StopIn | None = None
) -> StopOrderOut:
    """Stop the pod the way that keeps its workspace, after its job has had time to save."""
    reason = (body or StopIn()).reason
    with tx() as session:
        return views.stop_order(pods.stop_manually(session, ctx, pod_id, reason, now, by=caller))


@router.post("/v1/pods/{pod_id}/resume", responses=errors(409))
def resume(pod_id: str, body: ResumeIn, caller: Operator, ctx: Context, tx: Tx) -> ResumedOut:
    """Start a stopped pod again on its kept workspace, once its budget is open again (after
    an approved extension). The committed spend with the pod running must stay under the
    ceiling and the budget's plan must still pass preflight. The run that stopped with the
    pod continues as its next attempt, with a new job token: relaunch the job with it."""
    resumed = resumes.resume(ctx, pod_id, body.reason, by=caller)
    with tx.read() as session:
        pod = repo.get_pod(session, resumed.pod.id)
        book = budgets.book(session, ctx.config, pod.budget_id, ctx.clock.now())
        run = None if resumed.run is None else repo.get_run(session, resumed.run.id)
        return ResumedOut(
            pod=views.pod(session, pod, book, repo.latest_stop_order(session, pod.id)),
            run=None if run is None else views.run(session, run),
            token=resumed.token,
        )
