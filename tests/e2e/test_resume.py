"""Stop -> extend -> resume over real HTTP: the budget is exhausted, an operator approves an
extension and resumes the pod, the job relaunched with the new token continues from its
checkpoint, and is stopped again at the new ceiling; spend never goes above it. Then the
budget is closed and its pod released once its storage is said to be deleted.

The fake pod bills $3600/h (a dollar a second), so each ceiling is reached in seconds.
"""

from __future__ import annotations

from decimal import Decimal

import httpx
import pytest

from tests.e2e.conftest import (
    GovernorServer,
    SimulatedJob,
    assert_error,
    create_run,
    declare_budget,
    get_budget,
    ok,
    register_pod,
    usd,
    utcnow,
    wait_for,
    wait_pod_stopped,
)

pytestmark = pytest.mark.e2e


def stopped_at_ceiling(
    server: GovernorServer, operator: httpx.Client, run: dict, pod_id: str, start_step: int = 0
) -> SimulatedJob:
    """The job beats from `start_step` until told to stop, saves, acknowledges and exits."""
    job = SimulatedJob(server.url, run, on_stop="ack")
    job.step = start_step
    with job:
        job.join()
        wait_pod_stopped(operator, pod_id)
    assert job.errors == [] and job.ack is not None
    assert job.stop_replies[0]["reason"] == "ceiling"
    return job


def test_an_exhausted_budget_is_extended_and_its_pod_resumed_from_the_checkpoint(
    server: GovernorServer, operator: httpx.Client
) -> None:
    budget = declare_budget(operator, "5.00")
    pod = register_pod(operator, budget["id"], "pod-1")
    run = create_run(operator, budget["id"], pod["id"], heartbeat_timeout_s=5, checkpoint_grace_s=1)
    first = stopped_at_ceiling(server, operator, run, pod["id"])
    assert first.ack is not None
    saved = first.ack["checkpoint"]
    wait_for(lambda: get_budget(operator, budget["id"])["state"] == "exhausted", "exhausted")

    refused = assert_error(operator.post(f"/v1/pods/{pod['id']}/resume", json={}), 409)
    assert "approve an extension" in refused["message"]

    extension = ok(
        operator.post(
            f"/v1/budgets/{budget['id']}/extensions",
            json={"amount_usd": "5.00", "reason": "finish the epoch"},
        ),
        201,
    )
    ok(operator.post(f"/v1/extensions/{extension['id']}/approve", json={"note": "go on"}))
    resumed = ok(operator.post(f"/v1/pods/{pod['id']}/resume", json={"reason": "extended"}))

    assert resumed["pod"]["state"] == "running"
    again = resumed["run"]
    assert (again["id"], again["attempt"], again["status"]) == (run["id"], 2, "running")
    assert again["checkpoint"]["step"] == saved["step"] == again["step"]
    assert again["checkpoint"]["path"] == saved["path"]
    assert server.cloud_pod("pod-1").stopped_at is None  # the cloud runs it again
    with server.client(run["token"]) as old:  # the first attempt's token has ended
        assert_error(old.post(f"/v1/runs/{run['id']}/heartbeat", json={"step": 1}), 401)

    relaunched = {"id": run["id"], "token": resumed["token"]}
    second = stopped_at_ceiling(server, operator, relaunched, pod["id"], start_step=saved["step"])
    assert second.replies[0]["action"] == "continue"
    assert second.ack is not None and second.ack["step"] > saved["step"]

    wait_for(lambda: get_budget(operator, budget["id"])["state"] == "exhausted", "exhausted")
    after = get_budget(operator, budget["id"])
    spent, ceiling = usd(after["spent_usd"]), usd(after["effective_ceiling_usd"])
    assert ceiling == Decimal("10.00") and spent <= ceiling, f"spent ${spent} of ${ceiling}"
    assert spent >= server.cloud_pod("pod-1").bill_usd(utcnow())
    ended = ok(operator.get(f"/v1/runs/{run['id']}"))
    assert (ended["status"], ended["attempt"]) == ("stopped", 2)
    events = ok(operator.get("/v1/events", params={"subject": f"run:{run['id']}"}))["items"]
    assert not any("restart" in e["message"] for e in events)  # continued, not restarted

    closed = ok(
        operator.post(
            f"/v1/budgets/{budget['id']}/close",
            json={"reason": "pilot over", "storage_deleted": True},
        )
    )
    assert closed["state"] == "closed" and closed["closed_at"] is not None
    released = ok(operator.get(f"/v1/pods/{pod['id']}"))
    assert released["state"] == "gone" and released["released_at"] is not None
    assert_error(operator.post(f"/v1/pods/{pod['id']}/resume", json={}), 409)
