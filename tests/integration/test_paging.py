"""Every list of the API pages the same way, on SQLite and PostgreSQL: walked a page at a
time it gives every item once, in the list's order, even with an item recorded in between;
a page over the maximum size and a cursor the list did not give are 422, never a 5xx.

The scene's clock stands still, so every row shares its creation time and only the id
breaks the ties: the hardest case for a cursor.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from governor.domain.paging import MAX_LIMIT
from tests.conftest import reset_postgres
from tests.integration.api_scene import Scene, served_scene
from tests.plans import variant

Key = Callable[[dict[str, Any]], Any]


def _id(item: dict[str, Any]) -> Any:
    return item["id"]


# Each list: its path, what tells its items apart, and its order (the key and whether newest
# first); ids are random, so within one instant only their own order is checked.
LISTS: dict[str, tuple[Key, Key, bool]] = {
    "/v1/budgets": (_id, lambda b: (b["created_at"], b["id"]), False),
    "/v1/pods": (_id, _id, False),  # made in one instant: in the order of their ids
    "/v1/runs": (_id, lambda r: (r["created_at"], r["id"]), False),
    "/v1/runs/{run_id}/metrics": (
        lambda m: (m["name"], m["step"]),
        lambda m: m["at"],  # the ids of points are not shown
        False,
    ),
    "/v1/extensions": (_id, lambda e: (e["created_at"], e["id"]), False),
    "/v1/events": (_id, _id, True),
    "/v1/tokens": (_id, lambda t: (t["created_at"], t["id"]), True),
    "/v1/budgets/{budget_id}/plans": (_id, lambda p: (p["created_at"], p["id"]), False),
    "/v1/budgets/{budget_id}/plans/admitted": (
        lambda a: a["plan"]["id"],
        lambda a: (a["plan"]["created_at"], a["plan"]["id"]),
        False,
    ),
}


@pytest.fixture(
    scope="module",
    params=[
        pytest.param("sqlite", id="sqlite"),
        pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
    ],
)
def scene(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Scene, TestClient]]:
    """The API scene, with a second item in every list, on each database once."""
    url = (
        f"sqlite:///{tmp_path_factory.mktemp('db') / 'governor.db'}"
        if request.param == "sqlite"
        else reset_postgres()
    )
    with served_scene(url) as made, TestClient(made.app) as client:
        client.headers["Authorization"] = f"Bearer {made.tokens['operator']}"
        budget, run = made.params["budget_id"], made.params["run_id"]
        job = {"Authorization": f"Bearer {made.tokens['job']}"}
        for step in (1, 2):
            beat = {"step": step, "metrics": {"loss": 1.0 / step}}
            ok(client.post(f"/v1/runs/{run}/heartbeat", json=beat, headers=job))
        more = {"amount_usd": "5", "reason": "another"}
        ok(client.post(f"/v1/budgets/{budget}/extensions", json=more), 201)
        second = variant({"job_id": "pilot-second"})
        ok(client.post(f"/v1/budgets/{budget}/plans", json=second), 201)
        yield made, client


def ok(response: Any, status: int = 200) -> Any:
    assert response.status_code == status, response.text[:500]
    return response.json()


def error(response: Any) -> str:
    assert response.status_code == 422, response.text[:500]
    return str(response.json()["error"]["message"])


@pytest.mark.parametrize("path", list(LISTS))
def test_a_list_walked_a_page_at_a_time_gives_every_item_once_in_order(
    scene: tuple[Scene, TestClient], path: str
) -> None:
    made, client = scene
    url = path.format(**made.params)
    identity, order, newest_first = LISTS[path]
    whole = ok(client.get(url, params={"limit": MAX_LIMIT}))
    assert whole["next_cursor"] is None
    expected = [identity(i) for i in whole["items"]]
    assert len(expected) >= 2, f"{path}: too few items to page through"
    keys = [order(i) for i in whole["items"]]
    assert keys == sorted(keys, reverse=newest_first), f"{path}: not in its order"

    walked: list[Any] = []
    cursor = None
    for pages in range(1, len(expected) + 2):
        page = ok(client.get(url, params={"limit": 1, **({"cursor": cursor} if cursor else {})}))
        assert len(page["items"]) == 1
        walked.extend(identity(i) for i in page["items"])
        if pages == 1:  # an event recorded mid-walk: newer than any page still to come
            note = {"category": "harness", "message": f"mid-walk of {path}"}
            job = {"Authorization": f"Bearer {made.tokens['job']}"}
            ok(client.post(f"/v1/runs/{made.params['run_id']}/events", json=note, headers=job), 201)
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert walked == expected
    assert pages == len(expected)

    assert "limit" in error(client.get(url, params={"limit": MAX_LIMIT + 1}))
    assert "limit" in error(client.get(url, params={"limit": 0}))
    garbage = base64.urlsafe_b64encode(b'["events",1e999]').decode().rstrip("=")
    for cursor in ("not-a-cursor", garbage, "W10", "!!"):
        assert "cursor" in error(client.get(url, params={"cursor": cursor}))


def test_a_cursor_of_one_list_is_refused_by_another(scene: tuple[Scene, TestClient]) -> None:
    _, client = scene
    cursor = ok(client.get("/v1/events", params={"limit": 1}))["next_cursor"]
    message = error(client.get("/v1/runs", params={"cursor": cursor}))
    assert "is not a cursor of this list" in message and "leave cursor out" in message
