"""An out-of-memory seen coming, over real HTTP, with the server sampling a fake NVML whose
card fills from 70 GiB toward its 79.2 GiB over 20 s (`near-oom:ramp_s=20`): two runs on the
pod, one whose policy says `oom_foresight: checkpoint`, one with the default (`warn`). The
first is told to save (reason `oom-foreseen`) while the card still has room; the second hears
the projection and goes on."""

from __future__ import annotations

import re

import pytest

from tests.e2e.conftest import (
    ServerFactory,
    SimulatedJob,
    create_run,
    declare_budget,
    ok,
    wait_for,
)

pytestmark = [pytest.mark.e2e, pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)]

CARD_GIB = 79.1  # the fake H100's 81,559 MiB less its 512 MiB reserve: 79.15 GiB


def test_a_run_that_would_checkpoint_first_is_told_before_the_crossing(
    start_server: ServerFactory,
) -> None:
    server = start_server(
        GOVERNOR_FAKE_NVML="near-oom:ramp_s=20", GOVERNOR_TELEMETRY_INTERVAL_S="0.3"
    )
    with server.client() as operator:
        budget = declare_budget(operator, "1000")
        body = {"provider": "fake", "provider_ref": "pod-1", "local": True}
        pod = ok(operator.post(f"/v1/budgets/{budget['id']}/pods", json=body), 201)
        told = {"oom_foresight": "checkpoint"}
        saving = create_run(
            operator,
            budget["id"],
            pod["id"],
            heartbeat_timeout_s=30,
            checkpoint_grace_s=10,
            name="saves-first",
            policy=told,
        )
        warned = create_run(
            operator,
            budget["id"],
            pod["id"],
            heartbeat_timeout_s=30,
            checkpoint_grace_s=10,
            name="warned",
        )
        with (
            SimulatedJob(server.url, saving, phase="training", max_s=90) as first,
            SimulatedJob(server.url, warned, phase="training", max_s=90) as second,
        ):
            wait_for(lambda: first.saved_at, "the first job told to save", timeout_s=60)
            wait_for(
                lambda: any(r["reason"] == "oom-foreseen" for r in second.replies),
                "the second job told of the projection",
                timeout_s=30,
            )
        [asked, *_] = [r for r in first.replies if r["action"] == "checkpoint"]
        assert asked["reason"] == "oom-foreseen"
        assert f"over the {CARD_GIB:.1f} GiB the card holds" in asked["message"]
        held = re.search(r"holds ([0-9.]+) GiB at step", asked["message"])
        assert held is not None and float(held[1]) < CARD_GIB  # told before the crossing
        assert all(r["action"] == "continue" for r in second.replies)
        assert ok(operator.get(f"/v1/runs/{saving['id']}"))["status"] == "running"
        for job in (first, second):
            assert not job.errors, job.errors
