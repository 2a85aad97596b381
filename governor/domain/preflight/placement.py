"""Placement on measured memory: which of a pod's GPUs have room for the plan's per-GPU peak.

A GPU shared with other services has less free than its card's usable memory, so a plan that
fits the card can still not fit the GPU. Given each GPU's free memory as its latest sample
says, the plan fits where free memory covers the modeled per-GPU peak; the plan needs as many
such GPUs as it declares.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from governor.domain.preflight.rules import Finding, Verdict
from governor.domain.telemetry import GIB


@dataclass(frozen=True)
class FreeGpu:
    """One GPU of the pod and what its latest sample says is free."""

    uuid: str
    index: int
    name: str
    free_bytes: int | None  # None: the GPU does not report it
    at: datetime


def placement(modeled_gib: float, gpus_needed: int, gpus: Sequence[FreeGpu]) -> Finding:
    """`go` naming the GPUs that fit (and by how much) when enough of them do, `no_go` with
    each GPU's shortfall otherwise."""
    rows = []
    for gpu in gpus:
        free = None if gpu.free_bytes is None else gpu.free_bytes / GIB
        rows.append(
            {
                "uuid": gpu.uuid,
                "index": gpu.index,
                "name": gpu.name,
                "free_gib": None if free is None else round(free, 2),
                "fits": free is not None and free >= modeled_gib,
                "margin_gib": None if free is None else round(free - modeled_gib, 2),
                "sampled_at": gpu.at.isoformat(),
            }
        )
    fitting = [r for r in rows if r["fits"]]
    evidence: dict[str, object] = {
        "modeled_gib": round(modeled_gib, 2),
        "gpus_needed": gpus_needed,
        "gpus": rows,
    }
    if not rows:
        return Finding(
            "placement",
            Verdict.NO_GO,
            "The pod has no GPU telemetry yet: its free memory cannot be checked.",
            evidence,
        )
    said = ", ".join(
        f"GPU {r['index']} {r['uuid']} "
        + ("(free unknown)" if r["free_gib"] is None else f"({r['free_gib']:.1f} GiB free)")
        for r in (fitting or rows)
    )
    if len(fitting) >= gpus_needed:
        return Finding(
            "placement",
            Verdict.GO,
            f"{len(fitting)} of the pod's {len(rows)} GPUs have room for the modeled "
            f"{modeled_gib:.1f} GiB per GPU: {said}.",
            evidence,
        )
    return Finding(
        "placement",
        Verdict.NO_GO,
        f"Only {len(fitting)} of the pod's {len(rows)} GPUs have room for the modeled "
        f"{modeled_gib:.1f} GiB per GPU, and the plan needs {gpus_needed}: {said}.",
        evidence,
    )
