"""Tokens that end, over real HTTP: expiry, revocation (never of the bootstrap token, which is
rotated), failed authentications limited per address (API and sign-in page), and a job
token that acts for its run only while the run lives (a late stop acknowledgement excepted).
"""

from __future__ import annotations

from datetime import timedelta

import httpx
import pytest

from tests.e2e.conftest import (
    GovernorServer,
    ServerFactory,
    assert_error,
    create_run,
    declare_budget,
    ok,
    register_pod,
    utcnow,
    wait_for,
    wait_pod_stopped,
)

pytestmark = pytest.mark.e2e


def test_tokens_are_listed_revoked_and_expire(
    server: GovernorServer, operator: httpx.Client
) -> None:
    expires = (utcnow() + timedelta(seconds=3)).isoformat()
    short = ok(operator.post("/v1/tokens", json={"role": "viewer", "expires_at": expires}), 201)
    kept = ok(operator.post("/v1/tokens", json={"role": "viewer", "label": "grafana"}), 201)
    with server.client(short["token"]) as viewer:
        ok(viewer.get("/v1/budgets"))
        expired = wait_for(
            lambda: viewer.get("/v1/budgets").status_code == 401 or None, "the token to expire"
        )
        assert expired
        assert "expired" in assert_error(viewer.get("/v1/budgets"), 401)["message"]

    listed = {t["id"]: t for t in ok(operator.get("/v1/tokens"))["items"]}
    assert listed[kept["id"]]["label"] == "grafana" and listed[kept["id"]]["revoked_at"] is None
    assert "token" not in listed[kept["id"]] and "token_hash" not in listed[kept["id"]]
    [bootstrap] = [t for t in listed.values() if t["bootstrap"]]
    refused = assert_error(operator.post(f"/v1/tokens/{bootstrap['id']}/revoke"), 409)
    assert "rotate-bootstrap" in refused["message"]

    with server.client(kept["token"]) as viewer:
        ok(viewer.get("/v1/budgets"))
        revoked = ok(operator.post(f"/v1/tokens/{kept['id']}/revoke"))
        assert revoked["revoked_at"] is not None
        assert "revoked" in assert_error(viewer.get("/v1/budgets"), 401)["message"]
    past = (utcnow() - timedelta(minutes=1)).isoformat()
    assert_error(operator.post("/v1/tokens", json={"role": "viewer", "expires_at": past}), 422)


def test_failed_authentications_are_limited_per_address(start_server: ServerFactory) -> None:
    server = start_server(GOVERNOR_AUTH_FAILURES_PER_MINUTE="5")
    with server.client("gov_op_guess") as guesser:
        statuses = [guesser.get("/v1/budgets").status_code for _ in range(5)]
        assert statuses == [401] * 5
        limited = guesser.get("/v1/budgets")
    assert limited.status_code == 429
    assert 1 <= int(limited.headers["Retry-After"]) <= 60
    assert assert_error(limited, 429)["code"] == "too_many_attempts"
    with httpx.Client(base_url=server.url, timeout=30) as page:
        answer = page.post("/login", data={"token": "gov_view_guess"})
    assert answer.status_code == 429 and "Retry-After" in answer.headers


def test_a_job_acts_for_its_run_only_while_it_lives(
    server: GovernorServer, operator: httpx.Client
) -> None:
    budget = declare_budget(operator, "1000")
    pod = register_pod(operator, budget["id"])
    run = create_run(operator, budget["id"], pod["id"], checkpoint_grace_s=30)
    with server.client(run["token"]) as job:
        beat = f"/v1/runs/{run['id']}/heartbeat"
        ok(job.post(beat, json={"step": 10}))
        ok(operator.post(f"/v1/pods/{pod['id']}/stop", json={"reason": "end of day"}), 202)
        told = ok(job.post(beat, json={"step": 11}))
        assert told["action"] == "stop"
        ack = {"step": 11, "status": "stopping", "checkpoint": {"step": 11, "path": "/ws/c-11"}}
        ok(job.post(beat, json=ack))
        wait_pod_stopped(operator, pod["id"])
        assert ok(operator.get(f"/v1/runs/{run['id']}"))["status"] == "stopped"

        late = assert_error(job.post(beat, json={"step": 12}), 409)
        assert late["code"] == "run_ended" and "should stop" in late["message"]
        again = ok(job.post(beat, json={**ack, "checkpoint": {"step": 12, "path": "/ws/c-12"}}))
        assert again["action"] == "stop"  # a late acknowledgement is still taken
        event = {"category": "harness", "message": "late"}
        assert_error(job.post(f"/v1/runs/{run['id']}/events", json=event), 409)
        more = {"amount_usd": "5", "reason": "late"}
        assert_error(job.post(f"/v1/budgets/{budget['id']}/extensions", json=more), 409)
    after = ok(operator.get(f"/v1/runs/{run['id']}"))
    assert after["status"] == "stopped" and after["checkpoint"]["step"] == 12
