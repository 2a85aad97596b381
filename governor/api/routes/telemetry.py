from __future__ import annotations

from typing import Annotated

from fastapi import Path

from governor.api.deps import AgentOfNode, AgentOfPod, Now, Tx
from governor.api.route import api_router
from governor.api.schemas import (
    NodeTelemetryAccepted,
    ReadingIn,
    TelemetryAccepted,
    TelemetryIn,
)
from governor.db import repository as repo
from governor.domain.telemetry import (
    DeviceProblem,
    GpuProcess,
    GpuSample,
    ProcessClaim,
    Reading,
)
from governor.services.monitoring import telemetry

router = api_router(tags=["telemetry"])


def _reading(body: ReadingIn) -> Reading:
    return Reading(
        at=body.at,
        gpus=tuple(
            GpuSample(
                **g.model_dump(exclude={"processes"}),
                processes=(
                    None
                    if g.processes is None
                    else tuple(GpuProcess(**p.model_dump()) for p in g.processes)
                ),
            )
            for g in body.gpus
        ),
        problems=tuple(DeviceProblem(**p.model_dump()) for p in body.problems),
        available=body.available,
        unavailable_reason=body.unavailable_reason,
        driver_version=body.driver_version,
    )


@router.post("/v1/pods/{pod_id}/telemetry", status_code=202)
def report(pod_id: str, body: TelemetryIn, _: AgentOfPod, tx: Tx, now: Now) -> TelemetryAccepted:
    """A batch of GPU readings from the pod's agent (oldest first; a backlog is fine)."""
    readings = [_reading(r) for r in body.readings]
    with tx() as session:
        pod = repo.get_pod(session, pod_id)
        if body.gpu_uuids is not None:
            telemetry.claim(session, pod, body.gpu_uuids, now)
        claim = ProcessClaim.of(body.process_pids, body.process_pattern)
        if claim is not None:
            telemetry.claim_processes(session, pod, claim, now)
        count = telemetry.ingest(session, pod, readings, now)
    return TelemetryAccepted(readings=len(readings), samples=count)


@router.post("/v1/nodes/{node}/telemetry", status_code=202)
def report_node(
    node: Annotated[str, Path(max_length=253)],
    body: TelemetryIn,
    _: AgentOfNode,
    tx: Tx,
    now: Now,
) -> NodeTelemetryAccepted:
    """A batch of GPU readings from a machine's node agent, for every pod running there.

    A machine with no governed pod right now is no error: the readings are dropped."""
    readings = [_reading(r) for r in body.readings]
    with tx() as session:
        counts = telemetry.ingest_node(session, node, readings, now)
    return NodeTelemetryAccepted(
        readings=len(readings), samples=sum(counts.values()), pods=list(counts)
    )
