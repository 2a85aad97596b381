"""Names people type, on SQLite and PostgreSQL: a budget's name is unique among the budgets
not closed and a pod's within its budget (409 saying which holds it, also when two
declarations race); the list routes find budgets, pods and runs by name; the event log
filters by a minimum severity."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import httpx
from fastapi.testclient import TestClient

from governor.domain.model import Category, Severity
from governor.services import events
from tests.integration.api_scene import pilot
from tests.integration.conftest import Governor, ok


def conflict(response: httpx.Response) -> str:
    assert response.status_code == 409, response.text[:500]
    return str(response.json()["error"]["message"])


def declare(client: TestClient, name: str) -> httpx.Response:
    return client.post("/v1/budgets", json={"name": name, "ceiling_usd": "100"})


def named(client: TestClient, path: str, **params: str) -> list[str]:
    """The ids found, sorted (the clock stands still: all were made at the same instant)."""
    return sorted(found["id"] for found in ok(client.get(path, params=params))["items"])


def test_a_budget_name_is_taken_until_its_budget_closes(client: TestClient) -> None:
    first = ok(declare(client, "llama-lora-pilot"), 201)
    message = conflict(declare(client, " llama-lora-pilot "))  # the name is stripped
    assert first["id"] in message and "choose another name" in message
    ok(client.post(f"/v1/budgets/{first['id']}/close", json={}))
    second = ok(declare(client, "llama-lora-pilot"), 201)
    assert named(client, "/v1/budgets", name="llama-lora-pilot") == sorted(
        [first["id"], second["id"]]
    )
    assert named(client, "/v1/budgets", name="llama") == []  # the whole name, not a part


def test_budgets_declared_at_once_under_one_name_make_one(client: TestClient) -> None:
    with ThreadPoolExecutor(max_workers=8) as pool:
        statuses = sorted(pool.map(lambda _: declare(client, "race").status_code, range(8)))
    assert statuses == [201] + [409] * 7
    assert len(named(client, "/v1/budgets", name="race")) == 1


def test_a_pod_is_named_after_its_reference_unless_named_and_once_per_budget(
    client: TestClient,
) -> None:
    a, b = pilot(client, "a"), pilot(client, "b")  # each with pod "pod-a" / "pod-b"
    assert ok(client.get(f"/v1/pods/{a['pod']}"))["name"] == "pod-a"
    pods = f"/v1/budgets/{a['budget']}/pods"
    gpu = ok(client.post(pods, json={"provider": "fake", "provider_ref": "x1", "name": "gpu"}), 201)
    assert (gpu["name"], gpu["provider_ref"]) == ("gpu", "x1")
    message = conflict(
        client.post(pods, json={"provider": "fake", "provider_ref": "x2", "name": "gpu"})
    )
    assert gpu["id"] in message and "another name" in message
    message = conflict(
        client.post(pods, json={"provider": "fake", "provider_ref": "x3", "name": "pod-a"})
    )
    assert a["pod"] in message
    other = ok(
        client.post(
            f"/v1/budgets/{b['budget']}/pods",
            json={"provider": "fake", "provider_ref": "x4", "name": "gpu"},
        ),
        201,
    )
    assert named(client, "/v1/pods", name="gpu") == sorted([gpu["id"], other["id"]])
    assert named(client, "/v1/pods", name="gpu", budget_id=b["budget"]) == [other["id"]]
    assert named(client, "/v1/pods", budget_id=a["budget"]) == sorted([a["pod"], gpu["id"]])
    assert ok(client.get("/v1/pods", params={"name": "gpu"}))["items"][0]["spent_usd"] == "0.00"


def test_runs_are_listed_by_budget_name_and_status(client: TestClient) -> None:
    a, b = pilot(client, "a"), pilot(client, "b")  # runs named "a" and "b"
    both = sorted([a["run"], b["run"]])
    assert named(client, "/v1/runs") == both
    assert named(client, "/v1/runs", budget_id=b["budget"]) == [b["run"]]
    assert named(client, "/v1/runs", name="a") == [a["run"]]
    assert named(client, "/v1/runs", status="running") == both
    ok(
        client.post(
            f"/v1/runs/{a['run']}/heartbeat",
            json={"step": 3, "status": "finished"},
            headers={"Authorization": f"Bearer {a['job']}"},
        )
    )
    assert named(client, "/v1/runs", status="running") == [b["run"]]
    assert named(client, "/v1/runs", status="finished") == [a["run"]]
    assert client.get("/v1/runs", params={"status": "asleep"}).status_code == 422


def test_events_filter_by_a_severity_or_by_a_minimum_severity(
    client: TestClient, gov: Governor
) -> None:
    budget = ok(declare(client, "severities"), 201)["id"]
    with gov.session() as session:
        for severity in (Severity.CRITICAL, Severity.INFO, Severity.WARNING):
            events.record(
                session,
                gov.clock.now(),
                severity,
                Category.GOVERNOR,
                f"budget:{budget}",
                f"a {severity.value} event",
                budget_id=budget,
            )

    def severities(**params: str) -> list[str]:
        found = ok(client.get("/v1/events", params={"budget_id": budget, **params}))["items"]
        return sorted({e["severity"] for e in found})

    assert severities(min_severity="warning") == ["critical", "warning"]
    assert severities(min_severity="critical") == ["critical"]
    assert severities(min_severity="info") == ["critical", "info", "warning"]
    assert severities(severity="warning") == ["warning"]
    assert client.get("/v1/events", params={"min_severity": "loud"}).status_code == 422
