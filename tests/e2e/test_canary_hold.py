"""A canary_only plan over real HTTP, with the server sampling a fake NVML: the run is held to
its canary; a measured peak under the threshold releases training only once the canary has
shown what the verdict asks (its optimizer steps, then an eval batch and an acknowledged
checkpoint), its reason `canary-hold` the while; a peak over it stops the canary on the
measurement (`canary-over`), long before its spend cap.

The plan models 62.6 GiB per GPU on an H100 (79.1 GiB usable), up to 73.9 GiB with its
family's measured error (93%, canary_only); training is released under 75.1 GiB (95%). The
fake pod bills $1 a second, the canary may spend $10.31.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import httpx
import pytest

from tests.e2e.conftest import (
    ServerFactory,
    SimulatedJob,
    create_run,
    declare_budget,
    ok,
    utcnow,
    wait_for,
    wait_pod_stopped,
)
from tests.plans import variant

pytestmark = [pytest.mark.e2e, pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)]

H100_CANARY_ONLY = {
    "hardware.gpu_type": "H100",
    "hardware.usable_mib_per_gpu": 81559,
    "training.ce_impl": "liger_flce",
    "memory_per_gpu_gib.logits_peak": 30,  # 62.6 GiB modeled, 73.9 on the upper edge: 93%
}


def held_run(operator: httpx.Client) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    budget = declare_budget(operator, "1000")
    doc = variant({"hardware.rate_quoted_at": utcnow().date().isoformat(), **H100_CANARY_ONLY})
    plan = ok(operator.post(f"/v1/budgets/{budget['id']}/plans", json=doc), 201)
    assert plan["verdict"] == "canary_only"
    body = {"provider": "fake", "provider_ref": "pod-1", "local": True, "plan_id": plan["id"]}
    pod = ok(operator.post(f"/v1/budgets/{budget['id']}/pods", json=body), 201)
    run = create_run(operator, budget["id"], pod["id"], heartbeat_timeout_s=30)
    return plan, pod, run


def test_a_canary_whose_peak_fits_is_released_after_what_its_verdict_asks(
    start_server: ServerFactory,
) -> None:
    server = start_server(GOVERNOR_FAKE_NVML="healthy", GOVERNOR_TELEMETRY_INTERVAL_S="0.3")
    with server.client() as operator:
        plan, pod, run = held_run(operator)
        plans = f"/v1/budgets/{plan['budget_id']}/plans"
        with SimulatedJob(server.url, run, on_stop="ack", phase="canary", max_s=120) as job:
            wait_for(lambda: job.step >= 6, "the canary's optimizer steps, and more")
            job.phase = "evaluation"  # its eval batch
            held = len(job.replies)
            wait_for(lambda: len(job.replies) > held + 10, "beats through the eval batch")
            assert ok(operator.get(plans))["items"][-1]["canary_released_at"] is None
            job.phase = "canary"
            job.save_next = True  # and its checkpoint
            wait_for(lambda: job.replies[-1]["reason"] is None, "training released", timeout_s=60)
            before = job.replies[
                : next(i for i, r in enumerate(job.replies) if r["reason"] is None)
            ]
            assert before and all(
                (r["action"], r["reason"]) == ("continue", "canary-hold") for r in before
            )
            job.phase = "training"
            trained = len(job.replies)
            wait_for(lambda: len(job.replies) > trained + 20, "more training beats")
            assert all(r["action"] == "continue" for r in job.replies)
        listed = ok(operator.get(plans))["items"]
        assert listed[-1]["canary_released_by"] == "by telemetry"
        assert 55 < listed[-1]["canary_peak_gib"] < 75.1  # the healthy card holds 60 GiB
        assert job.saved_at and job.saved_at[0] >= 2  # its one checkpoint, after its steps
        assert ok(operator.get(f"/v1/pods/{pod['id']}"))["state"] == "running"


def test_a_canary_over_the_threshold_is_stopped_on_the_measurement(
    start_server: ServerFactory,
) -> None:
    server = start_server(GOVERNOR_FAKE_NVML="near-oom", GOVERNOR_TELEMETRY_INTERVAL_S="0.3")
    with server.client() as operator:
        plan, pod, run = held_run(operator)
        with SimulatedJob(server.url, run, on_stop="ack", phase="canary", max_s=120) as job:
            job.join(timeout_s=90)  # it hears stop, saves and exits
            stopped = wait_pod_stopped(operator, pod["id"])
        [told, *_] = job.stop_replies
        assert told["reason"] == "canary-over"
        assert "over its release threshold of 75.1 GiB" in told["message"]
        assert "measured a peak of 78." in told["message"]  # the near-full card's figure
        assert stopped["stop_order"]["reason"] == "canary-over"
        assert Decimal(told["budget"]["spent_usd"]) < Decimal("10.31")  # not at its cap
        assert (
            ok(operator.get(f"/v1/budgets/{plan['budget_id']}/plans"))["items"][-1][
                "canary_released_at"
            ]
            is None
        )
