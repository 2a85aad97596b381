"""An agent's batch of GPU readings, for its pod or for every pod on its machine, taken in and
answered with how much was."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy.orm import Session

from governor.db import repository as repo
from governor.domain.telemetry import ProcessClaim, Reading
from governor.services.monitoring import telemetry


@dataclass(frozen=True)
class Accepted:
    readings: int
    samples: int


@dataclass(frozen=True)
class PodAccepted(Accepted):
    not_kept: str | None = field(
        metadata={
            "doc": "why none of the readings were kept and what to do (the pod is not "
            "running: stop its agent, or resume the pod); null: they were"
        }
    )


@dataclass(frozen=True)
class NodeAccepted(Accepted):
    pods: tuple[str, ...] = field(
        metadata={"doc": "the pods running on the node, which got the readings"}
    )


def report(
    session: Session,
    pod_id: str,
    readings: Sequence[Reading],
    gpu_uuids: Sequence[str] | None,
    claim: ProcessClaim | None,
    now: datetime,
) -> PodAccepted:
    """A pod agent's readings, with the GPUs and processes it names as the pod's, if it does;
    for a pod that is not running, none is kept, and the answer says why."""
    pod = repo.get_pod(session, pod_id)
    if gpu_uuids is not None:
        telemetry.claim(session, pod, gpu_uuids, now)
    if claim is not None:
        telemetry.claim_processes(session, pod, claim, now)
    samples = telemetry.ingest(session, pod, readings, now)
    return PodAccepted(len(readings), samples, telemetry.not_kept(pod))


def report_node(
    session: Session, node: str, readings: Sequence[Reading], now: datetime
) -> NodeAccepted:
    """A node agent's readings, for every pod running on its machine (none: dropped)."""
    counts = telemetry.ingest_node(session, node, readings, now)
    return NodeAccepted(len(readings), sum(counts.values()), tuple(counts))
