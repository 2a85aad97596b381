"""The launch gates: SkyPilot's admin policy and dstack's REST plugin, each calling with the
gate token in the URL (its own routes: a gate token opens nothing else), and the operator's
withdrawal of an accepted launch."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

from fastapi import Request, Response
from starlette.concurrency import run_in_threadpool

from governor.api.deps import Context, Now, Operator, Tx, gate_caller
from governor.api.error_responses import errors
from governor.api.gates import dstack, skypilot
from governor.api.gates.env import Env
from governor.api.route import api_router
from governor.api.schemas import LaunchOut
from governor.domain.errors import Invalid
from governor.domain.launch_gate import LaunchRequest
from governor.domain.launch_labels import BUDGET_LABEL, LAUNCH_LABEL
from governor.services.context import ServiceContext
from governor.services.plans import launch_model, launches
from governor.services.plans.launch_model import Launch
from governor.services.security.shared_secrets import shared_secret
from governor.services.security.tokens import Principal

router = api_router(tags=["gates"])
CLAIM_KEY = launches.CLAIM_KEY


@router.post(
    "/v1/gates/{token}/skypilot",
    response_class=Response,
    responses={
        **errors(401, 403, 413, 429, 503),
        400: {
            "description": "the launch is refused: the reasons, as SkyPilot shows them",
            "content": {"text/plain": {"schema": {"type": "string"}}},
        },
    },
)
async def skypilot_policy(token: str, request: Request, ctx: Context) -> Response:
    """SkyPilot's REST admin policy (`admin_policy: <this URL>` in the API server's config):
    a launch is judged against its budget; accepted, it is reserved, labelled and given its
    claim; refused, HTTP 400 with the reasons."""
    caller = await gate_caller(request, token)
    sky = skypilot.read(await request.body())
    if not sky.gated or (sky.launch_label and await _accepted(ctx, caller, sky.launch_label)):
        return _json_text(skypilot.unchanged(sky))
    launch = skypilot.launch_request(sky)
    answer = await _judge(request, ctx, caller, launch, reserve=sky.reserves, key=None)
    if not answer.decision.accepted:
        return Response(answer.decision.message, 400, media_type="text/plain")
    if answer.launch is None or answer.claim is None:  # judged only: the task as it came
        return _json_text(skypilot.unchanged(sky))
    labels = {BUDGET_LABEL: _budget_label(answer), LAUNCH_LABEL: answer.launch.id}
    env = Env(str(request.base_url).rstrip("/"), answer.claim)
    return _json_text(skypilot.accepted(sky, labels, env))


GATE_ERRORS = errors(401, 403, 413, 429, 503)  # the token in the path, the body, the database


@router.post("/v1/gates/{token}/dstack/apply_policies/on_run_apply", responses=GATE_ERRORS)
async def dstack_run(token: str, request: Request, ctx: Context) -> dict[str, Any]:
    """dstack's REST plugin for runs (`DSTACK_PLUGIN_SERVICE_URI=<this URL without
    /apply_policies/...>`): HTTP 200 with the spec, mutated where accepted, and `error` with
    the reasons where refused."""
    caller = await gate_caller(request, token)
    call = dstack.read(await _json(request))
    launch = dstack.launch_request(call)
    answer = await _judge(request, ctx, caller, launch, reserve=True, key=call.key)
    if not answer.decision.accepted:
        return dstack.refused(call, answer.decision.message)
    assert answer.launch is not None and answer.claim is not None
    tags = {BUDGET_LABEL: _budget_label(answer), LAUNCH_LABEL: answer.launch.id}
    env = Env(str(request.base_url).rstrip("/"), answer.claim)
    figures = answer.decision.figures
    hours = launch.max_hours or Decimal(str(figures["hours"]))
    per_node = Decimal(str(figures["per_hour_usd"])) / launch.nodes
    return dstack.accepted(call, tags, env, hours, per_node)


@router.post("/v1/gates/{token}/dstack/apply_policies/on_fleet_apply", responses=GATE_ERRORS)
@router.post("/v1/gates/{token}/dstack/apply_policies/on_volume_apply", responses=GATE_ERRORS)
@router.post("/v1/gates/{token}/dstack/apply_policies/on_gateway_apply", responses=GATE_ERRORS)
async def dstack_other(token: str, request: Request) -> dict[str, Any]:
    """dstack's fleets, volumes and gateways: passed through unchanged (they run no job; a
    fleet's instances bill only once a run is placed on them, and that run is gated)."""
    await gate_caller(request, token)
    return dstack.unchanged(await _json(request))


@router.delete("/v1/launches/{launch_id}", response_model=LaunchOut, responses=errors(409))
def withdraw(launch_id: str, caller: Operator, tx: Tx, now: Now) -> Launch:
    """Withdraw an accepted launch: its reservation is released now (its claim still works
    once its pod registers)."""
    with tx() as session:
        return launch_model.launch(launches.withdraw(session, launch_id, now, by=caller))


@router.get("/v1/launches/{launch_id}", response_model=LaunchOut)
def get_launch(launch_id: str, _: Operator, tx: Tx) -> Launch:
    """An accepted launch: its budget, price, reservation, the figures it was judged on."""
    with tx.read() as session:
        return launch_model.get(session, launch_id)


async def _judge(
    request: Request,
    ctx: ServiceContext,
    caller: Principal,
    launch: LaunchRequest,
    *,
    reserve: bool,
    key: str | None,
) -> launches.GateAnswer:
    claim_key = await _claim_key(request, ctx)
    now = ctx.clock.now()

    def judge() -> launches.GateAnswer:
        with ctx.unit_of_work() as session:
            return launches.judge(
                session,
                ctx.config,
                launch,
                now,
                reserve=reserve,
                claim_key=claim_key,
                request_key=key,
                scope=caller.teams,
            )

    return await run_in_threadpool(judge)


async def _claim_key(request: Request, ctx: ServiceContext) -> bytes:
    """The shared secret claims are made from: read once, then kept with the app."""
    key: bytes | None = getattr(request.app.state, "claim_key", None)
    if key is None:
        key = await run_in_threadpool(shared_secret, ctx.sessions, CLAIM_KEY)
        request.app.state.claim_key = key
    return key


async def _accepted(ctx: ServiceContext, caller: Principal, launch_id: str) -> bool:
    """Whether the relaunch's label names a launch a gate accepted for one of the gate token's
    teams (another team's passes no more than an unknown one)."""

    def known() -> bool:
        with ctx.read_only() as session:
            return launches.accepted(session, launch_id, caller.teams)

    return await run_in_threadpool(known)


def _budget_label(answer: launches.GateAnswer) -> str:
    assert answer.budget_id is not None
    return answer.budget_id


async def _json(request: Request) -> Any:
    try:
        return json.loads(await request.body())
    except ValueError:
        raise Invalid("the body is not JSON") from None


def _json_text(text: str) -> Response:
    return Response(text, media_type="application/json")
