"""How far the memory model is from published measurements, by family of plan, and the
interval that uncertainty puts around a modeled peak.

The validation set (tests/preflight_cases/cases.json: published runs with their measured
peaks and configurations) is split into a tuning part and a held-out part. FAMILY_ERROR is
each family's 90th-percentile absolute relative error of the model on the tuning part; a
family with no measured case there takes the pooled figure. The validation tests recompute
these figures and fail when they drift. docs/preflight.md gives the table.
"""

from __future__ import annotations

from dataclasses import dataclass

from governor.domain.preflight.plan import Plan

LONG_CONTEXT_TOKENS = 8192  # tokens per sequence from which a plan is long-context
FAMILIES = ("moe", "multi_gpu", "long_context", "full", "qlora", "lora")
QUANTILE = 0.9  # of the absolute relative error on the tuning part
BINDING_ERROR = 0.10  # above it, the verdict is judged on the interval's upper edge

# Measured by tests/unit/domain/preflight/test_validation_set.py on the tuning part.
POOLED_ERROR = 0.22
FAMILY_ERROR: dict[str, float] = {
    "full": 0.15,
    "long_context": 0.18,
    "lora": 0.16,
    "moe": 0.04,
    "multi_gpu": 0.27,
    "qlora": 0.13,
}


def family(plan: Plan) -> str:
    """The one family a plan belongs to, the first that applies in FAMILIES' order."""
    t = plan.training
    if plan.model.moe is not None:
        return "moe"
    if plan.hardware.gpus > 1:
        return "multi_gpu"
    if t.tokens // t.micro_batch >= LONG_CONTEXT_TOKENS:
        return "long_context"
    if t.trainable_params > 0.5 * plan.model.params_total:
        return "full"
    if plan.memory.weights_breakdown.quantized_params > 0:
        return "qlora"
    return "lora"


@dataclass(frozen=True)
class Interval:
    family: str
    error: float  # the family's measured relative error (its 90th percentile)
    low_gib: float
    high_gib: float

    @property
    def binding(self) -> bool:
        """The family's error is large enough for the upper edge to decide."""
        return self.error > BINDING_ERROR


def interval(plan: Plan, modeled_gib: float) -> Interval:
    name = family(plan)
    error = FAMILY_ERROR.get(name, POOLED_ERROR)
    return Interval(name, error, modeled_gib * max(0.0, 1 - error), modeled_gib * (1 + error))
