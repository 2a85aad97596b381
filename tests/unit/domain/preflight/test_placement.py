"""Placement on a pod's measured free memory: each GPU against the per-GPU peak of the plan's
GPU model it is, so a mixed pod's smaller GPUs are not judged by its larger GPUs' peak."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest

from governor.domain.preflight.calibration import FAMILY_ERROR
from governor.domain.preflight.placement import FreeGpu, Need, need_of, placement
from governor.domain.preflight.rules import Verdict, admit
from governor.domain.telemetry import GIB
from governor.services.plans.document import PlanIn
from tests.plans import variant

AT = datetime(2026, 10, 8, tzinfo=UTC)


def gpu(index: int, name: str, free_gib: float) -> FreeGpu:
    return FreeGpu(f"GPU-{index}", index, name, int(free_gib * GIB), AT)


# a plan of 2 x H200 at 100 GiB per GPU (its larger batch) and 2 x H100 at 60 GiB
NEEDS = [Need("H200", 100.0, 2), Need("H100", 60.0, 2)]
H200S = [gpu(0, "NVIDIA H200", 130.0), gpu(1, "NVIDIA H200", 120.0)]


def test_each_gpu_is_judged_against_its_own_models_peak() -> None:
    found = placement(NEEDS, [*H200S, gpu(2, "NVIDIA H100 80GB HBM3", 70.0), gpu(3, "H100", 65.0)])
    assert found.verdict is Verdict.GO, found.message
    rows = {
        r["uuid"]: (r["judged_as"], r["modeled_gib"], r["fits"]) for r in found.evidence["gpus"]
    }
    assert rows["GPU-2"] == ("H100", 60.0, True)  # 70 GiB free: short of 100, enough for 60
    assert rows["GPU-0"] == ("H200", 100.0, True)
    assert "2 x H100 at 60.0 GiB: GPU 2 GPU-2 (70.0 GiB free), GPU 3 GPU-3" in found.message


def test_a_model_short_of_room_is_named_with_its_shortfall() -> None:
    found = placement(NEEDS, [*H200S, gpu(2, "NVIDIA H100 80GB HBM3", 70.0), gpu(3, "H100", 20.0)])
    assert found.verdict is Verdict.NO_GO
    assert found.message.startswith("Only 3 of the pod's 4 GPUs have room")
    assert "2 x H100 at 60.0 GiB: GPU 2 GPU-2 (70.0 GiB free) (1 short)" in found.message


def test_a_gpu_of_a_model_the_plan_does_not_name_stands_in_at_the_largest_peak() -> None:
    a100s = [gpu(2, "NVIDIA A100-SXM4-80GB", 79.0), gpu(3, "NVIDIA A100-SXM4-80GB", 79.0)]
    found = placement(NEEDS, [*H200S, *a100s])
    assert found.verdict is Verdict.NO_GO  # 79 GiB free is short of the largest peak, 100
    assert {r["judged_as"] for r in found.evidence["gpus"][2:]} == {None}
    roomy = [gpu(2, "NVIDIA B200", 170.0), gpu(3, "NVIDIA B200", 170.0)]
    stand_ins = placement(NEEDS, [*H200S, *roomy])
    assert stand_ins.verdict is Verdict.GO
    assert "of models the plan does not name, at 100.0 GiB: GPU 2 GPU-2" in stand_ins.message


def test_a_plan_of_one_model_judges_every_gpu_against_it_whatever_its_name() -> None:
    found = placement([Need("H200", 60.0, 1)], [gpu(0, "H100", 30.0), gpu(1, "H100", 78.0)])
    assert found.verdict is Verdict.GO
    assert found.message == (
        "1 of the pod's 2 GPUs have room for the modeled 60.0 GiB per GPU: "
        "GPU 1 GPU-1 (78.0 GiB free)."
    )


def test_a_gpu_must_hold_the_peak_the_verdict_judges_not_only_the_modeled_one() -> None:
    edge = "the modeled 60.0 GiB's upper edge, ±26% as long_context plans showed"
    judged = Need("H100", 60.0, 1, 75.6, edge)
    found = placement([judged], [gpu(0, "H100", 70.0), gpu(1, "H100", 78.0)])
    assert found.verdict is Verdict.GO
    assert found.message.startswith(
        f"1 of the pod's 2 GPUs have room for 75.6 GiB per GPU ({edge})"
    )
    rows = {
        r["uuid"]: (r["modeled_gib"], r["judged_gib"], r["fits"]) for r in found.evidence["gpus"]
    }
    assert rows == {"GPU-0": (60.0, 75.6, False), "GPU-1": (60.0, 75.6, True)}
    assert placement([judged], [gpu(0, "H100", 70.0)]).verdict is Verdict.NO_GO


def fits_of(document: dict[str, object]) -> Need:
    plan = PlanIn.model_validate(document).to_plan()
    [group] = admit(plan, date(2026, 10, 8), None).assessment.groups
    return need_of(group)


def test_the_need_is_the_upper_edge_where_the_family_error_binds() -> None:
    on_h200 = fits_of(variant())  # the reference plan: long-context, 60.64 GiB modeled
    assert on_h200.modeled_gib == pytest.approx(60.64, abs=0.01)
    error = FAMILY_ERROR["long_context"]
    assert on_h200.judged_gib == pytest.approx(60.64 * (1 + error), abs=0.01)
    assert f"upper edge, ±{error:.0%} as long_context plans showed" in on_h200.basis


@pytest.mark.usefixtures("exact_model")
def test_without_a_binding_error_the_need_is_the_modeled_peak() -> None:
    assert fits_of(variant()).judged_gib is None
