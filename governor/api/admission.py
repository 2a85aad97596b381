"""The Kubernetes validating admission webhook's one route, served on its own TLS port (its
authentication is TLS, and the API server's client certificate where one is required): a GPU
workload is judged against its budget as a launch gate judges a launch, and nothing is
changed (no reservation, no event: `sideEffects: None`, safe under dry run).

It decides within `GOVERNOR_WEBHOOK_DECIDE_S`; when it cannot (the database unreachable or
slow) it answers per `GOVERNOR_WEBHOOK_ON_ERROR`, saying so. A review it cannot read is
answered 400; a workload it cannot read is denied, saying what to fix.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from governor.api.errors import error_body
from governor.api.gates import kubernetes
from governor.domain.errors import Invalid, Unavailable
from governor.domain.kube_workloads import MAX_HOURS_ANNOTATION
from governor.domain.launch_gate import Decision, LaunchRequest
from governor.domain.launch_labels import BUDGET_LABEL
from governor.services.context import DatabaseRefused, ServiceContext
from governor.services.plans import launches

PATH = "/validate"
MAX_BODY_BYTES = 4 * 1024 * 1024  # an object and the one it replaces, each up to etcd's 1.5 MiB
_log = logging.getLogger("governor.admission")

router = APIRouter()


@router.post(PATH)
async def validate(request: Request) -> JSONResponse:
    """An AdmissionReview (admission.k8s.io/v1) answered: allowed with a warning naming the
    budget and the figures, or denied (403) with the reasons, the arithmetic and what to
    change."""
    ctx: ServiceContext = request.app.state.context
    try:
        review = kubernetes.read(json.loads(await request.body()))
    except (ValueError, Invalid) as exc:
        message = exc.message if isinstance(exc, Invalid) else "the body is not JSON"
        return JSONResponse(error_body("invalid", message), status_code=400)
    try:
        judging = kubernetes.judged(review)
    except Invalid as exc:
        return _answer(review, False, f"governor: cannot read this workload: {exc.message}", 400)
    if isinstance(judging, kubernetes.Untouched):
        warnings = (judging.warning,) if judging.warning else ()
        return _answer(review, True, f"governor: not judged: {judging.why}", 200, warnings)
    try:
        decision = await asyncio.wait_for(_decide(ctx, judging), ctx.config.webhook_decide_s)
    except (TimeoutError, DatabaseRefused, Unavailable) as exc:
        return _undecided(ctx, review, judging, exc)
    except Exception as exc:  # a bug: logged, and answered as an undecided review
        _log.exception("the admission webhook could not judge %s", judging.name)
        return _undecided(ctx, review, judging, exc)
    if decision.accepted:
        return _answer(review, True, "governor: allowed", 200, _allowed(decision))
    _log.info("denied %s (user %s): %s", judging.name, review.user, " ".join(decision.reasons))
    return _answer(review, False, _denied(judging, decision), 403)


async def _decide(ctx: ServiceContext, launch: LaunchRequest) -> Decision:
    now = ctx.clock.now()

    def judge() -> Decision:
        with ctx.read_only() as session:  # whatever it might write is rolled back
            answer = launches.judge(
                session, ctx.config, launch, now, reserve=False, claim_key=b"", record=False
            )
            return answer.decision

    return await run_in_threadpool(judge)


def _allowed(decision: Decision) -> tuple[str, ...]:
    figures = decision.figures
    said = f"governor: budget {figures.get('budget')}: {' '.join(decision.reasons)}"
    hours = f"hours from {figures['hours_from']}" if figures.get("hours_from") else ""
    return tuple(w for w in (said, hours and f"governor: {hours}", *decision.warnings) if w)


def _denied(launch: LaunchRequest, decision: Decision) -> str:
    figures = decision.figures
    budget = figures.get("budget") or launch.budget_ref
    hours = f" Priced for {figures['hours']} h ({figures['hours_from']})." if figures else ""
    change = f"To change this: label it {BUDGET_LABEL}=<a budget with the money>" + (
        f", lower the {MAX_HOURS_ANNOTATION} annotation or ask fewer GPUs, ask an "
        f"operator to extend budget {budget} (governor ext request {budget} --amount "
        "USD --reason ...), or submit a plan (governor plan submit plan.json --budget "
        f"{budget})."
        if budget
        else "."
    )
    return f"governor: {launch.name} denied: {' '.join(decision.reasons)}{hours} {change}"


def _undecided(
    ctx: ServiceContext, review: kubernetes.Review, launch: LaunchRequest, exc: BaseException
) -> JSONResponse:
    allowed = ctx.config.webhook_on_error == "allow"
    why = (
        f"no decision within {ctx.config.webhook_decide_s:g} s"
        if isinstance(exc, TimeoutError)
        else "the database is not reachable"
        if isinstance(exc, DatabaseRefused | Unavailable)
        else "an internal error (logged)"
    )
    _log.warning("could not judge %s: %s; %s", launch.name, why, "allowed" if allowed else "denied")
    verdict = "allowed unjudged" if allowed else "denied"
    message = (
        f"governor: could not decide on {launch.name} ({why}): {verdict}, as "
        f"GOVERNOR_WEBHOOK_ON_ERROR={ctx.config.webhook_on_error} says. Try again shortly."
    )
    if allowed:
        return _answer(review, True, message, 200, (message,))
    return _answer(review, False, message, 503)


def _answer(
    review: kubernetes.Review,
    allowed: bool,
    message: str,
    code: int,
    warnings: tuple[str, ...] = (),
) -> JSONResponse:
    body: dict[str, Any] = kubernetes.response(
        review.uid, allowed, message, code=code, warnings=warnings
    )
    return JSONResponse(body)
