"""A canary_only plan over real HTTP, with the server sampling a fake NVML: the run is held to
its canary; a measured peak under the threshold releases training, a peak over it keeps the
hold until the canary's spend cap stops the pod.

The plan models 48.8 GiB per GPU on an H100 (79.6 GiB usable), up to 78.1 GiB with its
family's measured error (98%, canary_only); training is released under 75.7 GiB (95%). The
fake pod bills $1 a second, the canary may spend $10.31.
"""

from __future__ import annotations

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
    "memory_per_gpu_gib.logits_peak": 16.2,
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


def test_a_canary_whose_peak_fits_is_released_to_training(start_server: ServerFactory) -> None:
    server = start_server(GOVERNOR_FAKE_NVML="healthy", GOVERNOR_TELEMETRY_INTERVAL_S="0.3")
    with server.client() as operator:
        plan, pod, run = held_run(operator)
        with SimulatedJob(server.url, run, on_stop="ack", phase="canary", max_s=120) as job:
            wait_for(lambda: job.replies, "the first answer")
            assert job.replies[0]["reason"] == "canary-hold"
            wait_for(
                lambda: job.replies[-1]["reason"] is None and job.step >= 2,
                "training released by the measured peak",
                timeout_s=60,
            )
            job.phase = "training"
            wait_for(lambda: len(job.replies) > 20, "more training beats")
            assert all(r["action"] == "continue" for r in job.replies)
        listed = ok(operator.get(f"/v1/budgets/{plan['budget_id']}/plans"))["items"]
        assert listed[-1]["canary_released_by"] == "by telemetry"
        assert 55 < listed[-1]["canary_peak_gib"] < 75.7  # the healthy card holds 60 GiB
        assert ok(operator.get(f"/v1/pods/{pod['id']}"))["state"] == "running"


def test_a_canary_over_the_threshold_is_stopped_at_its_spend_cap(
    start_server: ServerFactory,
) -> None:
    server = start_server(GOVERNOR_FAKE_NVML="near-oom", GOVERNOR_TELEMETRY_INTERVAL_S="0.3")
    with server.client() as operator:
        plan, pod, run = held_run(operator)
        with SimulatedJob(server.url, run, on_stop="ack", phase="canary", max_s=120) as job:
            job.join(timeout_s=90)  # it hears stop, saves and exits
            stopped = wait_pod_stopped(operator, pod["id"])
        assert job.stop_replies[0]["reason"] == "canary-hold"
        assert "of its $10.31 cap" in job.stop_replies[0]["message"]
        assert stopped["stop_order"]["reason"] == "canary-hold"
        assert (
            ok(operator.get(f"/v1/budgets/{plan['budget_id']}/plans"))["items"][-1][
                "canary_released_at"
            ]
            is None
        )
