"""A team's ceiling, end to end over HTTP against a served governor, on SQLite and
PostgreSQL: a budget beyond what the team has left is refused with the figures; the team
reaching its month's ceiling has both its budgets' pods told to save, then stopped, and its
budgets stay open but held.

Two fake pods at $3600/h each (two dollars a second for the team) under two $25.00 budgets of
a team whose month is $30.00: the team's ceiling comes first, some fifteen seconds in (the
budgets' own would take 25).
"""

from __future__ import annotations

import itertools
from contextlib import ExitStack
from decimal import Decimal

import httpx
import pytest

from tests.e2e.conftest import (
    GovernorServer,
    SimulatedJob,
    create_run,
    ok,
    register_pod,
    usd,
    wait_pod_stopped,
)

pytestmark = pytest.mark.e2e

_teams = itertools.count(1)


def test_a_team_at_its_months_ceiling_stops_its_pods_after_a_save_and_holds_its_budgets(
    server: GovernorServer, operator: httpx.Client
) -> None:
    name = f"lab-{next(_teams)}"
    team = ok(operator.post("/v1/teams", json={"name": name}), 201)
    ceiling = {"ceiling_usd": "30.00", "period": "month", "reason": "the lab's GPU month"}
    ok(operator.post(f"/v1/teams/{team['id']}/ceiling", json=ceiling))

    too_big = operator.post(
        "/v1/budgets", json={"name": f"{name}-big", "ceiling_usd": "35.00", "team": name}
    )
    assert too_big.status_code == 409, too_big.text
    message = too_big.json()["error"]["message"]
    assert "a budget's ceiling of $35.00 is more than the team has left this period" in message
    assert "$30.00 = ceiling $30.00 - spent $0.00" in message

    budgets = [
        ok(
            operator.post(
                "/v1/budgets",
                json={"name": f"{name}-{i}", "ceiling_usd": "25.00", "team": team["id"]},
            ),
            201,
        )
        for i in range(2)
    ]
    pods = [register_pod(operator, b["id"], f"{name}-pod-{i}") for i, b in enumerate(budgets)]
    runs = [
        create_run(operator, b["id"], p["id"], heartbeat_timeout_s=5, checkpoint_grace_s=1)
        for b, p in zip(budgets, pods, strict=True)
    ]
    with ExitStack() as stack:
        jobs = [stack.enter_context(SimulatedJob(server.url, r, on_stop="ack")) for r in runs]
        for job in jobs:
            job.join()  # each exits by itself once it has acknowledged its stop
        stopped = [wait_pod_stopped(operator, p["id"]) for p in pods]

    for job, pod in zip(jobs, stopped, strict=True):
        assert job.errors == []
        assert job.stop_replies, "the job never heard stop"
        assert job.stop_replies[0]["reason"] == "team-ceiling"
        assert job.stop_replies[0]["deadline"] is not None  # time to save first
        assert pod["stop_order"]["reason"] == "team-ceiling"
        assert job.ack is not None
        assert pod["stop_order"]["ack_checkpoint"] == job.ack["checkpoint"]
    for budget in budgets:
        read = ok(operator.get(f"/v1/budgets/{budget['id']}"))
        assert read["state"] == "open"
        assert usd(read["spent_usd"]) < Decimal("25.00")
    period = ok(operator.get(f"/v1/teams/{team['id']}"))["period"]
    assert period["held"] is True
    assert usd(period["spent_usd"]) <= Decimal("30.00")

    held = operator.post(
        f"/v1/budgets/{budgets[0]['id']}/pods", json={"provider": "fake", "provider_ref": "late"}
    )
    assert held.status_code == 409, held.text
    assert "reached its ceiling this period: no new pod" in held.json()["error"]["message"]
