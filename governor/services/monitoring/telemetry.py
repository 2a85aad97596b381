"""GPU telemetry: store readings, keep the peaks per run, fold old samples, and show the rules
what each GPU has been doing."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, replace
from datetime import datetime, timedelta
from statistics import fmean
from typing import Any, Protocol

from sqlalchemy import JSON, ColumnElement, case, null, select, type_coerce
from sqlalchemy.orm import Session

from governor.db import repository as repo
from governor.db.one_of import one_of
from governor.db.tables import (
    GpuPeakRow,
    GpuSampleRow,
    MeasuredFloorRow,
    PlanCheckRow,
    PodRow,
    RunRow,
)
from governor.domain.memory_outlook import MemoryTrack, Projection, observe, project
from governor.domain.model import Category, Severity
from governor.domain.policy import HELD_MEMORY_BYTES, GpuView, Watch
from governor.domain.telemetry import (
    GpuProcess,
    GpuSample,
    ProcessClaim,
    Reading,
    hosts,
    idle_since,
    own_part,
    owns,
)
from governor.services import events
from governor.services.context import ServiceContext
from governor.services.monitoring import minutes
from governor.services.monitoring.minutes import MINUTE, RAW

FRESH_FOR_S = 120.0  # a GPU not heard from for longer says nothing about now


def ingest_node(
    session: Session, node: str, readings: Sequence[Reading], now: datetime
) -> dict[str, int]:
    """A node agent's batch: stored for every pod running on that machine (pod id -> samples).

    A pod that owns GPUs by UUID gets those alone; one that names none gets all of the
    machine's, as a `local` pod gets its server's."""
    return {
        pod.id: ingest(session, pod, [_own(r, pod.gpu_uuids) for r in readings], now)
        for pod in repo.pods_on_node(session, node)
    }


def _own(reading: Reading, gpu_uuids: Sequence[str] | None) -> Reading:
    """The part of a machine's reading that is the pod's: its own GPUs and their problems."""
    if gpu_uuids is None:
        return reading
    return replace(
        reading,
        gpus=tuple(g for g in reading.gpus if owns(gpu_uuids, g.uuid)),
        problems=tuple(p for p in reading.problems if p.uuid is None or owns(gpu_uuids, p.uuid)),
    )


def claim(session: Session, pod: PodRow, gpu_uuids: Sequence[str], now: datetime) -> None:
    """The pod's agent names the GPUs that are the pod's: kept, with an event when it changes."""
    if pod.gpu_uuids == list(gpu_uuids):
        return
    before, pod.gpu_uuids = pod.gpu_uuids, list(gpu_uuids)
    events.record(
        session,
        now,
        Severity.INFO,
        Category.TELEMETRY,
        f"pod:{pod.id}",
        f"The pod's own GPUs are now {', '.join(gpu_uuids)}: the rules judge these alone.",
        budget_id=pod.budget_id,
        evidence={"from": before, "to": list(gpu_uuids)},
        routine=True,
    )


def claim_processes(session: Session, pod: PodRow, claim: ProcessClaim, now: datetime) -> None:
    """The pod's agent names the processes that are the pod's: kept, with an event when that
    changes."""
    if claim_of(pod) == claim:
        return
    before = {"pids": pod.process_pids, "pattern": pod.process_pattern}
    pod.process_pids, pod.process_pattern = list(claim.pids) or None, claim.pattern
    named = [f"PIDs {', '.join(map(str, claim.pids))}"] if claim.pids else []
    named += [f"those named {claim.pattern}"] if claim.pattern else []
    events.record(
        session,
        now,
        Severity.INFO,
        Category.TELEMETRY,
        f"pod:{pod.id}",
        f"The pod's own processes are now {' and '.join(named)}: the GPU rules judge the "
        "memory they hold.",
        budget_id=pod.budget_id,
        evidence={"from": before, "to": {"pids": list(claim.pids), "pattern": claim.pattern}},
        routine=True,
    )


class OwnGpus(Protocol):
    """What the GPU rules read of a pod, a row or an enforcement pass's record: which GPUs
    and which processes on them are its own."""

    @property
    def id(self) -> str: ...
    @property
    def gpu_uuids(self) -> list[str] | None: ...
    @property
    def process_pids(self) -> list[int] | None: ...
    @property
    def process_pattern(self) -> str | None: ...


def claim_of(pod: OwnGpus) -> ProcessClaim | None:
    """The processes a pod names as its own; None: every process on its GPUs."""
    return ProcessClaim.of(pod.process_pids, pod.process_pattern)


def ingest(session: Session, pod: PodRow, readings: Iterable[Reading], now: datetime) -> int:
    """Store a batch of readings for `pod`, oldest first. Returns how many GPU samples it held.

    Readings for a pod that is no longer running are not kept (they would show a stopped pod
    as busy): the pod's telemetry note says so, once, with an event (not_kept)."""
    refused = not_kept(pod)
    if refused is not None:
        _note(session, pod, refused, now, said=f"GPU {refused}.")
        return 0
    count = 0
    live_runs = [r for r in repo.runs_on_pod(session, pod.id) if r.status.is_live]
    claim = claim_of(pod)
    peaks = {(p.run_id, p.gpu_uuid): p for p in repo.peaks_of(session, [r.id for r in live_runs])}
    for reading in sorted(readings, key=lambda r: r.at):
        at = min(reading.at, now)  # a clock ahead of ours must not write the future
        _note_availability(session, pod, reading, at)
        _note_problems(session, pod, reading, at)
        _check_hardware(session, pod, reading, at)
        for gpu in reading.gpus:
            session.add(_row(pod.id, at, gpu))
            count += 1
            if not owns(pod.gpu_uuids, gpu.uuid) or not hosts(gpu, claim):
                continue  # a neighbour's GPU: shown as context, no peak of the pod's runs
            for run in live_runs:  # what the pod's own processes hold, where it names them
                _raise_peak(session, peaks, run, own_part(gpu, claim), at)
    if count:
        _keep_floors(session, pod, peaks.values(), now)
    return count


def _keep_floors(session: Session, pod: PodRow, peaks: Iterable[GpuPeakRow], now: datetime) -> None:
    """Each peak per GPU and phase of the pod's runs, kept as a measured floor under its plan's
    configuration, where the plan names its model (domain.preflight.measured)."""
    plan = None if pod.plan_id is None else session.get(PlanCheckRow, pod.plan_id)
    key = None if plan is None else plan.floor_key
    if plan is None or key is None:
        return
    tracked = [p for p in peaks if p.track is not None]
    kept = {
        (f.run_id, f.gpu_uuid, f.phase): f
        for f in repo.floors_of_runs(session, sorted({p.run_id for p in tracked}))
    }
    for peak in tracked:
        for phase, used in MemoryTrack.from_json(peak.track or {}).peaks.items():
            floor = kept.get((peak.run_id, peak.gpu_uuid, phase))
            if floor is None:
                session.add(
                    MeasuredFloorRow(
                        run_id=peak.run_id,
                        gpu_uuid=peak.gpu_uuid,
                        phase=phase,
                        plan_id=plan.id,
                        model_id=key["model_id"],
                        model_revision=key["model_revision"],
                        recipe=key["recipe"],
                        gpu_name=peak.gpu_name,
                        gpu_count=key["gpus"],
                        peak_used_bytes=used,
                        at=now,
                    )
                )
            elif used > floor.peak_used_bytes:
                floor.peak_used_bytes, floor.at = used, now


def not_kept(pod: PodRow) -> str | None:
    """Why the pod's readings are not kept, and what to do; None: they are."""
    if pod.state.bills_compute:
        return None
    return (
        f"readings arrive for a {pod.state.value} pod and are not kept: stop its agent, or "
        "resume the pod to run it again"
    )


def _row(pod_id: str, at: datetime, gpu: GpuSample) -> GpuSampleRow:
    return GpuSampleRow(
        pod_id=pod_id,
        gpu_uuid=gpu.uuid,
        gpu_index=gpu.index,
        name=gpu.name,
        at=at,
        resolution=RAW,
        utilization_pct=gpu.utilization_pct,
        utilization_max_pct=gpu.utilization_max_pct,
        memory_total_bytes=gpu.memory_total_bytes,
        memory_used_bytes=gpu.memory_used_bytes,
        memory_free_bytes=gpu.memory_free_bytes,
        power_w=gpu.power_w,
        temperature_c=gpu.temperature_c,
        processes=None if gpu.processes is None else [asdict(p) for p in gpu.processes],
        clock_event_reasons=gpu.clock_event_reasons,
    )


def sample_of(row: GpuSampleRow) -> GpuSample:
    return GpuSample(
        uuid=row.gpu_uuid,
        index=row.gpu_index,
        name=row.name,
        utilization_pct=row.utilization_pct,
        utilization_max_pct=row.utilization_max_pct,
        memory_total_bytes=row.memory_total_bytes,
        memory_used_bytes=row.memory_used_bytes,
        memory_free_bytes=row.memory_free_bytes,
        power_w=row.power_w,
        temperature_c=row.temperature_c,
        processes=(
            None if row.processes is None else tuple(GpuProcess(**p) for p in row.processes)
        ),
        clock_event_reasons=row.clock_event_reasons,
    )


def _raise_peak(
    session: Session,
    peaks: dict[tuple[str, str], GpuPeakRow],
    run: RunRow,
    gpu: GpuSample,
    at: datetime,
) -> None:
    if gpu.memory_used_bytes is None:
        return
    peak = peaks.get((run.id, gpu.uuid))
    if peak is None:
        peak = GpuPeakRow(
            run_id=run.id,
            gpu_uuid=gpu.uuid,
            gpu_name=gpu.name,
            peak_used_bytes=gpu.memory_used_bytes,
            memory_total_bytes=gpu.memory_total_bytes,
            at=at,
        )
        session.add(peak)
        peaks[(run.id, gpu.uuid)] = peak
    elif gpu.memory_used_bytes > peak.peak_used_bytes:
        peak.peak_used_bytes, peak.at = gpu.memory_used_bytes, at
    _track(peak, run, gpu.memory_used_bytes, gpu)


def _track(peak: GpuPeakRow, run: RunRow, used: int, gpu: GpuSample) -> None:
    """The GPU's memory over the run, per phase, beside its peak: an out-of-memory seen
    coming (`domain.memory_outlook`)."""
    free, total = gpu.memory_free_bytes, gpu.memory_total_bytes
    capacity = used + free if free is not None else total
    if capacity is None:
        return
    before = None if peak.track is None else MemoryTrack.from_json(peak.track)
    peak.track = observe(before, used, capacity, run.phase, run.step).as_json()


def projections(session: Session, steps_to_save: dict[str, float | None]) -> dict[str, Projection]:
    """For each run of `steps_to_save` (the steps it takes in the time it is given to save;
    None: unknown), the GPU whose next memory event comes closest to its card, from the memory
    tracked as telemetry came in."""
    found: dict[str, Projection] = {}
    for peak in repo.peaks_of(session, list(steps_to_save)) if steps_to_save else ():
        if peak.track is None:
            continue
        track = MemoryTrack.from_json(peak.track)
        seen = project(peak.gpu_uuid, track, steps_to_save.get(peak.run_id))
        kept = found.get(peak.run_id)
        if kept is None or seen.projected - seen.capacity > kept.projected - kept.capacity:
            found[peak.run_id] = seen
    return found


def _note_availability(session: Session, pod: PodRow, reading: Reading, at: datetime) -> None:
    note = None if reading.available else (reading.unavailable_reason or "no NVML")
    _note(session, pod, note, at)


def _note(
    session: Session, pod: PodRow, note: str | None, at: datetime, *, said: str | None = None
) -> None:
    """What is wrong with the pod's telemetry, if anything; an event when that changes, its
    message `said`, or by default the note as telemetry unavailable."""
    if note == pod.telemetry_note:
        return
    pod.telemetry_note = note
    if said is None:
        said = f"GPU telemetry unavailable: {note}" if note else "GPU telemetry is available again."
    events.record(
        session,
        at,
        Severity.WARNING if note else Severity.INFO,
        Category.TELEMETRY,
        f"pod:{pod.id}",
        said,
        budget_id=pod.budget_id,
        evidence={"reason": note},
        routine=True,
    )


def _check_hardware(session: Session, pod: PodRow, reading: Reading, at: datetime) -> None:
    """GPUs that are not what the pod was registered with: a warning with both, once."""
    own = [g for g in reading.gpus if owns(pod.gpu_uuids, g.uuid)]
    if pod.hardware_warned or not own:
        return
    seen = sorted({g.name for g in own})
    wrong_type = pod.gpu_type is not None and not all(
        _model(pod.gpu_type) in _squeezed(name) for name in seen
    )
    wrong_count = pod.gpu_count is not None and len(own) != pod.gpu_count
    if not (wrong_type or wrong_count):
        return
    pod.hardware_warned = True
    declared = f"{pod.gpu_count or '?'} x {pod.gpu_type or '?'}"
    events.record(
        session,
        at,
        Severity.WARNING,
        Category.TELEMETRY,
        f"pod:{pod.id}",
        f"The pod was registered with {declared} GPUs, but its telemetry shows "
        f"{len(own)} x {', '.join(seen)}: its rate and memory plan may be wrong.",
        budget_id=pod.budget_id,
        evidence={
            "declared": {"gpu_type": pod.gpu_type, "gpu_count": pod.gpu_count},
            "seen": {"names": seen, "count": len(own)},
        },
    )


def _model(declared: str) -> str:
    """The model in a declared GPU type: "A100-80GB" is "a100", "RTX PRO 6000" "rtxpro6000"."""
    tokens = re.findall(r"[a-z0-9]+", declared.lower())
    coded = [t for t in tokens if re.fullmatch(r"[a-z]+\d+[a-z]*", t)]
    return coded[0] if coded else "".join(tokens)


def _squeezed(name: str) -> str:
    """A GPU's name as NVML gives it, lowercase letters and digits only."""
    return "".join(re.findall(r"[a-z0-9]+", name.lower()))


def _note_problems(session: Session, pod: PodRow, reading: Reading, at: datetime) -> None:
    lost_before = set(pod.lost_gpus or [])
    lost_now = {p.uuid or f"index {p.index}" for p in reading.problems if p.lost}
    for problem in reading.problems:
        key = problem.uuid or f"index {problem.index}"
        if problem.lost and key in lost_before:
            continue
        events.record(
            session,
            at,
            Severity.CRITICAL if problem.lost else Severity.WARNING,
            Category.TELEMETRY,
            f"pod:{pod.id}",
            f"GPU {problem.index} ({key}) "
            + ("is lost: " if problem.lost else "could not be read: ")
            + f"{problem.error}. The other GPUs are still watched.",
            budget_id=pod.budget_id,
            evidence={"index": problem.index, "uuid": problem.uuid, "error": problem.error},
        )
    back = {g.uuid for g in reading.gpus} & lost_before
    for uuid in sorted(back):
        events.record(
            session,
            at,
            Severity.INFO,
            Category.TELEMETRY,
            f"pod:{pod.id}",
            f"GPU {uuid} answers again.",
            budget_id=pod.budget_id,
            evidence={"uuid": uuid},
            routine=True,
        )
    still_lost = (lost_before - back) | lost_now
    if still_lost != lost_before:
        pod.lost_gpus = sorted(still_lost)


def gpu_views(session: Session, pod_id: str, now: datetime, watch: Watch) -> tuple[GpuView, ...]:
    """What each of the pod's own GPUs has been doing over the idle window."""
    pod = repo.get_pod(session, pod_id)
    samples = recent_samples(session, [pod], now - lookback(watch))
    return views(samples.get(pod_id, {}), now, watch, pod)


def lookback(watch: Watch) -> timedelta:
    """How far back the rules look at a GPU: the idle window, and a fresh sample before it."""
    return timedelta(seconds=watch.idle_window_s + FRESH_FOR_S)


Samples = dict[str, list[tuple[datetime, GpuSample]]]  # GPU uuid -> samples, newest first


def recent_samples(
    session: Session, pods: Sequence[OwnGpus], since: datetime
) -> dict[str, Samples]:
    """The raw samples of every GPU of these pods since `since`, in one query; their process
    lists only for the pods that name their processes (no one else's rules read them)."""
    found: dict[str, Samples] = defaultdict(lambda: defaultdict(list))
    if not pods:
        return found
    claimed = [pod.id for pod in pods if claim_of(pod) is not None]
    listed: ColumnElement[Any] = null()
    if claimed:
        listed = case(
            (one_of(GpuSampleRow.pod_id, "claimed"), GpuSampleRow.processes), else_=null()
        )
    query = (
        select(GpuSampleRow.pod_id, GpuSampleRow.at, type_coerce(listed, JSON), *_SAMPLE_COLUMNS)
        .where(
            one_of(GpuSampleRow.pod_id, "pod_ids"),
            GpuSampleRow.at >= since,
            GpuSampleRow.resolution == RAW,
        )
        .order_by(GpuSampleRow.at.desc(), GpuSampleRow.id.desc())
    )
    params = {"pod_ids": [pod.id for pod in pods], "claimed": claimed}
    # more columns than SQLAlchemy types a row of
    rows: Sequence[tuple[Any, ...]] = session.execute(query, params).all()
    for pod_id, at, processes, uuid, index, name, util, util_max, total, used, free, w, c in rows:
        held = None if processes is None else tuple(GpuProcess(**p) for p in processes)
        sample = GpuSample(uuid, index, name, util, util_max, total, used, free, w, c, held, None)
        found[pod_id][uuid].append((at, sample))
    return found


_SAMPLE_COLUMNS = (
    GpuSampleRow.gpu_uuid,
    GpuSampleRow.gpu_index,
    GpuSampleRow.name,
    GpuSampleRow.utilization_pct,
    GpuSampleRow.utilization_max_pct,
    GpuSampleRow.memory_total_bytes,
    GpuSampleRow.memory_used_bytes,
    GpuSampleRow.memory_free_bytes,
    GpuSampleRow.power_w,
    GpuSampleRow.temperature_c,
)


def views(samples: Samples, now: datetime, watch: Watch, pod: OwnGpus) -> tuple[GpuView, ...]:
    """Each of the pod's own GPUs (its `gpu_uuids`; all when None) as the rules see it: fresh
    or not, idle since when, what it holds. A neighbour's GPU on a shared machine is not
    judged. Where the pod names its processes, a GPU none of them is on is not judged either,
    and a GPU holds what they hold."""
    since = now - lookback(watch)
    claim = claim_of(pod)
    found = []
    for uuid, every in sorted(samples.items()):
        if not owns(pod.gpu_uuids, uuid):
            continue
        recent = [(at, own_part(sample, claim)) for at, sample in every if at >= since]
        if not recent or not hosts(every[0][1], claim):
            continue
        latest_at, latest = recent[0]
        found.append(
            GpuView(
                uuid=uuid,
                fresh=(now - latest_at).total_seconds() <= FRESH_FOR_S,
                idle_since=idle_since(recent, watch.idle_util_pct, HELD_MEMORY_BYTES),
                held_bytes=latest.memory_used_bytes,
                free_ratio=latest.free_ratio,
            )
        )
    return tuple(found)


def latest(session: Session, pod_id: str) -> list[tuple[datetime, GpuSample]]:
    """The newest sample of each GPU of the pod."""
    rows = session.scalars(
        select(GpuSampleRow)
        .where(GpuSampleRow.pod_id == pod_id, GpuSampleRow.resolution == RAW)
        .order_by(GpuSampleRow.at.desc(), GpuSampleRow.id.desc())
        .limit(256)
    ).all()
    newest: dict[str, GpuSampleRow] = {}
    for row in rows:
        newest.setdefault(row.gpu_uuid, row)
    return [(r.at, sample_of(r)) for r in sorted(newest.values(), key=lambda r: r.gpu_index)]


def fold(session: Session, now: datetime, raw_keep_s: float, minute_keep_s: float) -> int:
    """Fold raw samples older than `raw_keep_s` into one row per GPU-minute; drop minute rows
    older than `minute_keep_s`. Storage stays bounded by the number of GPUs, not by uptime."""
    return minutes.fold(
        session,
        GpuSampleRow,
        lambda row: (row.pod_id, row.gpu_uuid),
        lambda series, minute, rows: _folded(series[0], minute, rows),
        now,
        raw_keep_s,
        minute_keep_s,
    )


def _folded(pod_id: str, minute: datetime, rows: Sequence[GpuSampleRow]) -> GpuSampleRow:
    def values(name: str) -> list[float]:
        return [v for v in (getattr(r, name) for r in rows) if v is not None]

    def mean(name: str) -> float | None:
        found = values(name)
        return fmean(found) if found else None

    def most(name: str) -> float | None:
        found = values(name)
        return max(found) if found else None

    def least(name: str) -> float | None:
        found = values(name)
        return min(found) if found else None

    last = rows[-1]
    used, free = most("memory_used_bytes"), least("memory_free_bytes")
    return GpuSampleRow(
        pod_id=pod_id,
        gpu_uuid=last.gpu_uuid,
        gpu_index=last.gpu_index,
        name=last.name,
        at=minute,
        resolution=MINUTE,
        utilization_pct=mean("utilization_pct"),
        utilization_max_pct=most("utilization_max_pct"),
        memory_total_bytes=last.memory_total_bytes,
        memory_used_bytes=None if used is None else int(used),
        memory_free_bytes=None if free is None else int(free),
        power_w=mean("power_w"),
        temperature_c=most("temperature_c"),
        processes=last.processes,
        clock_event_reasons=last.clock_event_reasons,
    )


def sample_local(ctx: ServiceContext) -> None:
    """Read this machine's GPUs for the pods registered as local (none: no reading at all)."""
    if ctx.telemetry is None:
        return
    with ctx.unit_of_work() as session:
        pod_ids = [p.id for p in repo.local_pods(session)]
    if not pod_ids:
        return
    reading = ctx.telemetry.read()
    with ctx.unit_of_work() as session:
        for pod_id in pod_ids:
            ingest(session, repo.get_pod(session, pod_id), [reading], ctx.clock.now())
