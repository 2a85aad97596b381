"""Extensions: a pending request never delays a stop; an operator decides once, exactly once."""

from __future__ import annotations

import threading
from collections import Counter
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
    wait_pod_stopped,
)

pytestmark = pytest.mark.e2e

CONCURRENT_APPROVALS = 20


def request_extension(client: httpx.Client, budget_id: str, amount_usd: str, reason: str) -> dict:
    body = {"amount_usd": amount_usd, "reason": reason}
    return ok(client.post(f"/v1/budgets/{budget_id}/extensions", json=body), 201)


def approve_all_at_once(server: GovernorServer, extension_id: str, count: int) -> list[int]:
    """`count` operators approve the same request at the same instant, each on its own line."""
    barrier = threading.Barrier(count, timeout=60)
    statuses: list[int] = []
    failures: list[BaseException] = []
    lock = threading.Lock()

    def approve() -> None:
        try:
            with server.client() as client:
                barrier.wait()
                response = client.post(f"/v1/extensions/{extension_id}/approve", json={})
            if response.status_code == 409:
                assert_error(response, 409)
            with lock:
                statuses.append(response.status_code)
        except BaseException as exc:  # reported below, in the test's thread
            with lock:
                failures.append(exc)

    threads = [threading.Thread(target=approve) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not any(t.is_alive() for t in threads), "an approval never came back"
    assert failures == []
    return statuses


def test_pending_extension_does_not_delay_the_stop_and_is_decided_exactly_once(
    server: GovernorServer, operator: httpx.Client
) -> None:
    budget = declare_budget(operator, "5.00")
    pod = register_pod(operator, budget["id"], "pod-1")
    run = create_run(operator, budget["id"], pod["id"], heartbeat_timeout_s=5, checkpoint_grace_s=1)

    with SimulatedJob(server.url, run, on_stop="ack") as job:
        with server.client(run["token"]) as job_client:
            pending = request_extension(job_client, budget["id"], "10", "need 10 more minutes")
        assert pending["state"] == "pending"
        assert pending["requested_by"] == "job"
        assert pending["run_id"] == run["id"]
        job.join()
        stopped = wait_pod_stopped(operator, pod["id"])

    # The stop came at the declared ceiling while the request sat there, undecided.
    assert job.errors == []
    assert job.stop_replies[0]["reason"] == "ceiling"
    assert stopped["stop_order"]["reason"] == "ceiling"
    assert job.stop_replies[0]["budget"]["effective_ceiling_usd"] == "5.00"
    before = get_budget(operator, budget["id"])
    assert before["effective_ceiling_usd"] == "5.00"
    assert usd(before["spent_usd"]) <= Decimal("5.00")
    still = ok(operator.get("/v1/extensions", params={"budget_id": budget["id"]}))["items"]
    assert [(e["id"], e["state"]) for e in still] == [(pending["id"], "pending")]

    approved = ok(operator.post(f"/v1/extensions/{pending['id']}/approve", json={"note": "ok"}))
    assert approved["state"] == "approved"
    assert get_budget(operator, budget["id"])["effective_ceiling_usd"] == "15.00"

    for verb in ("approve", "deny"):
        assert_error(operator.post(f"/v1/extensions/{pending['id']}/{verb}", json={}), 409)
    assert get_budget(operator, budget["id"])["effective_ceiling_usd"] == "15.00"

    fresh = request_extension(operator, budget["id"], "2.50", "one more evaluation pass")
    statuses = approve_all_at_once(server, fresh["id"], CONCURRENT_APPROVALS)

    assert Counter(statuses) == {200: 1, 409: CONCURRENT_APPROVALS - 1}
    after = get_budget(operator, budget["id"])
    assert usd(after["effective_ceiling_usd"]) == Decimal("17.50")
    assert usd(after["approved_extensions_usd"]) == Decimal("12.50")
    decided = ok(operator.get("/v1/extensions", params={"budget_id": budget["id"]}))["items"]
    assert {e["id"]: e["state"] for e in decided} == {
        pending["id"]: "approved",
        fresh["id"]: "approved",
    }
    events = ok(operator.get("/v1/events", params={"subject": f"extension:{fresh['id']}"}))["items"]
    approvals = [e for e in events if "approved by the bootstrap operator token" in e["message"]]
    assert len(approvals) == 1, [e["message"] for e in events]
