"""Teams over the API, on SQLite and PostgreSQL: the default team holds every budget declared
without one; an operator makes teams (a unique name, an IANA time zone), everyone who reads
lists and reads them; a budget is declared into a team named by id or name."""

from __future__ import annotations

from fastapi.testclient import TestClient

from governor.domain.teams import DEFAULT_TEAM_ID
from tests.integration.conftest import Governor, ok


def make(client: TestClient, name: str, **fields: str) -> dict[str, str]:
    made: dict[str, str] = ok(client.post("/v1/teams", json={"name": name, **fields}), 201)
    return made


def test_the_default_team_is_there_and_holds_budgets_declared_without_one(
    client: TestClient,
) -> None:
    [default] = ok(client.get("/v1/teams"))["items"]
    assert (default["id"], default["name"], default["time_zone"]) == (
        DEFAULT_TEAM_ID,
        "default",
        "UTC",
    )
    budget = ok(client.post("/v1/budgets", json={"name": "pilot", "ceiling_usd": "100"}), 201)
    assert budget["team_id"] == DEFAULT_TEAM_ID
    assert ok(client.get(f"/v1/budgets/{budget['id']}"))["team_id"] == DEFAULT_TEAM_ID


def test_an_operator_makes_teams_read_back_by_id_and_listed_oldest_first(
    client: TestClient, gov: Governor
) -> None:
    vision = make(client, " vision ", time_zone="Europe/Berlin", note="the vision group")
    assert (vision["name"], vision["time_zone"]) == ("vision", "Europe/Berlin")
    assert vision["id"].startswith("team_")
    gov.clock.advance(1)
    nlp = make(client, "nlp")
    assert nlp["time_zone"] == "UTC"
    assert ok(client.get(f"/v1/teams/{vision['id']}")) == vision
    listed = ok(client.get("/v1/teams", params={"limit": 2}))
    assert [t["id"] for t in listed["items"]] == [DEFAULT_TEAM_ID, vision["id"]]
    rest = ok(client.get("/v1/teams", params={"cursor": listed["next_cursor"]}))
    assert [t["id"] for t in rest["items"]] == [nlp["id"]] and rest["next_cursor"] is None
    made = ok(client.get("/v1/events", params={"subject": f"team:{vision['id']}"}))["items"]
    assert [e["evidence"]["time_zone"] for e in made] == ["Europe/Berlin"]


def test_a_team_name_is_unique_and_a_time_zone_must_be_an_iana_name(client: TestClient) -> None:
    vision = make(client, "vision")
    taken = client.post("/v1/teams", json={"name": "vision"})
    assert taken.status_code == 409 and vision["id"] in taken.json()["error"]["message"]
    for zone in ("Mars/Olympus", "CEST", "", "../etc/passwd"):
        refused = client.post("/v1/teams", json={"name": "nlp", "time_zone": zone})
        assert refused.status_code == 422, (zone, refused.text[:300])
    assert client.get("/v1/teams/team_nobody").status_code == 404


def test_a_budget_is_declared_into_the_team_named_by_id_or_name(client: TestClient) -> None:
    vision = make(client, "vision")
    by_name = client.post("/v1/budgets", json={"name": "a", "ceiling_usd": "10", "team": "vision"})
    by_id = client.post(
        "/v1/budgets", json={"name": "b", "ceiling_usd": "10", "team": vision["id"]}
    )
    assert ok(by_name, 201)["team_id"] == ok(by_id, 201)["team_id"] == vision["id"]
    unknown = client.post("/v1/budgets", json={"name": "c", "ceiling_usd": "10", "team": "nlp"})
    assert unknown.status_code == 404 and "nlp" in unknown.json()["error"]["message"]
    names = sorted(b["name"] for b in ok(client.get("/v1/budgets"))["items"])
    assert names == ["a", "b"]  # the refused declaration wrote nothing
