"""Admission: an ordered list of small named rules over one assessed plan.

Reading RULES top to bottom tells an operator how a plan is judged: the plan's structure,
the governor's memory floors, the memory fit, then the money.
Each rule returns a Finding (the best verdict it allows, a message, evidence) or None; the
plan's verdict is the worst any finding allows, and every finding is reported. A rule about
the GPUs (their usable memory, the memory fit, the rate) is judged on each GPU group of the
plan, tightest first, and each of its findings names the group's GPU model and usable memory.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import date
from decimal import Decimal
from enum import StrEnum
from typing import Any

from governor.domain.money import dollars, format_usd
from governor.domain.preflight.calibration import Interval, interval
from governor.domain.preflight.cost import (
    CONTINGENCY,
    CostFigures,
    plan_cost,
    quote_age_days,
    reserve,
)
from governor.domain.preflight.gpus import GpuClass, Provenance, Reserve, gpu_class, unread_reserve
from governor.domain.preflight.measured import Floor, Measured, binding, context, floor_key
from governor.domain.preflight.memory import Component, MemoryFigures, count, model_memory
from governor.domain.preflight.plan import CANARY, CHECKPOINT, TRAIN, GpuGroup, Plan

GO_SHARE = 0.90  # modeled peak up to 90% of usable memory: go
FIT_SHARE = 1.00  # up to 100%: the canary must prove it
HARD_SHARE = 1.20  # over 120%: no pod is rented, whatever the evidence
MEASURED_SHARE = 0.95  # a measured peak (or the canary's) must stay under 95%
EVIDENCE_DAYS = 30
TOTAL_TOLERANCE = 0.01  # a declared total may differ from its components' sum by 1%
MIN_CANARY_STEPS = 2  # optimizer state appears only at the first optimizer step
# What a canary must show before training is released, besides its peak: its optimizer steps,
# then one evaluation batch and one acknowledged checkpoint save (a verdict may ask less).
CANARY_RELEASE = {"min_optimizer_steps": MIN_CANARY_STEPS, "evaluation": True, "checkpoint": True}
RATE_FLOOR_SHARE = Decimal("0.5")  # of the lowest on-demand rate: below it, a typo


class Verdict(StrEnum):
    GO = "go"
    CANARY_ONLY = "canary_only"
    NO_GO = "no_go"

    @property
    def rank(self) -> int:
        return {"go": 0, "canary_only": 1, "no_go": 2}[self.value]


@dataclass(frozen=True)
class Finding:
    rule: str
    verdict: Verdict = field(metadata={"doc": "the best verdict this finding allows"})
    message: str
    evidence: dict[str, object] = field(default_factory=dict)
    gpu_type: str | None = field(
        default=None, metadata={"doc": "the GPU model this finding is about, if it is one's"}
    )
    usable_gib: float | None = field(
        default=None, metadata={"doc": "that model's usable memory per GPU, as judged"}
    )


@dataclass(frozen=True)
class GroupFit:
    """One GPU group of the plan: its card on file, and the per-GPU memory model on it."""

    plan: Plan
    group: GpuGroup
    gpus: int  # over all nodes
    gpu: GpuClass | None
    reserve: Reserve  # what the driver keeps of the card's total
    memory: MemoryFigures
    measured: Measured | None  # a measured peak of the same configuration (measured.py)

    @property
    def usable_memory(self) -> str:
        """Where the usable memory comes from: a card's report, a datasheet, or the plan."""
        return "unchecked" if self.gpu is None else self.gpu.memory.value

    @property
    def usable_source(self) -> str | None:
        return None if self.gpu is None else self.gpu.source

    @property
    def interval(self) -> Interval:
        """The modeled peak with the error the validation set measured for its family."""
        return interval(self.plan, self.memory.modeled_gib)

    @property
    def measured_over(self) -> bool:
        """The measured peak is over 95% of usable memory, or its run ran out of memory."""
        m = self.measured
        return m is not None and (
            m.oom or (m.gib is not None and m.gib > MEASURED_SHARE * self.memory.usable_gib)
        )

    @property
    def measured_fit(self) -> bool:
        """A measured peak of the same configuration fit under 95%."""
        return self.measured is not None and not self.measured_over

    @property
    def raised_by_measurement(self) -> bool:
        """The measured peak is above the modeled one: it is the judged peak."""
        m = self.measured
        return m is not None and m.gib is not None and m.gib > self.memory.modeled_gib

    @property
    def point(self) -> float:
        """The modeled peak's share of usable memory, or the measured one's where it is above."""
        m, peak = self.measured, self.memory.modeled_gib
        if m is not None and m.gib is not None:
            peak = max(peak, m.gib)
        return peak / self.memory.usable_gib

    @property
    def judged_gib(self) -> float:
        """What the thresholds apply to: the interval's upper edge where the family's
        measured error is over 10%, else the modeled peak; a measured peak above it raises it."""
        i = self.interval
        judged = i.high_gib if i.binding else self.memory.modeled_gib
        m = self.measured
        return judged if m is None or m.gib is None else max(judged, m.gib)

    @property
    def share(self) -> float:
        return self.judged_gib / self.memory.usable_gib

    @property
    def band(self) -> Verdict:
        """Go only if the judged peak (the interval's upper edge where the model's measured
        error is large) is under the go line; refused only if the modeled peak itself does
        not fit: a plan the model's own error leaves in doubt is proven by its canary."""
        if self.measured_over:
            return Verdict.NO_GO
        point = self.point
        if self.share <= GO_SHARE:
            return Verdict.GO
        if point <= FIT_SHARE or (point <= HARD_SHARE and self.measured_fit):
            return Verdict.CANARY_ONLY
        return Verdict.NO_GO


@dataclass(frozen=True)
class Assessment:
    """A plan and everything the rules read: recomputed memory per GPU group (the tightest
    first), cost, and the money left."""

    plan: Plan
    today: date
    groups: tuple[GroupFit, ...]
    cost: CostFigures
    remaining: Decimal | None  # the budget's money left; None: not checked (offline)
    reserved: Decimal = Decimal(0)  # held back for the budget's other admitted plans
    floors: tuple[Floor, ...] = ()  # the measured floors of the plan's model and revision

    @property
    def tightest(self) -> GroupFit:
        """The group that decides the memory verdict: the worst band, then the highest share."""
        return self.groups[0]

    @property
    def memory(self) -> MemoryFigures:
        return self.tightest.memory

    @property
    def unreserved(self) -> Decimal | None:
        """The money left that no other admitted plan has reserved."""
        return None if self.remaining is None else self.remaining - self.reserved

    @property
    def available(self) -> Decimal | None:
        """What the plan may cost: the unreserved money minus the preflight reserve."""
        free = self.unreserved
        return None if free is None else free - reserve(free)

    def component(self, name: str) -> Component:
        return next(c for c in self.memory.components if c.name == name)

    @property
    def memory_band(self) -> Verdict:
        return self.tightest.band


def assess(
    plan: Plan,
    today: date,
    remaining: Decimal | None,
    reserved: Decimal = Decimal(0),
    floors: Sequence[Floor] = (),
) -> Assessment:
    groups = sorted(
        (_fit(plan, today, group, floors) for group in plan.hardware.groups),
        key=lambda g: (g.band.rank, g.share),
        reverse=True,
    )
    cost = plan_cost(plan, today)
    return Assessment(plan, today, tuple(groups), cost, remaining, reserved, tuple(floors))


def _fit(plan: Plan, today: date, group: GpuGroup, floors: Sequence[Floor]) -> GroupFit:
    """A group's usable memory is the driver's total (the plan's figure capped by the card's,
    or the card's) less what the driver keeps; it is judged against the highest measured peak
    of the same configuration: the plan's recent evidence, or the floor its earlier runs
    measured on this GPU model."""
    gpu = gpu_class(group.gpu_type)
    total = group.usable_mib_per_gpu
    if gpu is not None:
        total = gpu.total_mib if total is None else min(total, gpu.total_mib)
    assert total is not None, "a GPU not on file comes with its memory"
    reserve = unread_reserve(total) if gpu is None else gpu.reserve
    memory = model_memory(plan, (total - reserve.mib) / 1024)
    measured = [
        m
        for m in (_evidence(plan, today), binding(floors, floor_key(plan), group.gpu_type))
        if m is not None
    ]
    top = max(measured, key=lambda m: (m.oom, m.gib or 0.0), default=None)
    return GroupFit(plan, group, plan.hardware.gpus_of(group), gpu, reserve, memory, top)


def _evidence(plan: Plan, today: date) -> Measured | None:
    """The plan's evidence, if it is a recent measurement of the same configuration."""
    e = plan.evidence
    if not e.same_config or e.measured_on is None:
        return None
    if e.measured_peak_mib is None and not e.oom:
        return None
    if not 0 <= (today - e.measured_on).days <= EVIDENCE_DAYS:
        return None
    gib = None if e.measured_peak_mib is None else e.measured_peak_mib / 1024
    return Measured(gib, e.measured_on, e.oom, None)


Rule = Callable[[Assessment], "Finding | tuple[Finding, ...] | None"]
GroupRule = Callable[[Assessment, GroupFit], "Finding | None"]


def each_group(rule: GroupRule) -> Rule:
    """A rule judged on each GPU group, tightest first; each finding names its group."""

    def judged(a: Assessment) -> tuple[Finding, ...]:
        return tuple(
            replace(f, gpu_type=g.group.gpu_type, usable_gib=round(g.memory.usable_gib, 2))
            for g in a.groups
            if (f := rule(a, g)) is not None
        )

    judged.__name__ = rule.__name__
    return judged


def _on(g: GroupFit, a: Assessment) -> str:
    """ " on the 4 x H100" where the plan has several GPU models; nothing where it has one."""
    return "" if len(a.groups) == 1 else f" on the {g.gpus} x {g.group.gpu_type}"


# --- the plan's structure -------------------------------------------------------------


def modeled_total_adds_up(a: Assessment) -> Finding | None:
    declared, total = a.memory.declared_gib, a.plan.memory.modeled_total
    if math.isclose(declared, total, rel_tol=TOTAL_TOLERANCE):
        return None
    return Finding(
        "modeled_total_adds_up",
        Verdict.NO_GO,
        f"Incomplete plan: memory_per_gpu_gib.modeled_total is {total:.2f} GiB but its "
        f"components add up to {declared:.2f} GiB (more than 1% apart).",
        {"modeled_total_gib": total, "sum_of_components_gib": round(declared, 3)},
    )


def params_add_up(a: Assessment) -> Finding | None:
    b, total = a.plan.memory.weights_breakdown, a.plan.model.params_total
    counted = b.quantized_params + b.unquantized_params
    if math.isclose(counted, total, rel_tol=TOTAL_TOLERANCE):
        return None
    return Finding(
        "params_add_up",
        Verdict.NO_GO,
        f"Incomplete plan: weights_breakdown counts {count(counted)} parameters "
        f"(quantized + unquantized) but model.params_total is {count(total)}.",
        {"breakdown_params": counted, "params_total": total},
    )


def canary_before_train(a: Assessment) -> Finding | None:
    train, canary = a.plan.index(TRAIN), a.plan.index(CANARY)
    if train is None:
        message = "The plan has no `train` phase: name the training phase `train` so a canary "
        message += "can gate it."
    elif canary is None or canary > train:
        message = (
            "No `canary` phase before `train`: optimizer state appears only at the first "
            "optimizer step, so a run can pass step 0 and run out of memory at step 1. Add a "
            f"canary of at least {MIN_CANARY_STEPS} optimizer steps before training."
        )
    else:
        return None
    return Finding("canary_before_train", Verdict.NO_GO, message)


def canary_steps(a: Assessment) -> Finding | None:
    canary = a.plan.index(CANARY)
    if canary is None:
        return None
    steps = a.plan.phases[canary].min_optimizer_steps or 0
    if steps >= MIN_CANARY_STEPS:
        return None
    return Finding(
        "canary_steps",
        Verdict.NO_GO,
        f"The canary runs {steps} optimizer step(s); it needs min_optimizer_steps of at least "
        f"{MIN_CANARY_STEPS}, since optimizer state is allocated at the first step.",
        {"min_optimizer_steps": steps},
    )


def checkpoint_after_train(a: Assessment) -> Finding | None:
    train = a.plan.index(TRAIN)
    if train is None or a.plan.index(CHECKPOINT, after=train) is not None:
        return None
    return Finding(
        "checkpoint_after_train",
        Verdict.NO_GO,
        "No `checkpoint` phase after `train`: a stop at the ceiling must still leave a saved "
        "adapter. Add a checkpoint phase after training.",
    )


# --- memory ---------------------------------------------------------------------------


def floor_rule(name: str) -> GroupRule:
    """A rule that says when the governor's floor for one component beat the plan's figure."""

    def rule(_: Assessment, g: GroupFit) -> Finding | None:
        c = next(c for c in g.memory.components if c.name == name)
        if not c.raised:
            return None
        return Finding(
            f"{name}_floor",
            Verdict.GO,
            f"{name} raised from {c.declared_gib:.2f} to {c.floor_gib:.2f} GiB per GPU: {c.basis}.",
            {"declared_gib": c.declared_gib, "floor_gib": round(c.floor_gib, 3)},
        )

    rule.__name__ = f"{name}_floor"
    return rule


def on_tightest(rule: GroupRule) -> Rule:
    """A rule judged on the tightest GPU group alone: a term the same on every GPU."""

    def judged(a: Assessment) -> Finding | None:
        return rule(a, a.tightest)

    judged.__name__ = rule.__name__
    return judged


FLOORS = (
    *(
        on_tightest(floor_rule(name))
        for name in (
            "runtime_overhead",
            "nccl",
            "weights",
            "dequantized_copy",
            "kernel_layouts",
            "adapters_grads_optimizer",
            "activations",
            "logits_peak",
            "softcap_logits",
            "fsdp_or_moe_gather",
            "expert_aggregation",
        )
    ),
    each_group(floor_rule("fragmentation_margin")),  # a share of each model's usable memory
)


def usable_memory(_: Assessment, g: GroupFit) -> Finding | None:
    gpu_type, usable, gpu, reserve = g.group.gpu_type, g.memory.usable_gib, g.gpu, g.reserve
    declared = g.group.usable_mib_per_gpu
    if gpu is None:
        assert declared is not None
        message = (
            f"No reported memory on file for {gpu_type!r}: its memory was not checked. The "
            f"plan's {declared / 1024:.1f} GiB per GPU is used as given, less the "
            f"{reserve.mib} MiB a driver keeps of it (the largest reserve read on any card): "
            f"{usable:.1f} GiB. The canary's measured total is the check."
        )
    else:
        notes = []
        if declared is not None and declared > gpu.total_mib:
            notes.append(
                f"{gpu.name} reports {gpu.total_mib / 1024:.1f} GiB per GPU, less than the "
                f"plan's {declared / 1024:.1f} GiB: the reported figure is used."
            )
        if gpu.memory is Provenance.DERIVED:
            notes.append(
                f"{gpu.name}'s {gpu.total_mib:,} MiB is derived from its datasheet, not read "
                "from a card: the canary's measured total is the check."
            )
        if not notes:
            return None
        message = " ".join(notes)
    return Finding(
        "usable_memory",
        Verdict.GO,
        message,
        {"usable_gib": round(usable, 2), "usable_memory": g.usable_memory, **_reserve_json(g)},
    )


def _reserve_json(g: GroupFit) -> dict[str, Any]:
    return {"reserved_mib": g.reserve.mib, "reserved_source": g.reserve.source}


def memory_fit(a: Assessment, g: GroupFit) -> Finding:
    m, c, share, i = g.memory.modeled_gib, g.memory.usable_gib, g.share, g.interval
    band, point, seen = g.band, g.point, g.measured
    ratio = g.memory.ratio
    what = f"Modeled peak {m:.1f} GiB per GPU is {ratio:.0%} of the {c:.1f} GiB usable{_on(g, a)}"
    if seen is not None and g.raised_by_measurement and not g.measured_over:
        what += f"; the same configuration {seen.said()}, above the model: {point:.0%}"
    if i.binding:
        what += (
            f"; with the ±{i.error:.0%} {i.family} plans showed against published "
            f"measurements it may reach {i.high_gib:.1f} GiB ({share:.0%})"
        )
    canary_gate = (
        f"training is released only if the canary's device-level peak after "
        f"{MIN_CANARY_STEPS} optimizer steps, one eval batch and one checkpoint save stays "
        f"under {MEASURED_SHARE:.0%} ({MEASURED_SHARE * c:.1f} GiB)"
    )
    if seen is not None and g.measured_over:
        over = (
            "its run ran out of memory"
            if seen.oom
            else f"over {MEASURED_SHARE:.0%} ({MEASURED_SHARE * c:.1f} GiB) of usable"
        )
        message = f"{what}. The same configuration {seen.said()}: {over}. No pod is rented."
    elif band is Verdict.GO:
        message = f"{what} (go up to {GO_SHARE:.0%}): it fits by {c - g.judged_gib:.1f} GiB."
    elif point <= GO_SHARE:
        message = f"{what}, over the {GO_SHARE:.0%} go line: the model's error leaves it in "
        message += f"doubt. Admit loading and the canary only; {canary_gate}."
    elif point <= FIT_SHARE:
        message = f"{what}: too close to run unproven. Admit loading and the canary only; "
        message += f"{canary_gate}."
    elif band is Verdict.CANARY_ONLY and seen is not None:
        message = f"{what}, but the same configuration {seen.said()}, under "
        message += f"{MEASURED_SHARE:.0%}: canary only; {canary_gate}."
    elif point <= HARD_SHARE:
        message = f"{what}: it does not fit, and no recent measured peak of the same "
        message += f"configuration under {MEASURED_SHARE:.0%} says otherwise. No pod is rented."
    else:
        message = f"{what}: over {HARD_SHARE:.0%}, no pod is rented."
    if seen is not None and seen.said() not in message:
        message += f" The same configuration {seen.said()}."
    raised = {  # largest first: what pushed the plan up
        x.name: round(x.floor_gib - x.declared_gib, 2)
        for x in sorted(g.memory.components, key=lambda x: x.declared_gib - x.floor_gib)
        if x.raised
    }
    if raised:
        added = ", ".join(f"{name} by {gib:.2f} GiB" for name, gib in raised.items())
        message += f" The governor's floors raised {added}."
    if not i.binding:
        message += (
            f" Published measurements put {i.family} plans within ±{i.error:.0%} of the model "
            f"(90th percentile): {i.low_gib:.1f} to {i.high_gib:.1f} GiB."
        )
    return Finding(
        "memory_fit",
        band,
        message,
        {
            "modeled_gib": round(m, 2),
            "usable_gib": round(c, 2),
            "ratio": round(g.memory.ratio, 3),
            "judged_ratio": round(share, 3),
            "margin_gib": round(c - m, 2),
            "usable_memory": g.usable_memory,
            "usable_source": g.usable_source,
            **_reserve_json(g),
            "raised_gib": raised,
            **_interval_json(g.interval),
            **({"canary_release": CANARY_RELEASE} if band is Verdict.CANARY_ONLY else {}),
            **({} if seen is None else {"measured": seen.as_json()}),
        },
    )


def measured_context(a: Assessment) -> Finding | None:
    """Floors of the same model and revision measured with another recipe or hardware: cited
    as context, never judged by."""
    plan, key = a.plan, floor_key(a.plan)
    others = context(a.floors, key, [g.group.gpu_type for g in a.groups])
    if key is None or not others:
        return None
    top = others[0]
    message = (
        f"{plan.model.id} was {top.said()} on {top.key.gpus} x {top.gpu_type} with "
        f"{'the same' if top.key.recipe == key.recipe else 'another'} recipe: context "
        "only, this plan's configuration differs."
    )
    if len(others) > 1:
        message += f" {len(others) - 1} other configuration(s) of it were measured too."
    evidence: dict[str, object] = {
        "floors": [
            {"run_id": f.run_id, "phase": f.phase, "gib": round(f.peak_gib, 2), "gpu": f.gpu_type}
            | {"gpus": f.key.gpus, "oom": f.oom, "on": f.measured_on.isoformat()}
            for f in others
        ]
    }
    return Finding("measured_context", Verdict.GO, message, evidence)


def _interval_json(i: Interval) -> dict[str, Any]:
    return {
        "modeled_low_gib": round(i.low_gib, 2),
        "modeled_high_gib": round(i.high_gib, 2),
        "interval_family": i.family,
        "interval_error": i.error,
        "interval_binding": i.binding,
    }


# --- money ----------------------------------------------------------------------------


def rate_plausible(a: Assessment, g: GroupFit) -> Finding | None:
    rate = g.group.rate_usd_per_gpu_hour
    lowest = None if g.gpu is None else g.gpu.lowest_on_demand_usd
    if g.gpu is None or lowest is None or a.plan.hardware.interruptible:
        return None
    if rate >= lowest * RATE_FLOOR_SHARE:
        return None
    return Finding(
        "rate_plausible",
        Verdict.NO_GO,
        f"The quoted {dollars(rate)}/GPU-hour is under half the lowest "
        f"on-demand rate on file for {g.gpu.name} ({dollars(lowest)}): "
        "a typo or a stale page. Re-quote, or mark the plan interruptible if it is spot.",
        {
            "rate_usd_per_gpu_hour": format_usd(rate),
            "lowest_on_demand_usd": format_usd(lowest),
        },
    )


def quote_age(a: Assessment) -> Finding | None:
    if not a.cost.drift:
        return None
    quoted = a.plan.hardware.rate_quoted_at
    age = quote_age_days(quoted, a.today)
    when = f"{age} days ago" if age >= 0 else "in the future"
    groups = a.cost.groups
    rates = " and ".join(
        f"{dollars(g.rate)}/GPU-hour" + ("" if len(groups) == 1 else f" for the {g.gpu_type}")
        for g in groups
    )
    said = "rate was" if len(groups) == 1 else "rates were"
    it = "it" if len(groups) == 1 else "they"
    return Finding(
        "quote_age",
        Verdict.GO,
        f"The {said} quoted {when} ({quoted.isoformat()}): costs assume {it} rose "
        f"{a.cost.drift:.0%}, to {rates}. A fresh quote removes this.",
        {"rate_quoted_at": quoted.isoformat(), "drift": float(a.cost.drift)},
    )


def cost_fit(a: Assessment) -> Finding:
    cost, remaining, available = a.cost, a.remaining, a.available
    if remaining is None or available is None:
        return Finding(
            "cost_fit",
            Verdict.GO,
            f"Worst case {dollars(cost.worst)} (expected {dollars(cost.expected)}); not checked "
            "against a budget: give the remaining budget to check it.",
            {"worst_case_usd": format_usd(cost.worst)},
        )
    held = (
        f", {dollars(a.reserved)} held for the budget's other admitted plans," if a.reserved else ""
    )
    money = (
        f"{dollars(available)} available ({dollars(remaining)} remaining{held} less a "
        f"{dollars(reserve(remaining - a.reserved))} preflight reserve)"
    )
    evidence: dict[str, object] = {
        "worst_case_usd": format_usd(cost.worst),
        "canary_worst_case_usd": format_usd(cost.canary_worst),
        "available_usd": format_usd(available),
    }
    if a.memory_band is Verdict.CANARY_ONLY:
        if cost.canary_worst > available:
            message = f"Even the canary's worst case {dollars(cost.canary_worst)} exceeds {money}."
            return Finding("cost_fit", Verdict.NO_GO, message, evidence)
        message = f"The canary's worst case {dollars(cost.canary_worst)} fits {money}; "
        if cost.worst > available:
            message += f"the full plan's {dollars(cost.worst)} does not, so training will not be "
            message += "released unless the budget grows."
        else:
            message += f"the full plan's {dollars(cost.worst)} is re-checked before training."
        return Finding("cost_fit", Verdict.CANARY_ONLY, message, evidence)
    worst = (
        f"Worst case {dollars(cost.worst)} (max hours, billing increments, "
        f"{CONTINGENCY:.0%} contingency; expected {dollars(cost.expected)})"
    )
    if cost.worst > available:
        return Finding("cost_fit", Verdict.NO_GO, f"{worst} exceeds {money}.", evidence)
    return Finding("cost_fit", Verdict.GO, f"{worst} fits {money}.", evidence)


RULES: tuple[Rule, ...] = (
    modeled_total_adds_up,
    params_add_up,
    canary_before_train,
    canary_steps,
    checkpoint_after_train,
    *FLOORS,
    each_group(usable_memory),
    each_group(memory_fit),
    measured_context,
    each_group(rate_plausible),
    quote_age,
    cost_fit,
)


@dataclass(frozen=True)
class Admission:
    verdict: Verdict
    findings: tuple[Finding, ...]
    assessment: Assessment

    @property
    def deciding(self) -> Finding | None:
        """The first finding that holds the plan back from go; None for a go."""
        if self.verdict is Verdict.GO:
            return None
        return next(f for f in self.findings if f.verdict is self.verdict)

    def finding(self, rule: str) -> Finding | None:
        return next((f for f in self.findings if f.rule == rule), None)

    def with_finding(self, finding: Finding) -> Admission:
        """The admission with one more finding (judged outside the rules, e.g. on a pod)."""
        verdict = max((self.verdict, finding.verdict), key=lambda v: v.rank)
        return Admission(verdict, (*self.findings, finding), self.assessment)

    def as_json(self) -> dict[str, Any]:
        """The verdict, every reason, and the recomputed memory table and cost figures."""
        a = self.assessment
        return {
            "verdict": self.verdict.value,
            "reasons": [
                {
                    "rule": f.rule,
                    "verdict": f.verdict.value,
                    "message": f.message,
                    "evidence": f.evidence,
                    **({} if f.gpu_type is None else {"gpu_type": f.gpu_type}),
                    **({} if f.usable_gib is None else {"usable_gib": f.usable_gib}),
                }
                for f in self.findings
            ],
            "memory": _memory_json(a),
            "cost": _cost_json(a),
        }


def admit(
    plan: Plan,
    today: date,
    remaining: Decimal | None,
    rules: tuple[Rule, ...] = RULES,
    *,
    reserved: Decimal = Decimal(0),
    floors: Sequence[Floor] = (),
) -> Admission:
    """Judge a plan: go, canary_only or no_go, with every finding in rule order. `reserved`:
    what the budget's other admitted plans hold back from `remaining`; `floors`: the measured
    floors of the plan's model (measured.py)."""
    a = assess(plan, today, remaining, reserved, floors)
    findings = tuple(f for rule in rules for f in _found(rule(a)))
    verdict = max((f.verdict for f in findings), key=lambda v: v.rank, default=Verdict.GO)
    return Admission(verdict, findings, a)


def _found(result: Finding | tuple[Finding, ...] | None) -> tuple[Finding, ...]:
    if result is None:
        return ()
    return (result,) if isinstance(result, Finding) else result


def _memory_json(a: Assessment) -> dict[str, Any]:
    """The tightest group's memory table, and each group's fit beside it."""
    m, g = a.memory, a.tightest
    return {
        "gpu_type": g.group.gpu_type,
        "usable_gib": round(m.usable_gib, 2),
        "usable_memory": g.usable_memory,
        "usable_source": g.usable_source,
        **_reserve_json(g),
        "declared_gib": round(m.declared_gib, 2),
        "modeled_gib": round(m.modeled_gib, 2),
        **_interval_json(g.interval),
        "ratio": round(m.ratio, 3),
        "components": [
            {
                "name": c.name,
                "declared_gib": round(c.declared_gib, 2),
                "floor_gib": round(c.floor_gib, 2),
                "used_gib": round(c.used_gib, 2),
                "basis": c.basis,
            }
            for c in m.components
        ],
        "groups": [
            {
                "gpu_type": x.group.gpu_type,
                "gpus": x.gpus,
                "usable_gib": round(x.memory.usable_gib, 2),
                "usable_memory": x.usable_memory,
                "usable_source": x.usable_source,
                "modeled_gib": round(x.memory.modeled_gib, 2),
                "ratio": round(x.memory.ratio, 3),
                "verdict": x.band.value,
            }
            for x in a.groups
        ],
    }


def _cost_json(a: Assessment) -> dict[str, Any]:
    c, remaining, available = a.cost, a.remaining, a.available
    return {
        "rate_usd_per_gpu_hour": format_usd(c.rate),
        "rate_drift": float(c.drift),
        "compute_usd": format_usd(c.compute),
        "storage_usd": format_usd(c.storage),
        "other_usd": format_usd(c.other),
        "contingency": float(CONTINGENCY),
        "worst_case_usd": format_usd(c.worst),
        "canary_worst_case_usd": format_usd(c.canary_worst),
        "expected_usd": format_usd(c.expected),
        "groups": [
            {
                "gpu_type": g.gpu_type,
                "gpus": g.gpus,
                "rate_usd_per_gpu_hour": format_usd(g.rate),
                "compute_usd": format_usd(g.compute),
            }
            for g in c.groups
        ],
        "remaining_usd": None if remaining is None else format_usd(remaining),
        "reserved_for_plans_usd": format_usd(a.reserved),
        "reserve_usd": None if a.unreserved is None else format_usd(reserve(a.unreserved)),
        "available_usd": None if available is None else format_usd(available),
    }
