"""What the governor knows about a pod's GPUs: one reading per poll, per GPU, unknowns as None."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from fnmatch import fnmatchcase
from posixpath import basename
from typing import Protocol

GIB = 1024**3


@dataclass(frozen=True)
class GpuProcess:
    pid: int
    used_memory_bytes: int | None  # None: the driver cannot say (WDDM, MIG, containers)
    name: str | None = field(  # usually the executable's path
        default=None, metadata={"doc": "as NVML names it; null: unknown", "required": False}
    )


@dataclass(frozen=True)
class GpuSample:
    """One GPU at one poll. Every metric the GPU or driver does not support is None."""

    uuid: str
    index: int
    name: str
    utilization_pct: float | None  # mean over the driver's samples since the last poll
    utilization_max_pct: float | None  # the busiest of those samples
    memory_total_bytes: int | None
    memory_used_bytes: int | None
    memory_free_bytes: int | None
    power_w: float | None
    temperature_c: float | None
    processes: tuple[GpuProcess, ...] | None
    clock_event_reasons: int | None

    @property
    def free_ratio(self) -> float | None:
        if not self.memory_total_bytes or self.memory_free_bytes is None:
            return None
        return self.memory_free_bytes / self.memory_total_bytes


@dataclass(frozen=True)
class DeviceProblem:
    """A GPU that could not be read this poll (lost, or any NVML error on it)."""

    index: int
    uuid: str | None
    error: str
    lost: bool


@dataclass(frozen=True)
class Reading:
    """One poll of every GPU on a machine."""

    at: datetime
    gpus: tuple[GpuSample, ...] = ()
    problems: tuple[DeviceProblem, ...] = ()
    available: bool = True
    unavailable_reason: str | None = None
    driver_version: str | None = None


class TelemetrySource(Protocol):
    """Reads the GPUs. Never raises for a missing library, driver or GPU: it says so instead."""

    def read(self) -> Reading: ...

    def close(self) -> None: ...


def owns(gpu_uuids: Sequence[str] | None, uuid: str) -> bool:
    """Whether a GPU is one of a pod's own: every GPU is, for a pod that names none. By UUID,
    never by index (NVML's index order is not CUDA's)."""
    return gpu_uuids is None or uuid in gpu_uuids


def busy_pct(sample: GpuSample) -> float | None:
    """How busy a GPU was at its busiest since the previous poll."""
    if sample.utilization_max_pct is not None:
        return sample.utilization_max_pct
    return sample.utilization_pct


def idle_since(
    newest_first: Sequence[tuple[datetime, GpuSample]], idle_util_pct: float, min_held_bytes: int
) -> datetime | None:
    """Since when a GPU has sat below `idle_util_pct` while holding more than `min_held_bytes`.

    Walks back from the newest sample; None when the newest sample is not idle (or unknown).
    """
    since = None
    for at, sample in newest_first:
        busy = busy_pct(sample)
        held = sample.memory_used_bytes
        if busy is None or held is None or busy >= idle_util_pct or held <= min_held_bytes:
            break
        since = at
    return since


@dataclass(frozen=True)
class ProcessClaim:
    """The processes that are a pod's on a machine it shares: by PID and/or by a glob pattern
    (`*`, `?`, `[...]`) that matches a process's whole name or its last part (`python3*`
    matches `/usr/bin/python3.11`). A glob never backtracks for long, whoever wrote it."""

    pids: tuple[int, ...] = ()
    pattern: str | None = None

    @classmethod
    def of(cls, pids: Sequence[int] | None, pattern: str | None) -> ProcessClaim | None:
        """A pod's claim; None for a pod that names no processes."""
        if not pids and not pattern:
            return None
        return cls(tuple(pids or ()), pattern or None)

    def claims(self, process: GpuProcess) -> bool:
        if process.pid in self.pids:
            return True
        if not self.pattern or not process.name:
            return False
        name = process.name
        return fnmatchcase(name, self.pattern) or fnmatchcase(basename(name), self.pattern)


def hosts(sample: GpuSample, claim: ProcessClaim | None) -> bool:
    """Whether one of a pod's processes is on the GPU: always, for a pod that names none or
    where the driver cannot list the processes."""
    if claim is None or sample.processes is None:
        return True
    return any(claim.claims(p) for p in sample.processes)


def own_part(sample: GpuSample, claim: ProcessClaim | None) -> GpuSample:
    """A GPU as a pod that names its processes sees it: the memory its own processes hold
    (none when none of them is on it) stands for the GPU's. Unchanged for a pod that names
    none, or where the driver cannot list the processes or say what one of the pod's holds
    (the GPU's whole memory is then the best there is)."""
    if claim is None or sample.processes is None:
        return sample
    held = [p.used_memory_bytes for p in sample.processes if claim.claims(p)]
    if None in held:
        return sample
    return replace(sample, memory_used_bytes=sum(b for b in held if b is not None))
