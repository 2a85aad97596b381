"""The hard ceiling, end to end: the job is told to save, then the pod is stopped, volume kept.

A $5.00 ceiling and a fake pod billing $3600/h (a dollar a second), so the ceiling is
reached a few seconds in. The job checks in every 0.2 s.
"""

from __future__ import annotations

from decimal import Decimal

import httpx
import pytest

from tests.e2e.conftest import (
    GovernorServer,
    SimulatedJob,
    create_run,
    declare_budget,
    get_budget,
    ok,
    parse_time,
    register_pod,
    usd,
    utcnow,
    wait_pod_stopped,
)

pytestmark = pytest.mark.e2e

CEILING = Decimal("5.00")


def start_pilot(operator: httpx.Client) -> tuple[dict, dict, dict]:
    """A $5.00 budget, one fake pod under it, and a run that must check in every 5 s."""
    budget = declare_budget(operator, str(CEILING))
    pod = register_pod(operator, budget["id"], "pod-1")
    run = create_run(operator, budget["id"], pod["id"], heartbeat_timeout_s=5, checkpoint_grace_s=1)
    return budget, pod, run


def assert_stopped_within_ceiling_keeping_volume(
    server: GovernorServer, operator: httpx.Client, budget_id: str
) -> None:
    """Stopped by the cloud (the fake has no terminate), and a spend between the cloud's bill
    and the ceiling."""
    cloud = server.cloud()
    pod = cloud.pods["pod-1"]
    assert pod.stop_calls >= 1
    assert pod.stopped_at is not None
    bill = pod.bill_usd(utcnow())
    budget = get_budget(operator, budget_id)
    spent = usd(budget["spent_usd"])
    assert spent <= CEILING, f"spent ${spent} over the ${CEILING} ceiling"
    assert spent >= bill, f"metered ${spent} is less than the cloud's bill ${bill}"
    assert budget["state"] == "exhausted"


def test_ceiling_tells_the_job_to_save_then_stops_the_pod_keeping_its_volume(
    server: GovernorServer, operator: httpx.Client
) -> None:
    budget, pod, run = start_pilot(operator)

    with SimulatedJob(server.url, run, on_stop="ack") as job:
        job.join()  # it exits by itself once it has acknowledged the stop
        stopped = wait_pod_stopped(operator, pod["id"])

    assert job.errors == []
    assert job.stop_replies, "the job never heard stop"
    stop = job.stop_replies[0]
    assert stop["reason"] == "ceiling"
    assert stop["deadline"] is not None
    assert job.ack_reply is not None and job.ack_reply["action"] == "stop"  # stop stays stop

    order = stopped["stop_order"]
    assert order["reason"] == "ceiling"
    assert order["state"] == "stopped"
    assert parse_time(order["deadline"]) == parse_time(stop["deadline"])
    assert job.ack is not None
    assert order["ack_checkpoint"] == job.ack["checkpoint"]
    assert order["ack_checkpoint"]["path"] == f"/workspace/ckpt-{job.ack['step']}"
    # Save first, then stop: the provider is asked only after the job acknowledged. (The
    # order's own sent_at is the instant its pass began, which may precede a concurrent
    # ack by milliseconds; the cloud's clock says when the call was really made.)
    assert order["acked_at"] is not None and order["sent_at"] is not None
    cloud_pod = server.cloud_pod("pod-1")
    assert cloud_pod.stop_requested_at is not None
    assert parse_time(cloud_pod.stop_requested_at) >= parse_time(order["acked_at"])

    run_now = ok(operator.get(f"/v1/runs/{run['id']}"))
    assert run_now["checkpoint"]["path"] == job.ack["checkpoint"]["path"]
    assert_stopped_within_ceiling_keeping_volume(server, operator, budget["id"])


def test_job_that_ignores_stop_is_stopped_anyway_once_the_deadline_passes(
    server: GovernorServer, operator: httpx.Client
) -> None:
    budget, pod, run = start_pilot(operator)

    with SimulatedJob(server.url, run, on_stop="ignore") as job:
        stopped = wait_pod_stopped(operator, pod["id"])

    assert job.errors == []
    actions = [r["action"] for r in job.replies]
    assert "stop" in actions, "the job never heard stop"
    first_stop = actions.index("stop")
    assert all(a == "stop" for a in actions[first_stop:]), "a stop directive was taken back"

    order = stopped["stop_order"]
    assert order["reason"] == "ceiling"
    assert order["acked_at"] is None
    assert order["ack_checkpoint"] is None
    # Nobody saved, so the governor waited for the deadline, and not a moment less.
    assert parse_time(order["sent_at"]) >= parse_time(order["deadline"])

    events = ok(operator.get("/v1/events", params={"budget_id": budget["id"], "limit": 1000}))[
        "items"
    ]
    deadline_passed = [
        e
        for e in events
        if e["evidence"].get("stop_order") == order["id"] and "deadline passed" in e["message"]
    ]
    assert len(deadline_passed) == 1, [e["message"] for e in events]
    assert deadline_passed[0]["severity"] == "warning"
    assert_stopped_within_ceiling_keeping_volume(server, operator, budget["id"])
