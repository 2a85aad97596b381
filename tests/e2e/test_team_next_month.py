"""A team's next month opens it again, over real HTTP on SQLite and PostgreSQL.

The real app, built by the composition root with its scheduler running, is served by uvicorn
on a TCP port of 127.0.0.1 from a thread of this process, so that its clock is the test's:
the months come and go when the test says. A team in Europe/Berlin with a $1.00 month has
two $1.00 budgets, each with a $3.60/h fake pod running a job: the team's committed spend
reaches 90% of its month, then its ceiling; each job is asked to save, then told to stop with
time to save, and its pod stopped the preserving way once it acknowledged. The team is held:
no new pod, run or resume. The clock moves past the team's month boundary (23:00 UTC on the
last day of January, midnight in Berlin); the scheduler's next enforcement pass clears the
hold, a new pod and run are taken, and nothing was resumed by itself. The test calls no
function of the governor's: the passes are the scheduler's.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import pytest

from governor.app import create_app
from governor.bootstrap import bootstrap_operator, build_context
from governor.cli.in_thread import in_thread
from governor.db import schema
from governor.domain.ports import SystemClock
from governor.services.replica.leadership import Lease
from governor.settings import load_settings
from tests.clock import FrozenClock
from tests.e2e.conftest import assert_error, http_client, ok, wait_for

pytestmark = pytest.mark.e2e

OPERATOR = "e2e-team-month-operator"
LATE_JANUARY = datetime(2026, 1, 31, 21, 0, tzinfo=UTC)  # 22:00 in Berlin
BERLIN_FEBRUARY = datetime(2026, 1, 31, 23, 0, tzinfo=UTC)  # midnight in Berlin
GRACE_S = 60


@dataclass(frozen=True)
class Served:
    """The governor served from this process, its clock the test's."""

    url: str
    clock: FrozenClock


@pytest.fixture
def served(database_url: str, tmp_path: Path) -> Iterator[Served]:
    schema.upgrade(database_url)
    clock = FrozenClock(LATE_JANUARY)
    settings = load_settings(
        database_url=database_url,
        operator_token=OPERATOR,
        enforce_interval_s=0.1,
        scheduler_enabled=True,
        fake_hourly_rate_usd=Decimal("3.60"),
        fake_stop_latency_s=1.0,
        fake_stop_failures=0,
        fake_state_file=tmp_path / "cloud.json",
        leader_lease_s=2.0,
        leader_probe_s=0.25,
    )
    ctx = build_context(settings, clock)
    # The lease keeps wall time: the test's months jump, its leadership must not lapse.
    lease = Lease(
        ctx.sessions, SystemClock(), settings.replica_id, settings.lease_s, gate=ctx.lease.gate
    )
    ctx = replace(ctx, lease=lease)
    bootstrap_operator(ctx, settings)
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    server = in_thread(create_app(settings, ctx), listener)
    try:
        assert server.start(), "the governor did not start serving"
        yield Served(f"http://127.0.0.1:{port}", clock)
    finally:
        server.stop()
        listener.close()
        ctx.engine.dispose()


@pytest.fixture
def operator(served: Served) -> Iterator[httpx.Client]:
    with http_client(served.url, OPERATOR) as client:
        yield client


def beat(served: Served, run: dict[str, Any], step: int, **more: Any) -> dict[str, Any]:
    with http_client(served.url, run["token"]) as job:
        return ok(job.post(f"/v1/runs/{run['id']}/heartbeat", json={"step": step, **more}))


def directive(served: Served, run: dict[str, Any], step: int, action: str) -> dict[str, Any]:
    """The run's heartbeat answer once the scheduler's pass has decided `action` for it."""
    return wait_for(
        lambda: (reply := beat(served, run, step))["action"] == action and reply,
        f"the pass to answer {action!r} to run {run['id']}",
    )


def team_period(operator: httpx.Client, team_id: str) -> dict[str, Any]:
    period: dict[str, Any] = ok(operator.get(f"/v1/teams/{team_id}"))["period"]
    return period


def refused(response: httpx.Response, *words: str) -> None:
    message = assert_error(response, 409)["message"]
    assert all(w in message for w in words), message


def test_a_held_teams_next_month_opens_it_again_and_resumes_nothing(
    served: Served, operator: httpx.Client
) -> None:
    team = ok(
        operator.post("/v1/teams", json={"name": "vision", "time_zone": "Europe/Berlin"}), 201
    )
    body = {"ceiling_usd": "1.00", "period": "month", "reason": "the lab's GPU month"}
    team = ok(operator.post(f"/v1/teams/{team['id']}/ceiling", json=body))
    assert (team["period"]["start"], team["period"]["end"]) == (
        "2025-12-31T23:00:00Z",
        "2026-01-31T23:00:00Z",
    )
    budgets = [
        ok(
            operator.post(
                "/v1/budgets", json={"name": name, "ceiling_usd": "1.00", "team": "vision"}
            ),
            201,
        )["id"]
        for name in ("a", "b")
    ]
    pods = [
        ok(
            operator.post(
                f"/v1/budgets/{b}/pods", json={"provider": "fake", "provider_ref": f"pod-{i}"}
            ),
            201,
        )["id"]
        for i, b in enumerate(budgets)
    ]
    run_body = {"name": "job", "heartbeat_timeout_s": 86_400, "checkpoint_grace_s": GRACE_S}
    runs = [
        ok(operator.post(f"/v1/budgets/{b}/runs", json={**run_body, "pod_id": p}), 201)
        for b, p in zip(budgets, pods, strict=True)
    ]

    # The team burns $7.20/h; stopping its pods costs some $0.12 more (60 s grace, the stop's
    # latency and the pass's reaction): $0.60 spent is $0.72 committed.
    served.clock.advance(300)
    wait_for(
        lambda: Decimal(team_period(operator, team["id"])["spent_usd"]) >= Decimal("0.60"),
        "the pass to meter the team's first five minutes",
    )
    assert [beat(served, r, 5)["action"] for r in runs] == ["continue", "continue"]

    served.clock.advance(100)  # $0.80 spent, $0.92 committed: past 90% of the month
    for run in runs:
        asked = directive(served, run, 6, "checkpoint")
        assert asked["reason"] == "pre-stop"
        assert "team's committed spend" in asked["message"]

    served.clock.advance(60)  # $0.92 spent, $1.04 committed: the month's ceiling is reached
    for run in runs:
        stop = directive(served, run, 7, "stop")
        assert stop["reason"] == "team-ceiling"
        deadline = datetime.fromisoformat(stop["deadline"])
        assert deadline == served.clock.now() + timedelta(seconds=GRACE_S)  # time to save
    assert team_period(operator, team["id"])["held"] is True

    for run in runs:  # each job saves, then acknowledges its stop
        saved = {"status": "stopping", "checkpoint": {"step": 7, "path": "/ws/ckpt-7"}}
        beat(served, run, 7, **saved)
    for pod in pods:
        wait_for(
            lambda pod=pod: (
                ok(operator.get(f"/v1/pods/{pod}"))["stop_order"]["state"] == "provider_stop_sent"
            ),
            f"the preserving stop of pod {pod} sent once its job saved",
        )
    served.clock.advance(2)  # past the fake cloud's stop latency
    for pod in pods:
        stopped = wait_for(
            lambda pod=pod: (p := ok(operator.get(f"/v1/pods/{pod}")))["state"] == "stopped" and p,
            f"pod {pod} stopped",
        )
        assert stopped["stop_order"]["reason"] == "team-ceiling"
        assert stopped["stop_order"]["ack_checkpoint"]["path"] == "/ws/ckpt-7"
    for budget in budgets:
        assert ok(operator.get(f"/v1/budgets/{budget}"))["state"] == "open"

    # held: no new pod, run or resume, each saying until when
    until = "until its next period starts at 2026-01-31 23:00 UTC"
    late_pod = {"provider": "fake", "provider_ref": "pod-late"}
    refused(operator.post(f"/v1/budgets/{budgets[0]}/pods", json=late_pod), "no new pod", until)
    late_run = {**run_body, "pod_id": pods[0]}
    refused(operator.post(f"/v1/budgets/{budgets[0]}/runs", json=late_run), "no new run", until)
    resume = {"reason": "finish the epoch"}
    refused(operator.post(f"/v1/pods/{pods[0]}/resume", json=resume), "no resume", until)

    served.clock.current = BERLIN_FEBRUARY + timedelta(minutes=1)  # February in Berlin
    told = {"subject": f"team:{team['id']}"}
    cleared = wait_for(
        lambda: [
            e
            for e in ok(operator.get("/v1/events", params=told))["items"]
            if "hold is cleared" in e["message"]
        ],
        "the scheduler's pass to clear the team's hold",
    )
    assert cleared[0]["evidence"]["period_start"] == "2026-01-31T23:00:00+00:00"
    february = team_period(operator, team["id"])
    assert (february["start"], february["held"]) == ("2026-01-31T23:00:00Z", False)
    assert Decimal(february["spent_usd"]) == Decimal(0)  # stopped pods bill no compute
    for pod in pods:  # nothing resumed by itself
        assert ok(operator.get(f"/v1/pods/{pod}"))["state"] == "stopped"
    fresh = ok(
        operator.post(
            f"/v1/budgets/{budgets[0]}/pods", json={"provider": "fake", "provider_ref": "pod-feb"}
        ),
        201,
    )
    ok(
        operator.post(f"/v1/budgets/{budgets[0]}/runs", json={**run_body, "pod_id": fresh["id"]}),
        201,
    )
