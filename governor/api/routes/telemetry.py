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
from governor.domain.telemetry import (
    DeviceProblem,
    GpuProcess,
    GpuSample,
    ProcessClaim,
    Reading,
)
from governor.services.monitoring import agent_reports
from governor.services.monitoring.agent_reports import NodeAccepted, PodAccepted

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


@router.post("/v1/pods/{pod_id}/telemetry", status_code=202, response_model=TelemetryAccepted)
def report(pod_id: str, body: TelemetryIn, _: AgentOfPod, tx: Tx, now: Now) -> PodAccepted:
    """A batch of GPU readings from the pod's agent (oldest first; a backlog is fine). A pod
    that is not running keeps none: `not_kept` says so, and what to do."""
    readings = [_reading(r) for r in body.readings]
    claim = ProcessClaim.of(body.process_pids, body.process_pattern)
    with tx() as session:
        return agent_reports.report(session, pod_id, readings, body.gpu_uuids, claim, now)


@router.post("/v1/nodes/{node}/telemetry", status_code=202, response_model=NodeTelemetryAccepted)
def report_node(
    node: Annotated[str, Path(max_length=253)],
    body: TelemetryIn,
    _: AgentOfNode,
    tx: Tx,
    now: Now,
) -> NodeAccepted:
    """A batch of GPU readings from a machine's node agent, for every pod running there.

    A machine with no governed pod right now is no error: the readings are dropped."""
    readings = [_reading(r) for r in body.readings]
    with tx() as session:
        return agent_reports.report_node(session, node, readings, now)
