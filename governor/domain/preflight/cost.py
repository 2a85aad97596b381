"""What a plan can cost, in Decimal dollars.

Each phase holding GPUs is billed for its maximum hours rounded up to the provider's
billing increment, each GPU at its model's quoted rate, raised by 25% when the quote is over
a week old.
Storage and other costs are added, then a 15% contingency. The money that may be spent
is what the budget has left minus a reserve kept back for teardown, storage and a retry.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from decimal import ROUND_CEILING, Decimal

from governor.domain.money import SECONDS_PER_HOUR, ZERO, per_hour_from_month, usd
from governor.domain.preflight.plan import CANARY, Plan, PlanPhase

CONTINGENCY = Decimal("0.15")
STALE_AFTER_DAYS = 7
STALE_DRIFT = Decimal("0.25")  # RunPod H100 SXM Secure rose 21% in about twelve weeks
RESERVE_SHARE = Decimal("0.10")
RESERVE_MIN_USD = Decimal(20)


def quote_age_days(quoted: date, today: date) -> int:
    return (today - quoted).days


def quote_is_stale(quoted: date, today: date) -> bool:
    """Over a week old, or dated in the future (a typo is not a fresh quote)."""
    age = quote_age_days(quoted, today)
    return age > STALE_AFTER_DAYS or age < 0


def billed_hours(hours: Decimal, increment_s: int) -> Decimal:
    increments = (hours * SECONDS_PER_HOUR / increment_s).to_integral_value(ROUND_CEILING)
    return increments * increment_s / SECONDS_PER_HOUR


def reserve(remaining: Decimal) -> Decimal:
    """Kept back from the remaining budget: 10% of it, at least $20."""
    return max(usd(remaining * RESERVE_SHARE), RESERVE_MIN_USD)


@dataclass(frozen=True)
class GroupCost:
    """One GPU group's share of the compute: its rate after drift, at max hours."""

    gpu_type: str
    gpus: int
    rate: Decimal  # per GPU-hour, after drift
    compute: Decimal


@dataclass(frozen=True)
class CostFigures:
    groups: tuple[GroupCost, ...]
    drift: Decimal
    compute: Decimal  # every phase at max hours
    storage: Decimal
    other: Decimal
    worst: Decimal  # (compute + storage + other) x (1 + contingency)
    canary_worst: Decimal  # the same, for the phases up to and including the canary
    expected: Decimal  # expected hours, no contingency

    @property
    def rate(self) -> Decimal:
        """Per GPU-hour after drift: with several GPU models, their mean over the GPUs."""
        gpus = sum(g.gpus for g in self.groups)
        return sum((g.rate * g.gpus for g in self.groups), ZERO) / gpus


def plan_cost(plan: Plan, today: date) -> CostFigures:
    hw = plan.hardware
    drift = STALE_DRIFT if quote_is_stale(hw.rate_quoted_at, today) else ZERO
    rates = [(g, hw.gpus_of(g), g.rate_usd_per_gpu_hour * (1 + drift)) for g in hw.groups]
    per_hour = sum((gpus * rate for _, gpus, rate in rates), ZERO)  # every GPU of the plan

    def hours(phases: tuple[PlanPhase, ...], expected: bool = False) -> Decimal:
        return sum(
            (
                billed_hours(p.expected_hours if expected else p.max_hours, hw.billing_increment_s)
                for p in phases
                if p.gpu_held
            ),
            ZERO,
        )

    def compute(phases: tuple[PlanPhase, ...], expected: bool = False) -> Decimal:
        return usd(hours(phases, expected) * per_hour)

    storage = usd(
        sum(
            (per_hour_from_month(s.usd_per_gb_month, s.gb) * s.hours_held for s in plan.storage),
            ZERO,
        )
    )
    other = plan.other_costs_usd

    def worst(phases: tuple[PlanPhase, ...]) -> Decimal:
        return usd((compute(phases) + storage + other) * (1 + CONTINGENCY))

    canary = plan.index(CANARY)
    held = hours(plan.phases)
    return CostFigures(
        groups=tuple(
            GroupCost(g.gpu_type, gpus, rate, usd(held * gpus * rate)) for g, gpus, rate in rates
        ),
        drift=drift,
        compute=compute(plan.phases),
        storage=storage,
        other=other,
        worst=worst(plan.phases),
        canary_worst=worst(plan.phases[: canary + 1]) if canary is not None else ZERO,
        expected=compute(plan.phases, expected=True) + storage + other,
    )
