"""Every route in the OpenAPI document, called by every caller that may not use it, on SQLite
and PostgreSQL: each is refused (401 without a valid token, 403 with one of the wrong role or
bound to another run, pod or node) before its body is read, and never a 5xx.

Who may call what is written down once, below, from docs/api.md; a route the document lists
and this table does not (or the other way round) fails the test until it is classified.
"""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from governor.app import create_app
from governor.settings import load_settings
from tests.integration.api_scene import served_scene

# Who may call each route (docs/api.md): "open" needs no token; "anyone" needs none either and
# answers what the route itself says (sign-in); "viewer" reads (operator or
# viewer); "operator" only; "job" the operator or a job for its own run or budget; "agent" the
# operator or an agent for its own pod or node; "gate" a gate token alone, carried in the path
# (`{token}`: each caller's own); "claim" no token, the claim in the body being the credential.
WHO = {
    ("GET", "/healthz"): "open",
    ("GET", "/readyz"): "open",
    ("GET", "/metrics"): "open",  # GOVERNOR_METRICS_REQUIRE_TOKEN is off by default
    # sign-in from the command line: the person proves who they are at the identity provider
    ("POST", "/v1/signin/device"): "anyone",
    ("POST", "/v1/signin/device/token"): "anyone",
    ("POST", "/v1/budgets"): "operator",
    ("GET", "/v1/budgets"): "viewer",
    ("GET", "/v1/budgets/{budget_id}"): "viewer",
    ("POST", "/v1/budgets/{budget_id}/close"): "operator",
    ("POST", "/v1/budgets/{budget_id}/adoption"): "operator",
    ("POST", "/v1/teams"): "operator",
    ("GET", "/v1/teams"): "viewer",
    ("GET", "/v1/teams/{team_id}"): "viewer",
    ("POST", "/v1/teams/{team_id}/ceiling"): "operator",
    ("GET", "/v1/teams/{team_id}/report"): "viewer",
    ("POST", "/v1/teams/{team_id}/extensions"): "operator",
    ("POST", "/v1/teams/{team_id}/extensions/{extension_id}/approve"): "operator",
    ("POST", "/v1/teams/{team_id}/extensions/{extension_id}/deny"): "operator",
    ("POST", "/v1/budgets/{budget_id}/pods"): "operator",
    ("GET", "/v1/pods"): "viewer",
    ("GET", "/v1/pods/{pod_id}"): "viewer",
    ("POST", "/v1/pods/{pod_id}/telemetry"): "agent",
    ("POST", "/v1/nodes/{node}/telemetry"): "agent",
    ("POST", "/v1/pods/{pod_id}/stop"): "operator",
    ("POST", "/v1/pods/{pod_id}/resume"): "operator",
    ("POST", "/v1/budgets/{budget_id}/runs"): "operator",
    ("GET", "/v1/runs"): "viewer",
    ("GET", "/v1/runs/{run_id}"): "viewer",
    ("GET", "/v1/runs/{run_id}/metrics"): "viewer",
    ("POST", "/v1/runs/{run_id}/acknowledge"): "operator",
    ("POST", "/v1/runs/{run_id}/heartbeat"): "job",
    ("POST", "/v1/runs/{run_id}/events"): "job",
    ("POST", "/v1/budgets/{budget_id}/extensions"): "job",
    ("GET", "/v1/extensions"): "viewer",
    ("POST", "/v1/extensions/{extension_id}/approve"): "operator",
    ("POST", "/v1/extensions/{extension_id}/deny"): "operator",
    ("POST", "/v1/budgets/{budget_id}/plans"): "job",
    ("GET", "/v1/budgets/{budget_id}/plans"): "viewer",
    ("GET", "/v1/budgets/{budget_id}/plans/admitted"): "viewer",
    ("POST", "/v1/budgets/{budget_id}/plans/{plan_id}/override"): "operator",
    ("POST", "/v1/budgets/{budget_id}/plans/{plan_id}/release"): "operator",
    ("DELETE", "/v1/budgets/{budget_id}/plans/{plan_id}"): "operator",
    ("GET", "/v1/budgets/{budget_id}/report"): "viewer",
    ("GET", "/v1/costs"): "viewer",
    ("GET", "/v1/events"): "viewer",
    ("GET", "/v1/status"): "viewer",
    ("POST", "/v1/tokens"): "operator",
    ("GET", "/v1/tokens"): "operator",
    ("POST", "/v1/tokens/{token_id}/revoke"): "operator",
    ("POST", "/v1/gates/{token}/skypilot"): "gate",
    ("POST", "/v1/gates/{token}/dstack/apply_policies/on_run_apply"): "gate",
    ("POST", "/v1/gates/{token}/dstack/apply_policies/on_fleet_apply"): "gate",
    ("POST", "/v1/gates/{token}/dstack/apply_policies/on_volume_apply"): "gate",
    ("POST", "/v1/gates/{token}/dstack/apply_policies/on_gateway_apply"): "gate",
    ("GET", "/v1/launches/{launch_id}"): "operator",
    ("DELETE", "/v1/launches/{launch_id}"): "operator",
    ("POST", "/v1/runs/claim"): "claim",
}

CALLERS = (
    "no token",
    "garbage token",
    "viewer",
    "job of another run",
    "agent of another pod",
    "agent of another node",
    "gate",
)


def expected(rule: str, caller: str, operation: dict[str, Any]) -> int:
    if rule == "anyone":  # no token asked for: the same answer for every caller, here (no
        # identity provider configured) 404, after a malformed body's 422
        return 422 if "requestBody" in operation else 404
    if rule == "open" or (rule == "viewer" and caller == "viewer"):
        return 200
    if rule == "claim" or (rule == "gate" and caller == "gate"):
        return 422  # past who is calling: the malformed body is refused
    return 401 if caller in ("no token", "garbage token") else 403


def _routes() -> dict[tuple[str, str], dict[str, Any]]:
    document = create_app(load_settings(database_url="sqlite://")).openapi()
    return {
        (method.upper(), path): operation
        for path, operations in document["paths"].items()
        for method, operation in operations.items()
    }


def test_every_route_in_the_document_has_a_rule() -> None:
    assert set(_routes()) == set(WHO)


def test_no_caller_gets_past_a_route_it_may_not_use(database_url: str) -> None:
    """A route that takes a body is sent malformed JSON: the refusal must come first."""
    wrong: list[str] = []
    with served_scene(database_url) as scene, TestClient(scene.app) as client:
        for (method, path), operation in _routes().items():
            body = {"content": b'{"not json', "headers": {"Content-Type": "application/json"}}
            for caller in CALLERS:
                token = scene.tokens[caller]
                url = path.format(**{**scene.params, "token": token or "none"})
                auth = {} if token is None else {"Authorization": f"Bearer {token}"}
                request: dict[str, Any] = body if "requestBody" in operation else {"headers": {}}
                response = client.request(
                    method, url, **{**request, "headers": {**request["headers"], **auth}}
                )
                want = expected(WHO[(method, path)], caller, operation)
                if response.status_code != want:
                    wrong.append(
                        f"{method} {path} as {caller}: {response.status_code}, not {want}: "
                        f"{response.text[:200]}"
                    )
    assert not wrong, "\n".join(wrong)
