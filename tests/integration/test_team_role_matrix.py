"""The role matrix across two teams, on SQLite and PostgreSQL: every route in the OpenAPI
document, called by every kind of caller (org-wide and team-scoped operators, approvers,
viewers and gate tokens, and the job and agent tokens of two teams), gets what the table below
says: let through, refused for its role (403), or not found because the object is another
team's (404). A gate token is put in its gate's path, each caller's own there.

Every path parameter names team alpha's object; "beta" callers are scoped to the other team.
A route that takes a body is sent malformed JSON, so a caller let through learns 422 (the
refusal, if any, comes first) and nothing is changed by it; a route without one is let
through to its answer, which must be neither a refusal nor a 5xx.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import timedelta
from decimal import Decimal
from typing import Any

import httpx
from fastapi.testclient import TestClient

from governor.app import create_app
from governor.db import schema
from governor.db.tables import LaunchRow
from governor.services.security import tokens
from governor.services.security.auth_limits import AuthLimits
from governor.settings import load_settings
from tests.clock import FrozenClock
from tests.integration.conftest import make_governor
from tests.plans import variant

OPERATOR = "gov_op_team-matrix-operator"

# Who may call each route: the rule's row of EXPECTED says what each caller gets.
WHO = {
    ("GET", "/healthz"): "open",
    ("GET", "/readyz"): "open",
    ("GET", "/metrics"): "open",  # GOVERNOR_METRICS_REQUIRE_TOKEN is off by default
    ("POST", "/v1/teams"): "org operator",
    ("GET", "/v1/teams"): "read a list",
    ("GET", "/v1/teams/{team_id}"): "read",
    ("GET", "/v1/teams/{team_id}/report"): "read",
    ("POST", "/v1/teams/{team_id}/ceiling"): "org operator",
    ("POST", "/v1/teams/{team_id}/extensions"): "operate",
    ("POST", "/v1/teams/{team_id}/extensions/{extension_id}/approve"): "org decide",
    ("POST", "/v1/teams/{team_id}/extensions/{extension_id}/deny"): "org decide",
    ("GET", "/v1/costs"): "read a list",
    # the launch gates: a gate token in the path alone (each caller's own token is put there)
    ("POST", "/v1/gates/{token}/skypilot"): "gate",
    ("POST", "/v1/gates/{token}/dstack/apply_policies/on_run_apply"): "gate",
    ("POST", "/v1/gates/{token}/dstack/apply_policies/on_fleet_apply"): "gate",
    ("POST", "/v1/gates/{token}/dstack/apply_policies/on_volume_apply"): "gate",
    ("POST", "/v1/gates/{token}/dstack/apply_policies/on_gateway_apply"): "gate",
    ("GET", "/v1/launches/{launch_id}"): "operate",
    ("DELETE", "/v1/launches/{launch_id}"): "operate",
    # the claim in the body is the credential: past who is calling, a malformed body's 422
    ("POST", "/v1/runs/claim"): "open",
    # sign-in from the command line: no token asked for; here, with no identity provider,
    # starting one is 404 for everyone, and polling one answers a malformed body's 422 first
    ("POST", "/v1/signin/device"): "no identity provider",
    ("POST", "/v1/signin/device/token"): "open",
    ("POST", "/v1/budgets"): "operate on a list",
    ("GET", "/v1/budgets"): "read a list",
    ("GET", "/v1/budgets/{budget_id}"): "read",
    ("POST", "/v1/budgets/{budget_id}/close"): "operate",
    ("POST", "/v1/budgets/{budget_id}/adoption"): "operate",
    ("POST", "/v1/budgets/{budget_id}/pods"): "operate",
    ("GET", "/v1/pods"): "read a list",
    ("GET", "/v1/pods/{pod_id}"): "read",
    ("POST", "/v1/pods/{pod_id}/telemetry"): "agent of the pod",
    ("POST", "/v1/nodes/{node}/telemetry"): "agent of the node",
    ("POST", "/v1/pods/{pod_id}/stop"): "operate",
    ("POST", "/v1/pods/{pod_id}/resume"): "operate",
    ("POST", "/v1/budgets/{budget_id}/runs"): "operate",
    ("GET", "/v1/runs"): "read a list",
    ("GET", "/v1/runs/{run_id}"): "read",
    ("GET", "/v1/runs/{run_id}/metrics"): "read",
    ("POST", "/v1/runs/{run_id}/acknowledge"): "operate",
    ("POST", "/v1/runs/{run_id}/heartbeat"): "job of the run",
    ("POST", "/v1/runs/{run_id}/events"): "job of the run",
    ("POST", "/v1/budgets/{budget_id}/extensions"): "job of the budget",
    ("GET", "/v1/extensions"): "read a list",
    ("POST", "/v1/extensions/{extension_id}/approve"): "decide",
    ("POST", "/v1/extensions/{extension_id}/deny"): "decide",
    ("POST", "/v1/budgets/{budget_id}/plans"): "job of the budget",
    ("GET", "/v1/budgets/{budget_id}/plans"): "read",
    ("GET", "/v1/budgets/{budget_id}/plans/admitted"): "read",
    ("POST", "/v1/budgets/{budget_id}/plans/{plan_id}/override"): "operate",
    ("POST", "/v1/budgets/{budget_id}/plans/{plan_id}/release"): "operate",
    ("DELETE", "/v1/budgets/{budget_id}/plans/{plan_id}"): "operate",
    ("GET", "/v1/budgets/{budget_id}/report"): "read",
    ("GET", "/v1/events"): "read a list",
    ("GET", "/v1/status"): "read a list",
    ("POST", "/v1/tokens"): "operate on a list",
    ("GET", "/v1/tokens"): "operate on a list",
    ("POST", "/v1/tokens/{token_id}/revoke"): "operate",
}

# The expected table: a rule's row, one column per caller, in the order of CALLERS. "+": let
# through; 401, 403 or 404: refused so. "alpha" callers are scoped to the team whose objects
# the path names, "beta" ones to the other; "org" ones are for every team.
CALLERS = (
    "org operator", "org approver", "org viewer",
    "alpha operator", "alpha approver", "alpha viewer",
    "beta operator", "beta approver", "beta viewer",
    "alpha job", "beta job", "alpha pod agent", "beta pod agent",
    "alpha node agent", "beta node agent", "no token",
    "org gate", "alpha gate", "beta gate",
)  # fmt: skip
TABLE = """
                   org         alpha       beta        job     pod     node    none  gate
                   op  ap  vw  op  ap  vw  op  ap  vw  a   b   a   b   a   b   o   a   b
open               +   +   +   +   +   +   +   +   +   +   +   +   +   +   +   +   +   +   +
no identity provider 404 404 404 404 404 404 404 404 404 404 404 404 404 404 404 404 404 404 404
read               +   +   +   +   +   +   404 404 404 403 403 403 403 403 403 401   403 403 403
read a list        +   +   +   +   +   +   +   +   +   403 403 403 403 403 403 401   403 403 403
operate            +   403 403 +   403 403 404 403 403 403 403 403 403 403 403 401   403 403 403
operate on a list  +   403 403 +   403 403 +   403 403 403 403 403 403 403 403 401   403 403 403
org operator       +   403 403 403 403 403 403 403 403 403 403 403 403 403 403 401   403 403 403
org decide         +   +   403 403 403 403 403 403 403 403 403 403 403 403 403 401   403 403 403
decide             +   +   403 +   +   403 404 404 403 403 403 403 403 403 403 401   403 403 403
job of the run     +   403 403 +   403 403 404 403 403 +   403 403 403 403 403 401   403 403 403
job of the budget  +   403 403 +   403 403 404 403 403 +   403 403 403 403 403 401   403 403 403
agent of the pod   +   403 403 +   403 403 404 403 403 403 403 +   403 403 403 401   403 403 403
agent of the node  +   403 403 403 403 403 403 403 403 403 403 403 403 +   403 401   403 403 403
gate               403 403 403 403 403 403 403 403 403 403 403 403 403 403 403 401   +   +   +
"""


def _expected() -> dict[str, tuple[str, ...]]:
    """TABLE as {rule: what each caller gets}: a rule's name, then one cell per caller."""
    rows: dict[str, tuple[str, ...]] = {}
    for line in TABLE.strip("\n").splitlines()[2:]:
        cells = line.split()
        rule = " ".join(c for c in cells if not (c == "+" or c.isdigit()))
        rows[rule] = tuple(c for c in cells if c == "+" or c.isdigit())
    return rows


EXPECTED = _expected()


def _made(response: httpx.Response) -> Any:
    assert response.status_code == 201, response.text[:500]
    return response.json()


def _team_pilot(client: TestClient, team: str) -> dict[str, str]:
    """Team `team`, a budget of it with a fake pod on its own node and a run, and a token of
    each scoped role: their ids and tokens."""
    team_id = _made(client.post("/v1/teams", json={"name": team}))["id"]
    body = {"name": team, "ceiling_usd": "100000", "team": team}
    budget = _made(client.post("/v1/budgets", json=body))["id"]
    pod = _made(
        client.post(
            f"/v1/budgets/{budget}/pods",
            json={"provider": "fake", "provider_ref": f"pod-{team}", "node": f"node-{team}"},
        )
    )["id"]
    run = _made(
        client.post(
            f"/v1/budgets/{budget}/runs",
            json={"name": team, "pod_id": pod, "heartbeat_timeout_s": 86_400},
        )
    )
    made = {"team": team_id, "budget": budget, "pod": pod, "run": run["id"]}
    tokens_of = {
        f"{team} job": run["token"],
        f"{team} pod agent": _token(client, role="agent", pod_id=pod),
        f"{team} node agent": _token(client, role="agent", node=f"node-{team}"),
    }
    for role in ("operator", "approver", "viewer", "gate"):
        tokens_of[f"{team} {role}"] = _token(client, role=role, teams=[team])
    return {**made, **tokens_of}


def _launch(gov: Any, budget_id: str, launch_id: str) -> str:
    """An accepted launch of the budget's, as a gate would have reserved it."""
    now = gov.clock.now()
    with gov.session() as session:
        session.add(
            LaunchRow(
                id=launch_id,
                budget_id=budget_id,
                tool="skypilot",
                price_usd=Decimal("10"),
                reserved_usd=Decimal("10"),
                figures={},
                created_at=now,
                expires_at=now + timedelta(hours=1),
                claim_hash=launch_id.ljust(64, "0"),
                claim_expires_at=now + timedelta(hours=1),
            )
        )
    return launch_id


def _token(client: TestClient, **body: Any) -> str:
    token: str = _made(client.post("/v1/tokens", json=body))["token"]
    return token


@contextmanager
def _scene(url: str) -> Iterator[tuple[TestClient, dict[str, str], dict[str, str | None]]]:
    """Two teams on an empty database at `url`: the path parameters (alpha's objects; beta's
    budget, team, pod, plan and launch as `beta_budget_id`, ...) and a token for every
    caller."""
    schema.upgrade(url)
    gov = make_governor(url, FrozenClock())
    context = replace(gov.ctx, auth_limits=AuthLimits(per_source=10**9))
    with gov.session() as session:
        tokens.bootstrap_operator(session, OPERATOR, gov.clock.now())
    app = create_app(load_settings(database_url=url, scheduler_enabled=False), context)
    try:
        with TestClient(app, headers={"Authorization": f"Bearer {OPERATOR}"}) as client:
            alpha, beta = _team_pilot(client, "alpha"), _team_pilot(client, "beta")
            budget = alpha["budget"]
            extension = _made(
                client.post(
                    f"/v1/budgets/{budget}/extensions", json={"amount_usd": "10", "reason": "more"}
                )
            )["id"]
            plan = _made(client.post(f"/v1/budgets/{budget}/plans", json=variant()))["id"]
            spare = _made(client.post("/v1/tokens", json={"role": "viewer", "teams": ["alpha"]}))
            launch = _launch(gov, budget, "lch_alpha")
            theirs = _made(client.post(f"/v1/budgets/{beta['budget']}/plans", json=variant()))
            params = {
                "team_id": alpha["team"],
                "budget_id": budget,
                "pod_id": alpha["pod"],
                "run_id": alpha["run"],
                "extension_id": extension,
                "plan_id": plan,
                "token_id": spare["id"],
                "node": "node-alpha",
                "launch_id": launch,
                "beta_team_id": beta["team"],
                "beta_budget_id": beta["budget"],
                "beta_pod_id": beta["pod"],
                "beta_plan_id": theirs["id"],
                "beta_launch_id": _launch(gov, beta["budget"], "lch_beta"),
            }
            callers: dict[str, str | None] = {
                "org operator": OPERATOR,
                "org approver": _token(client, role="approver"),
                "org viewer": _token(client, role="viewer"),
                "org gate": _token(client, role="gate"),
                "no token": None,
            }
            for team in (alpha, beta):
                callers.update({k: v for k, v in team.items() if k in CALLERS})
            yield client, params, callers
    finally:
        context.engine.dispose()


def _routes() -> dict[tuple[str, str], dict[str, Any]]:
    document = create_app(load_settings(database_url="sqlite://")).openapi()
    return {
        (method.upper(), path): operation
        for path, operations in document["paths"].items()
        for method, operation in operations.items()
    }


def test_the_table_names_every_route_and_every_caller() -> None:
    assert set(_routes()) == set(WHO)
    assert set(WHO.values()) <= set(EXPECTED)
    assert all(len(row) == len(CALLERS) for row in EXPECTED.values())


def test_every_caller_gets_what_the_table_says_on_every_route(database_url: str) -> None:
    wrong: list[str] = []
    with _scene(database_url) as (client, params, callers):
        assert set(callers) == set(CALLERS)
        for (method, path), operation in _routes().items():
            row = dict(zip(CALLERS, EXPECTED[WHO[(method, path)]], strict=True))
            for caller in CALLERS:
                token = callers[caller]
                url = path.format(**{**params, "token": token or "none"})
                headers = {"Authorization": "" if token is None else f"Bearer {token}"}
                if "requestBody" in operation:
                    headers["Content-Type"] = "application/json"
                    response = client.request(method, url, content=b'{"not json', headers=headers)
                else:
                    response = client.request(method, url, headers=headers)
                got, want = response.status_code, row[caller]
                allowed = got not in (401, 403, 404) and got < 500
                if (want == "+" and not allowed) or (want != "+" and str(got) != want):
                    wrong.append(
                        f"{method} {path} as {caller}: {got}, not {want}: {response.text[:120]}"
                    )
    assert not wrong, "\n".join(wrong)
