from __future__ import annotations

from typing import Annotated

from fastapi import Query, Request
from starlette.concurrency import run_in_threadpool

from governor.api.deps import (
    Context,
    EventWriter,
    Now,
    Operator,
    Paging,
    Tx,
    Viewer,
)
from governor.api.error_responses import errors
from governor.api.route import api_router
from governor.api.schemas import (
    AcknowledgeIn,
    ClaimIn,
    EventOut,
    MetricPointOut,
    RunCreated,
    RunEventIn,
    RunIn,
    RunOut,
    page_of,
)
from governor.domain.errors import NotFound
from governor.domain.health import HealthRule
from governor.domain.model import RunStatus
from governor.domain.paging import Page
from governor.services.events import Event
from governor.services.jobs import checkins
from governor.services.monitoring import metric_point_model
from governor.services.monitoring.metric_point_model import MetricPoint
from governor.services.runs import job_events, lifecycle, run_model
from governor.services.runs.run_model import CreatedRun, Run
from governor.services.security import scopes
from governor.services.security.safe_input import QueryName, QueryTime

router = api_router(tags=["runs"])


@router.post(
    "/v1/budgets/{budget_id}/runs",
    status_code=201,
    response_model=RunCreated,
    responses=errors(409),
)
def create(
    budget_id: str, body: RunIn, caller: Operator, ctx: Context, tx: Tx, now: Now
) -> CreatedRun:
    """Create a run on a pod. The response carries the job's token, once."""
    policy = body.policy.model_dump(exclude_none=True, exclude={"health"}) if body.policy else None
    health = None if body.policy is None or body.policy.health is None else body.policy.health
    spec = lifecycle.RunSpec(
        **body.model_dump(exclude={"policy"}),
        policy=policy or None,
        health=None if health is None else tuple(HealthRule.of(r.model_dump()) for r in health),
    )
    with tx() as session:
        scopes.require_seen(session, caller, {"pod_id": body.pod_id})  # another team's: 404
        return run_model.create(session, ctx.config, budget_id, spec, now)


@router.post(
    "/v1/runs/claim",
    status_code=201,
    response_model=RunCreated,
    responses=errors(404, 409, 429),
)
async def claim(body: ClaimIn, request: Request, ctx: Context, tx: Tx, now: Now) -> CreatedRun:
    """A launched job exchanges its one-time claim secret (GOVERNOR_CLAIM, put in its
    environment when a gate accepted its launch) for its run's id and job token: the run is
    made on the pod registered with its launch. 409 while no pod of the launch is registered
    (retry), and for a claim already used. An unknown or expired claim is 404, the two worded
    alike, and counts as a failed authentication."""

    def exchange() -> CreatedRun:
        with tx() as session:
            return run_model.claim(
                session, ctx.config, body.claim, now, name=body.name, total_steps=body.total_steps
            )

    try:
        return await run_in_threadpool(exchange)
    except NotFound:
        peer = request.client.host if request.client else None
        ctx.auth_limits.failed(ctx.address_of(peer, request.headers.get("x-forwarded-for")))
        raise


@router.get("/v1/runs", response_model=page_of(RunOut))
def list_runs(
    caller: Viewer,
    tx: Tx,
    paging: Paging,
    budget_id: QueryName | None = None,
    name: QueryName | None = None,
    status: RunStatus | None = None,
) -> Page[Run]:
    """Runs, oldest first, each as `GET /v1/runs/{id}` shows it; narrowed to a budget's, to
    those so named (names need not be unique), or to one status."""
    with tx.read() as session:
        return run_model.page(
            session, paging, budget_id=budget_id, name=name, status=status, scope=caller.teams
        )


@router.get("/v1/runs/{run_id}", response_model=RunOut)
def get_run(run_id: str, _: Viewer, tx: Tx) -> Run:
    with tx.read() as session:
        return run_model.get(session, run_id)


@router.post("/v1/runs/{run_id}/acknowledge", response_model=RunOut, responses=errors(409))
def acknowledge(
    run_id: str,
    caller: Operator,
    tx: Tx,
    now: Now,
    body: AcknowledgeIn | None = None,
) -> Run:
    """Acknowledge a lost run (its job went silent and its pod stopped): it leaves what needs
    an operator first, and the acknowledgement is an event with who and why. Asking again
    returns the run unchanged; a run that is not lost answers 409."""
    reason = (body or AcknowledgeIn()).reason
    with tx() as session:
        return run_model.acknowledge(session, run_id, reason, now, by=caller)


@router.get("/v1/runs/{run_id}/metrics", response_model=page_of(MetricPointOut))
def metrics(
    run_id: str,
    _: Viewer,
    tx: Tx,
    paging: Paging,
    name: Annotated[str | None, Query(max_length=100)] = None,
    since: QueryTime | None = None,
) -> Page[MetricPoint]:
    """The run's heartbeat metrics over time, oldest first (numbers only; old points folded
    into minutes like GPU samples). `name`: one metric; `since` without a zone is UTC."""
    with tx.read() as session:
        return metric_point_model.series(session, run_id, name, since, paging)


@router.post(
    "/v1/runs/{run_id}/events", status_code=201, response_model=EventOut, responses=errors(409)
)
def report(run_id: str, body: RunEventIn, caller: EventWriter, tx: Tx, now: Now) -> Event:
    """Report a failure or a note: harness, model or provider (an OOM is always model)."""
    with tx() as session:
        checkins.refuse_ended_job(session, caller)
        return job_events.report(
            session,
            run_id,
            now,
            severity=body.severity,
            category=body.category,
            kind=body.kind,
            message=body.message,
            evidence=body.evidence,
        )
