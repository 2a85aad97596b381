from __future__ import annotations

from typing import Annotated

from fastapi import Query

from governor.api import views
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
from governor.api.safe_input import QueryName, QueryTime
from governor.api.schemas import (
    EventOut,
    MetricPointOut,
    Page,
    RunCreated,
    RunEventIn,
    RunIn,
    RunOut,
)
from governor.db import repository as repo
from governor.domain.health import HealthRule
from governor.domain.model import RunStatus
from governor.services import events
from governor.services.jobs import checkins
from governor.services.monitoring import metric_history
from governor.services.runs import lifecycle

router = api_router(tags=["runs"])


@router.post("/v1/budgets/{budget_id}/runs", status_code=201, responses=errors(409))
def create(budget_id: str, body: RunIn, _: Operator, ctx: Context, tx: Tx, now: Now) -> RunCreated:
    """Create a run on a pod. The response carries the job's token, once."""
    policy = body.policy.model_dump(exclude_none=True, exclude={"health"}) if body.policy else None
    health = None if body.policy is None or body.policy.health is None else body.policy.health
    spec = lifecycle.RunSpec(
        **body.model_dump(exclude={"policy"}),
        policy=policy or None,
        health=None if health is None else tuple(HealthRule.of(r.model_dump()) for r in health),
    )
    with tx() as session:
        row, token = lifecycle.create(session, ctx.config, budget_id, spec, now)
        return RunCreated(**views.run(session, row).model_dump(), token=token)


@router.get("/v1/runs")
def list_runs(
    _: Viewer,
    tx: Tx,
    paging: Paging,
    budget_id: QueryName | None = None,
    name: QueryName | None = None,
    status: RunStatus | None = None,
) -> Page[RunOut]:
    """Runs, oldest first, each as `GET /v1/runs/{id}` shows it; narrowed to a budget's, to
    those so named (names need not be unique), or to one status."""
    with tx.read() as session:
        page = repo.runs(session, paging, budget_id=budget_id, name=name, status=status)
        return Page[RunOut].of(page, lambda row: views.run(session, row))


@router.get("/v1/runs/{run_id}")
def get_run(run_id: str, _: Viewer, tx: Tx) -> RunOut:
    with tx.read() as session:
        return views.run(session, repo.get_run(session, run_id))


@router.get("/v1/runs/{run_id}/metrics")
def metrics(
    run_id: str,
    _: Viewer,
    tx: Tx,
    paging: Paging,
    name: Annotated[str | None, Query(max_length=100)] = None,
    since: QueryTime | None = None,
) -> Page[MetricPointOut]:
    """The run's heartbeat metrics over time, oldest first (numbers only; old points folded
    into minutes like GPU samples). `name`: one metric; `since` without a zone is UTC."""
    with tx.read() as session:
        repo.get_run(session, run_id)
        page = metric_history.series(session, run_id, name, since, paging)
        return Page[MetricPointOut].of(
            page, lambda r: MetricPointOut.model_validate(r, from_attributes=True)
        )


@router.post("/v1/runs/{run_id}/events", status_code=201, responses=errors(409))
def report(run_id: str, body: RunEventIn, caller: EventWriter, tx: Tx, now: Now) -> EventOut:
    """Report a failure or a note: harness, model or provider (an OOM is always model)."""
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
