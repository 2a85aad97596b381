"""The figures a plan's check was judged on, as they are stored with it and read back: the
memory table of the tightest GPU model with each model's fit, and the cost breakdown."""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Literal

from governor.domain.preflight.rules import Verdict

UsableMemory = Literal["verified", "derived", "unchecked"]
NOT_REQUIRED = {"required": False}  # a figure a check stored before it was added lacks


@dataclass(frozen=True)
class PlanComponent:
    name: str
    declared_gib: float
    floor_gib: float = field(metadata={"doc": "the governor's minimum, recomputed from the plan"})
    used_gib: float = field(metadata={"doc": "the larger of the two"})
    basis: str


@dataclass(frozen=True)
class PlanGroupFit:
    gpu_type: str
    gpus: int = field(metadata={"doc": "GPUs of this model, over all nodes"})
    usable_gib: float
    usable_memory: UsableMemory
    usable_source: str | None
    modeled_gib: float = field(metadata={"doc": "the modeled peak per GPU of this model"})
    ratio: float
    verdict: Verdict = field(metadata={"doc": "the memory verdict on this model alone"})


@dataclass(frozen=True, kw_only=True)
class PlanMemory:
    gpu_type: str = field(metadata={"doc": "the GPU model that decides: the tightest group's"})
    usable_gib: float
    usable_memory: UsableMemory | None = field(
        default=None,
        metadata={
            "doc": "where usable_gib comes from: a card's driver report, a datasheet, "
            "or only the plan (an unknown card)",
            **NOT_REQUIRED,
        },
    )
    usable_source: str | None = field(default=None, metadata=NOT_REQUIRED)
    declared_gib: float
    modeled_gib: float
    modeled_low_gib: float | None = field(
        default=None,
        metadata={"doc": "the interval around modeled_gib its family's error puts", **NOT_REQUIRED},
    )
    modeled_high_gib: float | None = field(
        default=None,
        metadata={
            "doc": "the interval's upper edge: what the thresholds apply to when binding",
            **NOT_REQUIRED,
        },
    )
    interval_family: str | None = field(
        default=None,
        metadata={"doc": "lora, qlora, full, long_context, multi_gpu or moe", **NOT_REQUIRED},
    )
    interval_error: float | None = field(
        default=None,
        metadata={
            "doc": "the family's 90th-percentile error against published measurements",
            **NOT_REQUIRED,
        },
    )
    interval_binding: bool | None = field(
        default=None,
        metadata={"doc": "the error is over 10%: the upper edge decides", **NOT_REQUIRED},
    )
    ratio: float
    components: tuple[PlanComponent, ...]
    groups: tuple[PlanGroupFit, ...] = field(
        default=(),
        metadata={"doc": "each GPU model of the plan, the tightest first", **NOT_REQUIRED},
    )


@dataclass(frozen=True)
class PlanGroupCost:
    gpu_type: str
    gpus: int
    rate_per_gpu_hour: Decimal = field(
        metadata={"api": "rate_usd_per_gpu_hour", "doc": "after drift"}
    )
    compute: Decimal = field(metadata={"doc": "its GPUs at max hours"})


@dataclass(frozen=True, kw_only=True)
class PlanCost:
    rate_per_gpu_hour: Decimal = field(
        metadata={
            "api": "rate_usd_per_gpu_hour",
            "doc": "after drift; with several GPU models, their mean over the plan's GPUs",
        }
    )
    rate_drift: float
    compute: Decimal
    storage: Decimal
    other: Decimal
    contingency: float
    worst_case: Decimal
    canary_worst_case: Decimal
    expected: Decimal
    groups: tuple[PlanGroupCost, ...] = field(
        default=(), metadata={"doc": "each GPU model's rate and compute", **NOT_REQUIRED}
    )
    remaining: Decimal | None
    held_for_plans: Decimal = field(
        default=Decimal(0),
        metadata={"doc": "held back for the budget's other admitted plans", **NOT_REQUIRED},
    )
    reserved_for_plans: Decimal = field(
        default=Decimal(0),
        metadata={"doc": "held_for_plans_usd's former name: the same amount", **NOT_REQUIRED},
    )
    preflight_reserve: Decimal | None = field(
        metadata={
            "doc": "kept back from what the plan may cost: 10% of the money no admitted plan "
            "holds, at least $20 (not the budget's reserve, which is already out of remaining)"
        }
    )
    reserve: Decimal | None = field(
        metadata={"doc": "preflight_reserve_usd's former name: the same amount"}
    )
    available: Decimal | None


def memory(stored: dict[str, Any]) -> PlanMemory:
    return PlanMemory(
        gpu_type=stored["gpu_type"],
        usable_gib=stored["usable_gib"],
        usable_memory=stored.get("usable_memory"),
        usable_source=stored.get("usable_source"),
        declared_gib=stored["declared_gib"],
        modeled_gib=stored["modeled_gib"],
        modeled_low_gib=stored.get("modeled_low_gib"),
        modeled_high_gib=stored.get("modeled_high_gib"),
        interval_family=stored.get("interval_family"),
        interval_error=stored.get("interval_error"),
        interval_binding=stored.get("interval_binding"),
        ratio=stored["ratio"],
        components=tuple(
            PlanComponent(c["name"], c["declared_gib"], c["floor_gib"], c["used_gib"], c["basis"])
            for c in stored["components"]
        ),
        groups=tuple(
            PlanGroupFit(
                g["gpu_type"],
                g["gpus"],
                g["usable_gib"],
                g["usable_memory"],
                g["usable_source"],
                g["modeled_gib"],
                g["ratio"],
                Verdict(g["verdict"]),
            )
            for g in stored.get("groups", ())
        ),
    )


def cost(stored: dict[str, Any]) -> PlanCost:
    return PlanCost(
        rate_per_gpu_hour=Decimal(stored["rate_usd_per_gpu_hour"]),
        rate_drift=stored["rate_drift"],
        compute=Decimal(stored["compute_usd"]),
        storage=Decimal(stored["storage_usd"]),
        other=Decimal(stored["other_usd"]),
        contingency=stored["contingency"],
        worst_case=Decimal(stored["worst_case_usd"]),
        canary_worst_case=Decimal(stored["canary_worst_case_usd"]),
        expected=Decimal(stored["expected_usd"]),
        groups=tuple(
            PlanGroupCost(
                g["gpu_type"],
                g["gpus"],
                Decimal(g["rate_usd_per_gpu_hour"]),
                Decimal(g["compute_usd"]),
            )
            for g in stored.get("groups", ())
        ),
        remaining=_amount(stored["remaining_usd"]),
        held_for_plans=Decimal(stored.get("reserved_for_plans_usd", 0)),
        reserved_for_plans=Decimal(stored.get("reserved_for_plans_usd", 0)),
        preflight_reserve=_amount(stored["reserve_usd"]),
        reserve=_amount(stored["reserve_usd"]),
        available=_amount(stored["available_usd"]),
    )


def _amount(stored: str | None) -> Decimal | None:
    return None if stored is None else Decimal(stored)
