"""A measured peak binds, both ways.

A peak measured on the same configuration replaces the modeled one: one above the model raises
the judged peak to it, one under it lets a plan the model says does not fit run its canary,
and one over 95% of usable memory, or from a run that ran out of memory, refuses the plan. It
comes from the plan's evidence (an operator's measurement) or from a measured floor: every
governed run's peak per GPU and phase, kept with its configuration.

A floor's configuration is its key: the model's id and revision, a digest of the recipe's
fields that change memory (the model's shapes and the whole training section), and the plan's
GPU count; the GPU model is the one the GPU reported. A plan with the same key on the same GPU
model is judged against the highest of its floors (one from a run that ran out of memory
first); a plan of the same model that differs in recipe or hardware cites it as context only.
A plan without `model.id` keeps and cites nothing.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import date

from governor.domain.preflight.gpus import same_model
from governor.domain.preflight.plan import KbitMatmul, Mlp, Plan


@dataclass(frozen=True)
class FloorKey:
    """The configuration a floor was measured on, but for the GPU model."""

    model_id: str
    model_revision: str | None
    recipe: str  # recipe_digest
    gpus: int  # the plan's GPUs over all nodes

    def as_json(self) -> dict[str, object]:
        return asdict(self)


@dataclass(frozen=True)
class Floor:
    """One run's peak on one GPU in one phase, with the configuration it ran."""

    key: FloorKey
    gpu_type: str  # as the GPU reported it
    run_id: str
    phase: str
    peak_gib: float
    measured_on: date
    oom: bool  # the run ran out of memory

    def said(self) -> str:
        ran = ", a run that ran out of memory" if self.oom else ""
        return (
            f"measured {self.peak_gib:.1f} GiB ({self.phase}) on run {self.run_id}, "
            f"{self.measured_on.isoformat()}{ran}"
        )


@dataclass(frozen=True)
class Measured:
    """The measured peak a GPU group is judged against: the plan's evidence or a floor."""

    gib: float | None  # None: evidence of an out-of-memory run with no figure
    on: date
    oom: bool
    floor: Floor | None  # None: the plan's evidence

    def said(self) -> str:
        if self.floor is not None:
            return self.floor.said()
        figure = "a run that ran out of memory" if self.gib is None else f"{self.gib:.1f} GiB"
        ran = ", a run that ran out of memory" if self.oom and self.gib is not None else ""
        return f"measured {figure} in the plan's evidence, {self.on.isoformat()}{ran}"

    def as_json(self) -> dict[str, object]:
        f = self.floor
        return {
            "gib": None if self.gib is None else round(self.gib, 2),
            "on": self.on.isoformat(),
            "oom": self.oom,
            "source": "evidence" if f is None else "floor",
            **({} if f is None else {"run_id": f.run_id, "phase": f.phase, "gpu": f.gpu_type}),
        }


# Fields added after floors were first keyed: left out of the digest at their defaults, so a
# plan that does not set them keys the floors recorded before they existed.
LATER_DEFAULTS: dict[str, object] = {
    "intermediate_size": None,
    "kbit_matmul": KbitMatmul.NONE,
    "optimizer_impl": None,
    "gradient_accumulation_steps": None,
    "mlp": Mlp.STANDARD,
}


def recipe_digest(plan: Plan) -> str:
    """A stable digest of what changes memory besides the hardware: the model's shapes (not
    its id and revision, which the key holds) and every training field."""
    model = {k: v for k, v in asdict(plan.model).items() if k not in ("id", "revision")}
    sections = {"model": model, "training": asdict(plan.training)}
    for fields in sections.values():
        for name, default in LATER_DEFAULTS.items():
            if name in fields and fields[name] == default:
                del fields[name]
    text = json.dumps(sections, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def floor_key(plan: Plan) -> FloorKey | None:
    """The plan's configuration as a floor's key; None without `model.id`."""
    if plan.model.id is None:
        return None
    return FloorKey(plan.model.id, plan.model.revision, recipe_digest(plan), plan.hardware.gpus)


def binding(floors: Sequence[Floor], key: FloorKey | None, gpu_type: str) -> Measured | None:
    """The floor a GPU group of the plan keyed `key` is judged against: of the floors of the
    same configuration on the same GPU model, one from a run that ran out of memory, else the
    highest; None if there is none."""
    same = [f for f in floors if f.key == key and same_model(f.gpu_type, gpu_type)]
    if not same:
        return None
    top = max(same, key=lambda f: (f.oom, f.peak_gib))
    return Measured(top.peak_gib, top.measured_on, top.oom, top)


def context(floors: Sequence[Floor], key: FloorKey | None, gpu_types: Sequence[str]) -> list[Floor]:
    """The floors of the same model and revision that judge none of the plan's GPU groups (a
    different recipe, GPU count or GPU model), the highest of each configuration first."""
    if key is None:
        return []
    other = [
        f
        for f in floors
        if (f.key.model_id, f.key.model_revision) == (key.model_id, key.model_revision)
        and not (f.key == key and any(same_model(f.gpu_type, g) for g in gpu_types))
    ]
    tops: dict[tuple[FloorKey, str], Floor] = {}
    for f in sorted(other, key=lambda f: (f.oom, f.peak_gib), reverse=True):
        tops.setdefault((f.key, f.gpu_type), f)
    return list(tops.values())
