"""Roles scoped to teams, over real HTTP on SQLite and PostgreSQL: two teams, each with a
budget, a pod and a pending extension request. A team's operator sees and acts on its own
team's alone (another team's answers 404, worded as for one that does not exist); an
approver decides extension requests and nothing else; an extension over the team's
`org_approval_over_usd` needs an org-wide approver; every decision names who took it.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.e2e.conftest import GovernorServer, assert_error, ok, register_pod
from tests.plans import variant

pytestmark = pytest.mark.e2e


def _team(operator: httpx.Client, name: str, **fields: str) -> dict[str, Any]:
    return ok(operator.post("/v1/teams", json={"name": name, **fields}), 201)


def _budget(operator: httpx.Client, name: str, team: str) -> dict[str, Any]:
    body = {"name": name, "ceiling_usd": "1000", "team": team}
    return ok(operator.post("/v1/budgets", json=body), 201)


def _extension(client: httpx.Client, budget_id: str, amount: str) -> dict[str, Any]:
    body = {"amount_usd": amount, "reason": "one more epoch"}
    return ok(client.post(f"/v1/budgets/{budget_id}/extensions", json=body), 201)


def _token(operator: httpx.Client, role: str, label: str, *teams: str) -> dict[str, Any]:
    body: dict[str, Any] = {"role": role, "label": label}
    if teams:
        body["teams"] = list(teams)
    return ok(operator.post("/v1/tokens", json=body), 201)


def _ids(response: httpx.Response) -> set[str]:
    return {item["id"] for item in ok(response)["items"]}


def test_a_teams_operator_sees_and_acts_on_its_own_team_alone(
    server: GovernorServer, operator: httpx.Client
) -> None:
    alpha, beta = _team(operator, "alpha"), _team(operator, "beta")
    mine, theirs = _budget(operator, "a-pilot", "alpha"), _budget(operator, "b-pilot", beta["id"])
    my_pod = register_pod(operator, mine["id"], "pod-a")
    their_pod = register_pod(operator, theirs["id"], "pod-b")
    my_ask, their_ask = (
        _extension(operator, mine["id"], "5"),
        _extension(operator, theirs["id"], "5"),
    )
    granted = _token(operator, "operator", "alice", "alpha")
    assert granted["teams"] == [alpha["id"]]

    with server.client(granted["token"]) as alice:
        assert _ids(alice.get("/v1/budgets")) == {mine["id"]}
        assert _ids(alice.get("/v1/pods")) == {my_pod["id"]}
        assert _ids(alice.get("/v1/extensions")) == {my_ask["id"]}
        assert _ids(alice.get("/v1/teams")) == {alpha["id"]}
        assert {b["id"] for b in ok(alice.get("/v1/status"))["budgets"]} == {mine["id"]}
        seen = {e["budget_id"] for e in ok(alice.get("/v1/events"))["items"]}
        assert seen == {mine["id"]}

        # another team's objects are not found, exactly as ones that do not exist
        missing = assert_error(alice.get("/v1/budgets/bud_nonexistent"), 404)["message"]
        hidden = assert_error(alice.get(f"/v1/budgets/{theirs['id']}"), 404)["message"]
        assert hidden == missing.replace("bud_nonexistent", theirs["id"])
        assert_error(alice.get(f"/v1/pods/{their_pod['id']}"), 404)
        assert_error(alice.get(f"/v1/budgets/{theirs['id']}/report"), 404)
        assert_error(alice.get(f"/v1/teams/{beta['id']}"), 404)
        # ... and acting on them is 404 too, whatever the action
        assert_error(alice.post(f"/v1/pods/{their_pod['id']}/stop", json={}), 404)
        assert_error(alice.post(f"/v1/extensions/{their_ask['id']}/approve", json={}), 404)
        assert_error(alice.post(f"/v1/budgets/{theirs['id']}/close", json={}), 404)
        assert_error(_declare_in(alice, "beta"), 404)
        # ... or named in a body or a query: a run, or a plan judged, on their pod
        run = {"name": "sneaky", "pod_id": their_pod["id"]}
        assert_error(alice.post(f"/v1/budgets/{mine['id']}/runs", json=run), 404)
        on_their_pod = {"pod_id": their_pod["id"]}
        plans = f"/v1/budgets/{mine['id']}/plans"
        assert_error(alice.post(plans, params=on_their_pod, json=variant()), 404)
        assert_error(alice.post("/v1/tokens", json={"role": "viewer", "teams": ["beta"]}), 404)
        # a team's operator grants tokens for its own team: by default, scoped as it is
        viewer = ok(alice.post("/v1/tokens", json={"role": "viewer", "label": "v"}), 201)
        assert viewer["teams"] == [alpha["id"]]
        assert _ids(alice.get("/v1/tokens")) == {granted["id"], viewer["id"]}
        # its own team's objects it acts on as an operator does
        approved = ok(alice.post(f"/v1/extensions/{my_ask['id']}/approve", json={}))
        assert approved["state"] == "approved"

    with server.client(viewer["token"]) as seeing:
        assert _ids(seeing.get("/v1/budgets")) == {mine["id"]}
        assert_error(seeing.get(f"/v1/budgets/{theirs['id']}"), 404)

    # the dashboard, signed in with the team's viewer token, shows its team's budget alone
    with server.client(None) as browser:
        signed_in = browser.post("/login", data={"token": viewer["token"]})
        assert signed_in.status_code == 303, signed_in.text[:300]
        page = browser.get("/status")
        assert page.status_code == 200 and "a-pilot" in page.text and "b-pilot" not in page.text
        assert browser.get(f"/status/budgets/{theirs['id']}").status_code == 404
        assert browser.get(f"/status/budgets/{mine['id']}").status_code == 200
        assert browser.get(f"/v1/budgets/{theirs['id']}/report?format=html").status_code == 404

    # the org-wide operator still sees both teams, and who approved
    assert _ids(operator.get("/v1/budgets")) == {mine["id"], theirs["id"]}
    told = ok(operator.get("/v1/events", params={"subject": f"extension:{my_ask['id']}"}))
    [decided] = [e for e in told["items"] if "approved" in e["message"]]
    assert decided["evidence"]["by"]["label"] == "alice"
    assert decided["evidence"]["by"]["teams"] == [alpha["id"]]
    assert "'alice'" in decided["message"]


def _declare_in(client: httpx.Client, team: str) -> httpx.Response:
    return client.post("/v1/budgets", json={"name": "sneaky", "ceiling_usd": "10", "team": team})


def test_an_approver_decides_but_does_nothing_else_and_big_asks_go_to_the_org(
    server: GovernorServer, operator: httpx.Client
) -> None:
    _team(operator, "gamma", org_approval_over_usd="50")
    budget = _budget(operator, "g-pilot", "gamma")
    pod = register_pod(operator, budget["id"], "pod-g")
    small, large, other = (_extension(operator, budget["id"], a) for a in ("20", "80", "10"))
    team_approver = _token(operator, "approver", "bea", "gamma")
    org_approver = _token(operator, "approver", "olga")

    with server.client(team_approver["token"]) as bea:
        assert ok(bea.post(f"/v1/extensions/{small['id']}/approve", json={}))["state"] == (
            "approved"
        )
        assert ok(bea.post(f"/v1/extensions/{other['id']}/deny", json={}))["state"] == "denied"
        refused = assert_error(bea.post(f"/v1/extensions/{large['id']}/approve", json={}), 403)
        assert "org-wide" in refused["message"] and "$50.00" in refused["message"]
        # nothing else: no stop, no resume, no close, no tokens, no budgets
        assert_error(bea.post(f"/v1/pods/{pod['id']}/stop", json={}), 403)
        assert_error(bea.post(f"/v1/budgets/{budget['id']}/close", json={}), 403)
        assert_error(bea.post("/v1/tokens", json={"role": "viewer"}), 403)
        assert_error(bea.get("/v1/tokens"), 403)
        # ... but it reads its team's figures, to decide on them
        assert _ids(bea.get("/v1/budgets")) == {budget["id"]}

    with server.client(org_approver["token"]) as olga:
        assert ok(olga.post(f"/v1/extensions/{large['id']}/approve", json={}))["state"] == (
            "approved"
        )
    assert ok(operator.get(f"/v1/pods/{pod['id']}"))["state"] == "running"
    decided = ok(operator.get("/v1/events", params={"category": "operator"}))["items"]
    by = {e["subject"]: e["evidence"]["by"]["label"] for e in decided if "by" in e["evidence"]}
    assert by[f"extension:{small['id']}"] == "bea"
    assert by[f"extension:{other['id']}"] == "bea"
    assert by[f"extension:{large['id']}"] == "olga"
