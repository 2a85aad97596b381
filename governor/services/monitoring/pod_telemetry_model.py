"""A pod's telemetry as it is read: the newest sample of each GPU it reports (a neighbour's
on a shared machine marked so), the GPUs it lost, and why it has none."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy.orm import Session

from governor.db.tables import PodRow
from governor.domain.telemetry import GpuProcess, owns
from governor.services.monitoring import telemetry


@dataclass(frozen=True)
class Gpu:
    uuid: str
    index: int
    name: str
    at: datetime
    utilization_pct: float | None
    utilization_max_pct: float | None
    memory_total_bytes: int | None
    memory_used_bytes: int | None
    memory_free_bytes: int | None
    power_w: float | None
    temperature_c: float | None
    processes: tuple[GpuProcess, ...] | None
    clock_event_reasons: int | None
    own: bool = field(
        default=True,
        metadata={
            "doc": "one of the pod's own GPUs (the rules judge these); false: a neighbour's, "
            "shown as context",
            "required": False,
        },
    )


@dataclass(frozen=True)
class PodTelemetry:
    note: str | None = field(metadata={"doc": "why there is no telemetry, e.g. no NVML"})
    lost_gpus: tuple[str, ...]
    gpus: tuple[Gpu, ...]


def pod_telemetry(session: Session, pod: PodRow) -> PodTelemetry:
    gpus = tuple(
        Gpu(at=at, own=owns(pod.gpu_uuids, sample.uuid), **vars(sample))
        for at, sample in telemetry.latest(session, pod.id)
    )
    return PodTelemetry(note=pod.telemetry_note, lost_gpus=tuple(pod.lost_gpus or ()), gpus=gpus)
