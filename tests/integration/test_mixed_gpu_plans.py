"""A preflight-plan/0.2 plan of two GPU models over the API (SQLite and PostgreSQL): the
verdict's rows name the GPU model they judge, each model is billed at its rate, and a pod's
GPUs are each judged against their own model's per-GPU peak."""

from __future__ import annotations

from dataclasses import replace

import pytest
from fastapi.testclient import TestClient

from governor.domain.telemetry import GIB
from tests.integration.conftest import Governor, gpu_sample, ok
from tests.plans import gpu_groups, variant

# Verdicts on the modeled peak: these plans sit at chosen shares of their cards.
pytestmark = pytest.mark.usefixtures("exact_model")

H200 = {"gpu_type": "H200", "gpu_count": 1, "rate_usd_per_gpu_hour": 4.59}
H100 = {"gpu_type": "H100", "gpu_count": 1, "rate_usd_per_gpu_hour": 2.69}


def test_a_plan_of_two_gpu_models_is_judged_per_model_and_placed_per_gpu(
    gov: Governor, client: TestClient
) -> None:
    budget = gov.budget("500")
    today = gov.clock.now().date().isoformat()
    # the reference plan on an H200 and an H100, its fragmentation margin 5% of the H100's
    # memory (the H200's floor is 5% of its own): 61.7 and 58.6 GiB modeled per GPU
    doc = variant(
        {
            **gpu_groups(H200, H100),
            "hardware.rate_quoted_at": today,
            "memory_per_gpu_gib.fragmentation_margin": 3.98,
        }
    )
    plans = f"/v1/budgets/{budget}/plans"
    verdict = ok(client.post(plans, json=doc), 201)
    assert verdict["verdict"] == "go"
    assert verdict["plan"]["schema"] == "preflight-plan/0.2"
    fits = [
        (r["gpu_type"], r["usable_gib"]) for r in verdict["reasons"] if r["rule"] == "memory_fit"
    ]
    assert fits == [("H100", 79.1), ("H200", 139.72)]  # the tightest first
    cost_fit = next(r for r in verdict["reasons"] if r["rule"] == "cost_fit")
    assert (cost_fit["gpu_type"], cost_fit["usable_gib"]) == (None, None)  # about the plan
    assert [g["gpu_type"] for g in verdict["memory"]["groups"]] == ["H100", "H200"]
    assert verdict["memory"]["gpu_type"] == "H100"
    assert [(g["gpu_type"], g["compute_usd"]) for g in verdict["cost"]["groups"]] == [
        ("H200", "51.867"),  # 11.3 hours at $4.59
        ("H100", "30.397"),  # at $2.69
    ]
    [kept] = client.get(plans).json()["items"]
    assert kept["reasons"] == verdict["reasons"]

    # on a pod: the H100 has 60 GiB free, room for its own model's 58.6 but not the H200's 61.7
    pod = gov.pod(budget)
    h200 = replace(gpu_sample(util=0, used_gib=2, index=0), name="NVIDIA H200")
    h200 = replace(h200, memory_total_bytes=141 * GIB, memory_free_bytes=139 * GIB)
    gov.report(pod, h200, gpu_sample(util=0, used_gib=20, index=1))
    placed = ok(client.post(plans, json=doc, params={"pod_id": pod}), 201)
    placement = next(r for r in placed["reasons"] if r["rule"] == "placement")
    assert placed["verdict"] == placement["verdict"] == "go", placement["message"]
    judged = {g["uuid"]: (g["judged_as"], g["fits"]) for g in placement["evidence"]["gpus"]}
    assert judged == {"GPU-0": ("H200", True), "GPU-1": ("H100", True)}
    assert "1 x H100 at 58.6 GiB: GPU 1 GPU-1 (60.0 GiB free)" in placement["message"]
