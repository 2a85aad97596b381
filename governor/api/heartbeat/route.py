"""The heartbeat's route: a beat checks in and is answered with its run's directive."""

from __future__ import annotations

from collections.abc import Sequence

from fastapi import Response

from governor.api.deps import Context, HeartbeatWriter, Transaction
from governor.api.error_responses import errors
from governor.api.heartbeat.lean import lean_route
from governor.api.route import api_router
from governor.api.schemas import DirectiveOut, HeartbeatIn
from governor.services.context import DatabaseRefused, ServiceContext
from governor.services.jobs import checkins

router = api_router(tags=["runs"])


def heartbeat(run_id: str, body: HeartbeatIn, _: HeartbeatWriter, ctx: Context) -> Response:
    """Check in. The answer says continue, checkpoint, or stop (with a deadline)."""
    # Reached by a beat its group did not answer (not a plain beat), and by a request that
    # FastAPI itself read: either takes the full path.
    # The clock and the transaction are taken from the context here rather than as
    # dependencies: each dependency costs every beat a round of FastAPI's resolution.
    with Transaction(ctx).watched():
        directive = checkins.check_in_fully(
            ctx.sessions, ctx.config, run_id, _beat(body), ctx.clock.now()
        )
    return _answer(directive)


def heartbeats(
    beats: Sequence[tuple[str, HeartbeatIn]], ctx: ServiceContext
) -> list[Response | Exception | None]:
    """Well-formed beats, queued while the previous group was taken, taken together: the plain
    ones are answered here (their run read together, their writes committed together), the
    others by `heartbeat` (None)."""
    tx = Transaction(ctx)
    with tx.watched():
        answers = checkins.check_in_group(
            ctx.sessions, [(run_id, _beat(body)) for run_id, body in beats], ctx.clock.now()
        )
    refused = next((a for a in answers if isinstance(a, DatabaseRefused)), None)
    if refused is not None:
        tx.refused(refused)
    return [_answer(a) if isinstance(a, checkins.Directive) else a for a in answers]


def _beat(body: HeartbeatIn) -> checkins.Heartbeat:
    return checkins.Heartbeat(
        step=body.step,
        total_steps=body.total_steps,
        phase=body.phase,
        status=body.status,
        checkpoint=(
            None
            if body.checkpoint is None
            else checkins.Checkpoint(body.checkpoint.step, body.checkpoint.path)
        ),
        metrics=body.metrics,
    )


def _answer(directive: checkins.Directive) -> Response:
    # Built and serialised once: returned as the read model, it would be validated (in a
    # second worker thread) and then serialised; response_model keeps its OpenAPI entry.
    answer = DirectiveOut.model_validate(directive).model_dump_json()
    return Response(answer, media_type="application/json")


# The first route after the probes: the busiest route is matched first;
# a well-formed beat is served without FastAPI's per-request work, in groups (LeanRoute).
router.add_api_route(
    "/v1/runs/{run_id}/heartbeat",
    heartbeat,
    methods=["POST"],
    response_model=DirectiveOut,
    responses=errors(409),
    route_class_override=lean_route(HeartbeatWriter, heartbeats),
)
