"""A job that goes quiet is presumed dead: its pod is stopped, well before any ceiling."""

from __future__ import annotations

import httpx
import pytest

from tests.e2e.conftest import (
    GovernorServer,
    SimulatedJob,
    create_run,
    declare_budget,
    ok,
    parse_time,
    register_pod,
    wait_pod_stopped,
)

pytestmark = pytest.mark.e2e

HEARTBEAT_TIMEOUT_S = 1.0


def test_silent_job_has_its_pod_stopped_for_heartbeat_lost(
    server: GovernorServer, operator: httpx.Client
) -> None:
    budget = declare_budget(operator, "1000.00")  # far away: the ceiling must not be why
    pod = register_pod(operator, budget["id"], "pod-1")
    run = create_run(
        operator,
        budget["id"],
        pod["id"],
        heartbeat_timeout_s=HEARTBEAT_TIMEOUT_S,
        checkpoint_grace_s=1,
    )

    with SimulatedJob(server.url, run, silent_after=3) as job:
        job.join()  # three heartbeats, then nothing

    assert job.errors == []
    assert [r["action"] for r in job.replies] == ["continue"] * 3
    stopped = wait_pod_stopped(operator, pod["id"])

    order = stopped["stop_order"]
    assert order["reason"] == "heartbeat-lost"
    assert order["state"] == "stopped"
    last_beat = parse_time(ok(operator.get(f"/v1/runs/{run['id']}"))["last_heartbeat_at"])
    silence = (parse_time(order["created_at"]) - last_beat).total_seconds()
    assert silence > HEARTBEAT_TIMEOUT_S, f"stopped after only {silence:.3f} s of silence"

    assert server.cloud().pods["pod-1"].stopped_at is not None, "the cloud never stopped it"
    run_now = ok(operator.get(f"/v1/runs/{run['id']}"))
    assert run_now["directive"]["action"] == "stop"
    assert run_now["directive"]["reason"] == "heartbeat-lost"
    # The run ends in a true state: lost, and out of the heartbeat-age series.
    assert run_now["status"] == "lost" and run_now["ended_at"] is not None
    scraped = operator.get("/metrics").text
    assert f'run="{run["id"]}"' not in scraped
