"""An out-of-memory seen coming: each GPU's memory during a run, tracked per phase, and where
the next memory event would take it.

A track is kept per run and GPU from the telemetry as it comes in: the peak of each phase so
far, the level of the latest stepping sample (the level the next event starts from), its growth
per optimizer step (from the first sample after the optimizer state exists), and the largest
jump an event added over that level: an evaluation, a checkpoint save, or a long sample (a
stepping sample over the level and its growth). The projection is the level, plus its growth
over the steps until the next event (the interval the run's own events showed; without one,
the steps it takes in the time given to save), plus the largest jump: where that reaches what
the card can hold (the memory used plus the memory free), the next event would run out.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from governor.domain.model import Phase
from governor.domain.telemetry import GIB

EVENT_PHASES = (Phase.EVALUATION, Phase.CHECKPOINTING)  # a jump over the stepping level
BASE_STEP = 2  # optimizer state is allocated at the first step: growth counts from the second
STEPPING = "training"  # the phase a sample is kept under when the job names none
JUMPS = {"evaluation": "evaluation", "checkpointing": "checkpoint save", "sample": "long sample"}


@dataclass(frozen=True)
class MemoryTrack:
    """One GPU's memory during one run, as telemetry showed it (bytes)."""

    capacity: int  # what the card can hold for the job: used plus free, at the latest sample
    step: int  # the run's step at the latest sample
    phase: str  # the phase of the latest sample
    level: int  # the latest stepping sample
    peaks: dict[str, int] = field(default_factory=dict)  # the peak of each phase so far
    base_step: int | None = None  # the first stepping sample from BASE_STEP on, and its level
    base_level: int | None = None
    growth_per_step: float = 0.0
    jump: int = 0  # the largest jump over the level an event (or a long sample) added
    jump_at: str | None = None  # "evaluation", "checkpointing" or "sample"
    event_step: int | None = None  # the step at which the latest event began
    event_every: int | None = None  # the steps between the latest two events

    def as_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, stored: dict[str, Any]) -> MemoryTrack:
        return cls(**stored)


def observe(
    track: MemoryTrack | None, used: int, capacity: int, phase: Phase | None, step: int
) -> MemoryTrack:
    """The track with one more sample: `used` of `capacity` bytes, in `phase` at `step`."""
    name = STEPPING if phase is None else phase.value
    if track is None:
        track = MemoryTrack(capacity=capacity, step=step, phase=name, level=used)
    peaks = {**track.peaks, name: max(used, track.peaks.get(name, used))}
    moved = replace(track, capacity=capacity, step=step, phase=name, peaks=peaks)
    if phase in EVENT_PHASES:
        if track.phase != name:  # the event begins: its interval from the one before
            every = track.event_every
            if track.event_step is not None and step > track.event_step:
                every = step - track.event_step
            moved = replace(moved, event_step=step, event_every=every)
        return _jumped(moved, used - track.level, name)
    if phase not in (None, Phase.CANARY, Phase.TRAINING):
        return moved  # loading, compiling, export: not the training loop's memory
    grown = track.base_step is not None and track.step > track.base_step  # growth is known
    if grown and track.phase in (STEPPING, Phase.CANARY.value):
        expected = track.level + track.growth_per_step * max(0, step - track.step)
        moved = _jumped(moved, int(used - expected), "sample")
    if track.base_step is None or track.base_level is None:
        if step >= BASE_STEP:
            return replace(moved, level=used, base_step=step, base_level=used)
        return replace(moved, level=used)
    growth = track.growth_per_step
    if step > track.base_step:
        growth = max(0.0, (used - track.base_level) / (step - track.base_step))
    return replace(moved, level=used, growth_per_step=growth)


def _jumped(track: MemoryTrack, jump: float, at: str) -> MemoryTrack:
    if jump <= track.jump:
        return track
    return replace(track, jump=int(jump), jump_at=at)


@dataclass(frozen=True)
class Projection:
    """Where the next memory event would take one GPU."""

    gpu: str
    projected: int  # bytes
    capacity: int
    level: int
    step: int
    steps_ahead: int  # until the next event
    growth_per_step: float
    jump: int
    jump_at: str | None
    event_every: int | None

    @property
    def crosses(self) -> bool:
        return self.projected >= self.capacity

    @property
    def what(self) -> str:
        """The next event, in words."""
        named = {
            "evaluation": "evaluation",
            "checkpointing": "checkpoint save",
            "sample": "long sample",
        }
        return named.get(self.jump_at or "", "step")

    def said(self) -> str:
        """The projection's arithmetic, in words."""
        jump = f"{self.jump / GIB:.1f} GiB"
        if self.event_every is not None:
            when = f"the next {self.what} in {self.steps_ahead} steps (every {self.event_every})"
            when += f", with its jump of {jump},"
        else:
            when = f"the {self.steps_ahead} steps it takes to save"
            when += f", with the largest jump seen ({jump}, at a {self.what}),"
        return (
            f"GPU {self.gpu} holds {self.level / GIB:.1f} GiB at step {self.step}, growing "
            f"{self.growth_per_step / GIB:.3f} GiB per step; {when} would take it to "
            f"{self.projected / GIB:.1f} GiB, over the {self.capacity / GIB:.1f} GiB the card "
            "holds"
        )

    def evidence(self) -> dict[str, object]:
        return {
            "gpu": self.gpu,
            "projected_gib": round(self.projected / GIB, 2),
            "capacity_gib": round(self.capacity / GIB, 2),
            "level_gib": round(self.level / GIB, 2),
            "step": self.step,
            "steps_ahead": self.steps_ahead,
            "growth_gib_per_step": round(self.growth_per_step / GIB, 4),
            "jump_gib": round(self.jump / GIB, 2),
            "jump_at": self.jump_at,
            "event_every_steps": self.event_every,
        }


def project(gpu: str, track: MemoryTrack, steps_to_save: float | None) -> Projection:
    """Where the next event would take the GPU: the level, its growth over the steps until
    the next event, and the largest jump. Without an interval of its own events, the steps the
    run takes in the time it is given to save (`steps_to_save`; None: unknown, none)."""
    if track.event_every is not None and track.event_step is not None:
        ahead = max(0, track.event_step + track.event_every - track.step)
    else:
        ahead = 0 if steps_to_save is None else math.ceil(steps_to_save)
    projected = int(track.level + track.growth_per_step * ahead + track.jump)
    return Projection(
        gpu=gpu,
        projected=projected,
        capacity=track.capacity,
        level=track.level,
        step=track.step,
        steps_ahead=ahead,
        growth_per_step=track.growth_per_step,
        jump=track.jump,
        jump_at=track.jump_at,
        event_every=track.event_every,
    )
