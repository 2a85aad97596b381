"""Placement on measured memory: which of a pod's GPUs have room for the plan's per-GPU peak.

A GPU shared with other services has less free than its card's usable memory, so a plan that
fits the card can still not fit the GPU. Given each GPU's free memory as its latest sample
says, a GPU fits where its free memory covers the per-GPU peak of the plan's group of the same
GPU model (its name as the GPU reports it), judged as the verdict judges it: the modeled peak,
or its interval's upper edge where the family's measured error is over 10%, or a higher
measured peak of the same configuration. A GPU of a model the plan does not name is judged
against the plan's largest per-GPU peak, and may stand in for any group. The plan fits when
each group has as many fitting GPUs as it declares.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from governor.domain.preflight.gpus import same_model
from governor.domain.preflight.rules import Finding, GroupFit, Verdict
from governor.domain.telemetry import GIB


@dataclass(frozen=True)
class FreeGpu:
    """One GPU of the pod and what its latest sample says is free."""

    uuid: str
    index: int
    name: str
    free_bytes: int | None  # None: the GPU does not report it
    at: datetime


@dataclass(frozen=True)
class Need:
    """One GPU group of the plan, on one machine: its model, per-GPU peak and GPU count."""

    gpu_type: str
    modeled_gib: float
    gpus: int
    judged_gib: float | None = None  # what must fit where it is not the modeled peak
    basis: str = ""  # why: the interval's upper edge, or a measured peak

    @property
    def peak_gib(self) -> float:
        return self.modeled_gib if self.judged_gib is None else self.judged_gib

    @property
    def said(self) -> str:
        if self.judged_gib is None:
            return f"the modeled {self.modeled_gib:.1f} GiB per GPU"
        return f"{self.judged_gib:.1f} GiB per GPU ({self.basis})"


def need_of(fit: GroupFit) -> Need:
    """A group of the plan with the per-GPU peak its verdict's thresholds apply to."""
    group, modeled, judged = fit.group, fit.memory.modeled_gib, fit.judged_gib
    if round(judged, 2) <= round(modeled, 2):
        return Need(group.gpu_type, modeled, group.gpu_count)
    measured = fit.measured
    if measured is not None and measured.gib is not None and measured.gib >= judged:
        basis = f"measured on the same configuration; {modeled:.1f} GiB modeled"
    else:
        i = fit.interval
        basis = (
            f"the modeled {modeled:.1f} GiB's upper edge, ±{i.error:.0%} as {i.family} "
            "plans showed against published measurements"
        )
    return Need(group.gpu_type, modeled, group.gpu_count, judged, basis)


def placement(needs: Sequence[Need], gpus: Sequence[FreeGpu]) -> Finding:
    """`go` naming the GPUs that fit (and by how much) when each group has enough of them,
    `no_go` with each GPU's shortfall otherwise."""
    largest = max(needs, key=lambda n: n.peak_gib)
    rows = [
        _row(gpu, next((n for n in needs if same_model(n.gpu_type, gpu.name)), None), largest)
        for gpu in gpus
    ]
    fitting = [r for r in rows if r["fits"]]
    short = {
        n.gpu_type: max(0, n.gpus - sum(r["judged_as"] == n.gpu_type for r in fitting))
        for n in needs
    }
    spare = sum(r["judged_as"] is None for r in fitting)
    evidence: dict[str, object] = {
        "modeled_gib": round(largest.modeled_gib, 2),
        "judged_gib": round(largest.peak_gib, 2),
        "gpus_needed": sum(n.gpus for n in needs),
        "gpus": rows,
    }
    if not rows:
        return Finding(
            "placement",
            Verdict.NO_GO,
            "The pod has no GPU telemetry yet: its free memory cannot be checked.",
            evidence,
        )
    fits = sum(short.values()) <= spare
    head = f"{len(fitting)} of the pod's {len(rows)} GPUs have room for"
    if not fits:
        head = f"Only {head}"
    if len(needs) == 1:
        [need] = needs
        message = f"{head} {need.said}"
        if not fits:
            message += f", and the plan needs {need.gpus}"
        message += f": {_said(fitting or rows)}."
    else:
        groups = "; ".join(
            f"{n.gpus} x {n.gpu_type} at {n.peak_gib:.1f} GiB: "
            + _said([r for r in fitting if r["judged_as"] == n.gpu_type])
            + (f" ({short[n.gpu_type]} short)" if short[n.gpu_type] else "")
            for n in needs
        )
        others = [r for r in fitting if r["judged_as"] is None]
        message = f"{head} the per-GPU peak of their GPU model: {groups}"
        if others:
            at = largest.peak_gib
            message += f"; of models the plan does not name, at {at:.1f} GiB: {_said(others)}"
        message += "."
    return Finding("placement", Verdict.GO if fits else Verdict.NO_GO, message, evidence)


def _row(gpu: FreeGpu, need: Need | None, largest: Need) -> dict[str, Any]:
    free = None if gpu.free_bytes is None else gpu.free_bytes / GIB
    judged_by = largest if need is None else need
    return {
        "uuid": gpu.uuid,
        "index": gpu.index,
        "name": gpu.name,
        "judged_as": None if need is None else need.gpu_type,
        "modeled_gib": round(judged_by.modeled_gib, 2),
        "judged_gib": round(judged_by.peak_gib, 2),
        "free_gib": None if free is None else round(free, 2),
        "fits": free is not None and free >= judged_by.peak_gib,
        "margin_gib": None if free is None else round(free - judged_by.peak_gib, 2),
        "sampled_at": gpu.at.isoformat(),
    }


def _said(rows: Sequence[dict[str, Any]]) -> str:
    if not rows:
        return "none"
    return ", ".join(
        f"GPU {r['index']} {r['uuid']} "
        + ("(free unknown)" if r["free_gib"] is None else f"({r['free_gib']:.1f} GiB free)")
        for r in rows
    )
