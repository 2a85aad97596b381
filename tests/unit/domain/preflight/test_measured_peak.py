"""A measured peak binds, both ways: the plan's evidence or a floor an earlier run of the same
model, recipe and hardware measured replaces the modeled peak; above the model it raises it,
under it permits, over 95% of usable or from a run that ran out of memory it refuses.

The reference plan on an H100 (79.1 GiB usable: 81,559 MiB less the driver's 564) models 77%:
go on the modeled peak alone.
"""

from __future__ import annotations

from datetime import date
from typing import Any

import pytest

from governor.domain.preflight.measured import Floor, FloorKey, floor_key, recipe_digest
from governor.domain.preflight.plan import Plan
from governor.domain.preflight.rules import Admission, Verdict, admit
from governor.services.plans.document import PlanIn
from tests.plans import variant

pytestmark = pytest.mark.usefixtures("exact_model")

TODAY = date(2026, 10, 8)
H100 = {
    "hardware.gpu_type": "H100",
    "hardware.usable_mib_per_gpu": 81_559,
    "memory_per_gpu_gib.fragmentation_margin": 3.98,
    "model.id": "google/gemma-3-27b-pt",
    "model.revision": "a1b2c3",
}
USABLE_GIB = (81_559 - 564) / 1024
# The reference plan on an H100 with an extra 28 GiB transient: modeled 107% of usable.
TIGHT = {**H100, "memory_per_gpu_gib.transients": [{"name": "eval_logits_accum", "gib": 28.0}]}


def plan(changes: dict[str, Any]) -> Plan:
    return PlanIn.model_validate(variant(changes)).to_plan()


def judge(changes: dict[str, Any], floors: tuple[Floor, ...] = ()) -> Admission:
    return admit(plan(changes), TODAY, None, floors=floors)


def evidence(gib: float, *, oom: bool = False) -> dict[str, Any]:
    return {
        "evidence": {
            "measured_peak_mib": round(gib * 1024),
            "measured_on": "2026-10-01",
            "same_config": True,
            "oom": oom,
        }
    }


def floor(
    key: FloorKey | None, gib: float, *, gpu: str = "NVIDIA H100 80GB HBM3", oom: bool = False
) -> Floor:
    assert key is not None
    return Floor(key, gpu, "run_x", "canary", gib, date(2026, 10, 1), oom)


def memory_fit(a: Admission) -> Any:
    fit = a.finding("memory_fit")
    assert fit is not None
    return fit


def test_the_model_alone_says_go() -> None:
    a = judge(H100)
    assert a.verdict is Verdict.GO
    assert "measured" not in memory_fit(a).evidence


def test_a_measured_peak_above_the_model_raises_it() -> None:
    """74 GiB measured against 60.7 modeled: the judged peak is 94% of usable, over the go line."""
    a = judge({**H100, **evidence(74.0)})
    fit = memory_fit(a)
    assert a.verdict is Verdict.CANARY_ONLY and fit.verdict is Verdict.CANARY_ONLY
    assert fit.evidence["judged_ratio"] == pytest.approx(74.0 / USABLE_GIB, abs=0.002)
    assert fit.evidence["measured"] == {
        "gib": 74.0,
        "on": "2026-10-01",
        "oom": False,
        "source": "evidence",
    }
    assert "measured 74.0 GiB in the plan's evidence, 2026-10-01, above the model" in fit.message


def test_a_measured_peak_under_the_model_permits_a_plan_that_does_not_fit() -> None:
    without = judge(TIGHT)
    assert without.verdict is Verdict.NO_GO
    a = judge({**TIGHT, **evidence(70.0)})
    assert a.verdict is Verdict.CANARY_ONLY
    assert "measured 70.0 GiB in the plan's evidence" in memory_fit(a).message


def test_a_measured_peak_over_95_percent_is_no_go_citing_it() -> None:
    a = judge({**H100, **evidence(76.5)})  # 97% of 79.1 GiB; the model says 77%
    fit = memory_fit(a)
    assert a.verdict is Verdict.NO_GO and fit.verdict is Verdict.NO_GO
    assert "measured 76.5 GiB" in fit.message and "over 95% (75.1 GiB)" in fit.message


def test_a_measured_run_that_ran_out_of_memory_is_no_go() -> None:
    a = judge({**H100, **evidence(40.0, oom=True)})
    fit = memory_fit(a)
    assert fit.verdict is Verdict.NO_GO
    assert "its run ran out of memory" in fit.message
    no_figure = {"measured_on": "2026-10-01", "same_config": True, "oom": True}
    assert judge({**H100, "evidence": no_figure}).verdict is Verdict.NO_GO


def test_evidence_of_another_configuration_or_too_old_binds_nothing() -> None:
    other = {**H100, **evidence(76.5)}
    other["evidence"]["same_config"] = False
    assert judge(other).verdict is Verdict.GO
    old = {**H100, **evidence(76.5)}
    old["evidence"]["measured_on"] = "2026-08-01"
    assert judge(old).verdict is Verdict.GO


def test_a_floor_of_the_same_configuration_is_judged_and_cited() -> None:
    key = floor_key(plan(H100))
    a = judge(H100, (floor(key, 50.0), floor(key, 74.0), floor(key, 31.0)))
    fit = memory_fit(a)
    assert a.verdict is Verdict.CANARY_ONLY  # the highest floor: 74 GiB, 94%
    assert "measured 74.0 GiB (canary) on run run_x, 2026-10-01" in fit.message
    assert fit.evidence["measured"]["source"] == "floor"
    assert a.finding("measured_context") is None


def test_a_floor_from_a_run_that_ran_out_of_memory_is_no_go() -> None:
    key = floor_key(plan(H100))
    a = judge(H100, (floor(key, 74.0), floor(key, 60.0, oom=True)))
    fit = memory_fit(a)
    assert fit.verdict is Verdict.NO_GO
    assert "measured 60.0 GiB (canary) on run run_x" in fit.message
    assert "ran out of memory" in fit.message


def test_a_floor_of_other_hardware_or_recipe_is_context_only() -> None:
    key = floor_key(plan(H100))
    assert key is not None
    other_recipe = FloorKey(key.model_id, key.model_revision, "0" * 16, key.gpus)
    floors = (
        floor(key, 76.5, gpu="NVIDIA A100-SXM4-80GB"),
        floor(other_recipe, 76.5),
    )
    a = judge(H100, floors)
    assert a.verdict is Verdict.GO  # judged by neither
    context = a.finding("measured_context")
    assert context is not None and context.verdict is Verdict.GO
    assert "measured 76.5 GiB (canary) on run run_x, 2026-10-01" in context.message
    assert len(context.evidence["floors"]) == 2  # type: ignore[arg-type]


def test_a_plan_without_a_model_id_keeps_and_cites_no_floor() -> None:
    key = floor_key(plan(H100))
    anonymous = {**H100, "model.id": None, "model.revision": None}
    assert floor_key(plan(anonymous)) is None
    a = judge(anonymous, (floor(key, 76.5),))
    assert a.verdict is Verdict.GO and a.finding("measured_context") is None


def test_the_recipe_digest_follows_what_changes_memory() -> None:
    base = recipe_digest(plan(H100))
    assert recipe_digest(plan(H100)) == base
    assert recipe_digest(plan({**H100, "training.micro_batch": 2})) != base
    assert recipe_digest(plan({**H100, "training.ce_impl": "liger_flce"})) != base
    # hardware and the plan's own declared figures are not the recipe
    assert recipe_digest(plan({**H100, "hardware.gpu_type": "H200"})) == base
    assert recipe_digest(plan({**H100, "memory_per_gpu_gib.activations": 9.0})) == base
    assert recipe_digest(plan({**H100, "model.revision": "other"})) == base


def test_fields_added_later_leave_the_recipe_digest_alone_at_their_defaults() -> None:
    """Floors recorded before `intermediate_size`, `kbit_matmul`, `mlp`, `optimizer_impl` and
    `gradient_accumulation_steps` existed still key the plans that do not set them; setting
    any of them is another recipe."""
    plan = PlanIn.model_validate(variant()).to_plan()
    assert recipe_digest(plan) == "9fe4cbe53590a5f0"  # the digest before the fields
    for changes in (
        {"training.kbit_matmul": "dequantize"},
        {"model.intermediate_size": 21504},
        {"model.mlp": "gated"},
        {"training.optimizer_impl": "foreach"},
        {"training.gradient_accumulation_steps": 1},
    ):
        other = PlanIn.model_validate(variant(changes)).to_plan()
        assert recipe_digest(other) != recipe_digest(plan)
