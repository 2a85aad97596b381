"""Writes a job can flood, on SQLite and PostgreSQL: heartbeats, events and extension requests
past their token's limit are 429 with Retry-After and counted in /metrics; identical events
fold into one with a count (in the API, the report and the dashboard's JSON); a job has at
most one extension request pending."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from governor.app import create_app
from governor.services import events
from governor.services.security import tokens
from governor.services.security.write_limits import WriteKind, WriteLimiter
from governor.settings import load_settings
from tests.integration.api_scene import pilot
from tests.integration.conftest import Governor

OPERATOR = "write-limits-operator"
LIMITS = {WriteKind.HEARTBEAT: 5, WriteKind.EVENT: 50, WriteKind.EXTENSION: 3}


@dataclass
class World:
    gov: Governor
    client: TestClient
    budget: str
    pod: str
    run: str
    job: dict[str, str]  # the job token's header


def ok(response: httpx.Response, status: int = 200) -> Any:
    assert response.status_code == status, response.text[:500]
    return response.json()


@pytest.fixture
def world(gov: Governor, migrated_url: str) -> Iterator[World]:
    with gov.session() as session:
        tokens.bootstrap_operator(session, OPERATOR, gov.clock.now())
    clock = gov.clock
    limiter = WriteLimiter(LIMITS, monotonic=lambda: clock.now().timestamp())
    ctx = replace(gov.ctx, write_limits=limiter)
    settings = load_settings(database_url=migrated_url, scheduler_enabled=False)
    with TestClient(
        create_app(settings, ctx), headers={"Authorization": f"Bearer {OPERATOR}"}
    ) as client:
        made = pilot(client, "b")
        job = {"Authorization": f"Bearer {made['job']}"}
        yield World(gov, client, made["budget"], made["pod"], made["run"], job)


def beat(world: World, step: int, headers: dict[str, str] | None = None) -> httpx.Response:
    return world.client.post(
        f"/v1/runs/{world.run}/heartbeat", json={"step": step}, headers=headers or world.job
    )


def refused_writes(world: World) -> dict[str, float]:
    text = world.client.get("/metrics").text
    prefix = "governor_writes_refused_total{kind="
    return {
        line[len(prefix) + 1 : line.index('"}')]: float(line.split()[-1])
        for line in text.splitlines()
        if line.startswith(prefix)
    }


def test_heartbeats_past_the_limit_are_429_until_the_minute_is_over(world: World) -> None:
    for step in range(LIMITS[WriteKind.HEARTBEAT]):
        ok(beat(world, step))
    world.gov.clock.advance(15)
    response = beat(world, 99)
    assert response.status_code == 429, response.text
    assert response.json()["error"]["code"] == "too_many_writes"
    assert 1 <= int(response.headers["Retry-After"]) <= 60
    assert refused_writes(world)["heartbeat"] == 1
    ok(beat(world, 99, {"Authorization": f"Bearer {OPERATOR}"}))  # another token: its own count
    world.gov.clock.advance(60)
    ok(beat(world, 100))


def test_identical_events_fold_into_one_with_a_count(world: World) -> None:
    event = {"category": "harness", "severity": "warning", "message": "data loader stalled"}
    first = ok(
        world.client.post(f"/v1/runs/{world.run}/events", json=event, headers=world.job), 201
    )
    for _ in range(9):
        world.gov.clock.advance(4)
        folded = ok(
            world.client.post(f"/v1/runs/{world.run}/events", json=event, headers=world.job), 201
        )
    assert folded["id"] == first["id"] and folded["count"] == 10
    assert folded["last_at"] > first["at"] == folded["at"]
    other = {**event, "message": "another problem"}
    assert (
        ok(world.client.post(f"/v1/runs/{world.run}/events", json=other, headers=world.job), 201)[
            "count"
        ]
        == 1
    )
    world.gov.clock.advance(events.FOLD_WINDOW_S + 1)  # quiet for longer than the window
    later = ok(
        world.client.post(f"/v1/runs/{world.run}/events", json=event, headers=world.job), 201
    )
    assert later["id"] != first["id"] and later["count"] == 1

    listed = ok(
        world.client.get(
            "/v1/events", params={"subject": f"run:{world.run}", "category": "harness"}
        )
    )["items"]
    assert [e["count"] for e in listed] == [1, 1, 10]
    report = ok(world.client.get(f"/v1/budgets/{world.budget}/report"))
    [harness] = [f for f in report["failures"] if f["category"] == "harness"]
    assert harness["count"] == 12
    markdown = world.client.get(f"/v1/budgets/{world.budget}/report", params={"format": "md"})
    assert "data loader stalled (10 times, last" in markdown.text
    status = ok(world.client.get("/v1/status"))
    assert 10 in [e["count"] for e in status["events"]]
    metrics = world.client.get("/metrics").text
    counted = (
        f'governor_events_total{{budget="{world.budget}",budget_name="b",category="harness",'
        'severity="warning"} 12.0'
    )
    assert counted in metrics


def test_twenty_concurrent_manual_stops_are_one_warning_with_a_count(world: World) -> None:
    def stop(_: int) -> int:
        response = world.client.post(f"/v1/pods/{world.pod}/stop", json={"reason": "end of day"})
        return response.status_code

    with ThreadPoolExecutor(max_workers=8) as pool:
        assert set(pool.map(stop, range(20))) == {202}
    asked = [
        e
        for e in ok(world.client.get("/v1/events", params={"subject": f"pod:{world.pod}"}))["items"]
        if e["message"].startswith("Pod stop asked by")
    ]
    assert [e["count"] for e in asked] == [20]


def test_a_job_has_one_extension_request_pending_at_a_time(world: World) -> None:
    path = f"/v1/budgets/{world.budget}/extensions"
    first = ok(
        world.client.post(path, json={"amount_usd": "50", "reason": "eval"}, headers=world.job), 201
    )
    second = world.client.post(path, json={"amount_usd": "60", "reason": "more"}, headers=world.job)
    assert second.status_code == 409
    assert first["id"] in second.json()["error"]["message"]
    ok(world.client.post(path, json={"amount_usd": "10", "reason": "ops"}), 201)  # an operator
    ok(world.client.post(f"/v1/extensions/{first['id']}/deny", json={"note": "no"}))
    ok(world.client.post(path, json={"amount_usd": "60", "reason": "more"}, headers=world.job), 201)
    third = world.client.post(path, json={"amount_usd": "1", "reason": "x"}, headers=world.job)
    assert third.status_code == 429  # the limit counts refused requests too: three a minute
    assert refused_writes(world)["extension"] == 1
