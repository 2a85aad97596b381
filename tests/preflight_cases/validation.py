"""The validation set read into plans, and the model's error on it.

Each case of cases.json becomes a preflight-plan/0.1 document (the reference plan's phases
and costs, the case's model, GPUs and recipe, every declared memory figure 0 so that the
governor's floors alone decide) and is judged without a budget. Its measured peak is
compared with the model's figure for what the source measured (`MemoryFigures.predicted_gib`).
Cases marked with a `round` came from sources added after the model's constants were last
chosen; the summary reports them as a group of their own besides the two parts.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

from governor.domain.preflight.calibration import QUANTILE, family
from governor.domain.preflight.memory import LEFT_OUT
from governor.domain.preflight.rules import Admission, admit
from governor.domain.telemetry import GIB
from governor.services.plans.document import PlanIn
from tests.plans import COMPONENTS, EXAMPLE, variant

CASES_FILE = Path(__file__).with_name("cases.json")
SET: dict[str, Any] = json.loads(CASES_FILE.read_text())
CASES: list[dict[str, Any]] = SET["cases"]
JUDGED_ON = date(2026, 10, 8)  # the reference plan's quote is fresh on this day
UNIT_BYTES = {"GB": 1e9, "GiB": GIB, "MiB": 2**20}
NEW_SOURCES = 3  # the `round` of the sources added after the constants were last chosen
ZERO_MEMORY = {f"memory_per_gpu_gib.{c}": 0.0 for c in COMPONENTS}


def document(case: dict[str, Any]) -> dict[str, Any]:
    model = SET["models"][case["model"]]
    w = case["weights"]
    gpu = case["gpu"]
    training = {**EXAMPLE["training"], **case["training"]}
    training.pop("lora_rank", None)
    changes = {
        "job_id": case["id"][:100],
        "hardware.gpu_type": gpu["gpu_type"],
        "hardware.gpu_count": gpu["gpu_count"],
        "hardware.usable_mib_per_gpu": gpu.get("usable_mib_per_gpu", 10_000_000),
        "hardware.rate_usd_per_gpu_hour": 50,
        "model": {**model, "moe": case.get("moe")},
        "training": training,
        **ZERO_MEMORY,
        "memory_per_gpu_gib.transients": [],
        "memory_per_gpu_gib.weights_breakdown": {
            "quantized_params": w["quantized_params"],
            "bytes_per_quantized": w["bytes_per_quantized"],
            "unquantized_params": model["params_total"] - w["quantized_params"],
            "bytes_per_unquantized": w["bytes_per_unquantized"],
        },
    }
    return variant(changes)


@dataclass(frozen=True)
class Judged:
    case: dict[str, Any]
    admission: Admission

    @property
    def family(self) -> str:
        return family(self.admission.assessment.plan)

    @property
    def measured_gib(self) -> float | None:
        c = self.case
        return in_gib(c["measured"], c["unit"])

    @property
    def predicted_gib(self) -> float:
        return self.admission.assessment.memory.predicted_gib(self.case["metric"] or "device")

    @property
    def error(self) -> float | None:
        """(model - measured) / measured; None for an outcome-only case."""
        return relative_error(self.predicted_gib, self.measured_gib)

    @property
    def device_gib(self) -> float | None:
        """The same run's device figure, where its source gives one beside the case's metric."""
        c = self.case
        return in_gib(c.get("device_measured"), c.get("device_unit"))

    @property
    def device_error(self) -> float | None:
        """(model - measured) / measured at the device level, for a case with a device figure."""
        predicted = self.admission.assessment.memory.predicted_gib("device")
        return relative_error(predicted, self.device_gib)


def in_gib(value: float | None, unit: str | None) -> float | None:
    """A published figure in GiB; None where the source gave none."""
    return None if value is None or unit is None else value * UNIT_BYTES[unit] / GIB


def relative_error(predicted: float, measured: float | None) -> float | None:
    return None if measured is None else predicted / measured - 1


def judge(case: dict[str, Any]) -> Judged:
    return Judged(case, admit(PlanIn.model_validate(document(case)).to_plan(), JUDGED_ON, None))


def quantile(values: list[float], q: float = QUANTILE) -> float:
    """The q-quantile, linearly interpolated between order statistics."""
    ordered = sorted(values)
    at = q * (len(ordered) - 1)
    low = int(at)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (at - low)


@dataclass(frozen=True)
class Summary:
    name: str
    errors: list[float]

    @property
    def median(self) -> float:
        return statistics.median(abs(e) for e in self.errors)

    @property
    def within(self) -> float:
        return sum(abs(e) <= 0.15 for e in self.errors) / len(self.errors)

    @property
    def worst(self) -> float:
        return max(self.errors, key=abs)

    @property
    def p90(self) -> float:
        return quantile([abs(e) for e in self.errors])

    def line(self) -> str:
        return (
            f"{self.name:<22} n={len(self.errors):>2}  median |err| {self.median:6.1%}  "
            f"within ±15% {self.within:6.1%}  p90 {self.p90:6.1%}  worst {self.worst:+7.1%}"
        )


def groups(judged: list[Judged]) -> dict[str, list[Judged]]:
    """The measured cases by summary line: the tuning part, the held-out part (each with
    every source) and the cases of the sources added after the constants were chosen."""
    measured = [j for j in judged if j.error is not None]
    return {
        "tuning": [j for j in measured if j.case["part"] == "tuning"],
        "held_out": [j for j in measured if j.case["part"] == "held_out"],
        "new_sources": [j for j in measured if j.case.get("round") == NEW_SOURCES],
    }


def device_errors(judged: list[Judged]) -> list[float]:
    """The device-level errors of the cases whose runs also published a device figure."""
    return [j.device_error for j in judged if j.device_error is not None]


def summary_lines(judged: list[Judged]) -> list[str]:
    """Each group's summary, then its families' indented under it; last, the device figures
    of the same runs."""
    lines = []
    for name, cases in groups(judged).items():
        lines.append(Summary(name, [j.error for j in cases if j.error is not None]).line())
        for family_name in sorted({j.family for j in cases}):
            errors = [j.error for j in cases if j.family == family_name and j.error is not None]
            lines.append("  " + Summary(family_name, errors).line())
    lines.append(Summary("device, same runs", device_errors(judged)).line())
    return lines


SHORT = {  # column names of the breakdown, by component
    "weights": "weights",
    "dequantized_copy": "dequant",
    "kernel_layouts": "layouts",
    "adapters_grads_optimizer": "grads+opt",
    "activations": "activ",
    "logits_peak": "logits",
    "softcap_logits": "softcap",
    "fsdp_or_moe_gather": "gather",
    "optimizer_step": "step",
    "expert_aggregation": "aggreg",
    "other_transients": "other",
    "runtime_overhead": "context",
    "nccl": "nccl",
    "fragmentation_margin": "slack",
}


def breakdown(judged: Judged) -> str:
    """One case, modeled against measured, with each term the measurement sees (GiB)."""
    c, memory = judged.case, judged.admission.assessment.memory
    metric = c["metric"] or "device"
    terms = " ".join(
        f"{SHORT[x.name]} {x.used_gib:.2f}"
        for x in memory.components
        if x.used_gib >= 0.005 and x.name not in LEFT_OUT[metric]
    )
    measured = "-" if judged.measured_gib is None else f"{judged.measured_gib:.2f}"
    error = "" if judged.error is None else f"{judged.error:+.0%}"
    return (
        f"{c['part']:<8} {judged.family:<12} {c['id']:<46} {metric:<9} "
        f"measured {measured:>6} model {judged.predicted_gib:6.2f} {error:>6} "
        f"{c['outcome']:<4} {judged.admission.assessment.memory_band.value:<11} | {terms}"
    )


if __name__ == "__main__":  # python -m tests.preflight_cases.validation: the table, case by case
    every = [judge(case) for case in CASES]
    for judged in every:
        print(breakdown(judged))
    print()
    print("\n".join(summary_lines(every)))
