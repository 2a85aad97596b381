"""The OpenAPI document lists the error statuses each route can answer, every one with the one
error shape: what a route is made of says which (route.py), and a route adds what only it can
answer."""

from __future__ import annotations

from functools import cache
from typing import Any

import pytest

from governor.app import create_app
from governor.settings import load_settings

ERROR = {"$ref": "#/components/schemas/ErrorOut"}
# answered in a tool's own shape, not the API's: SkyPilot shows a refusal's plain text
TOOLS_OWN = {("POST /v1/gates/{token}/skypilot", "400"): "text/plain"}


@cache
def _operations() -> dict[str, dict[str, Any]]:
    document = create_app(load_settings(database_url="sqlite://")).openapi()
    return {
        f"{method.upper()} {path}": operation
        for path, operations in document["paths"].items()
        for method, operation in operations.items()
    }


def _statuses(operation: dict[str, Any]) -> list[int]:
    return sorted(int(status) for status in operation["responses"])


def test_every_error_response_has_the_error_shape() -> None:
    for name, operation in _operations().items():
        for status, response in operation["responses"].items():
            if (name, status) in TOOLS_OWN:
                assert list(response["content"]) == [TOOLS_OWN[(name, status)]], (name, status)
            elif int(status) >= 400 and name != "GET /readyz":  # not ready: its checks instead
                schema = response["content"]["application/json"]["schema"]
                assert schema == ERROR, (name, status)


def test_a_route_that_needs_a_token_lists_401_403_and_429() -> None:
    for name, operation in _operations().items():
        if name != "GET /metrics" and operation.get("security"):
            assert {401, 403, 429} <= set(_statuses(operation)), name


@pytest.mark.parametrize(
    ("operation", "statuses"),
    [
        ("GET /healthz", [200, 422]),
        ("GET /v1/events", [200, 401, 403, 404, 422, 429, 503]),
        ("GET /v1/runs/{run_id}", [200, 401, 403, 404, 422, 429, 503]),
        (
            "POST /v1/runs/{run_id}/heartbeat",
            [200, 401, 403, 404, 409, 413, 415, 422, 429, 503],
        ),
        ("POST /v1/nodes/{node}/telemetry", [202, 401, 403, 413, 415, 422, 429, 503]),
        ("POST /v1/tokens", [201, 401, 403, 404, 413, 415, 422, 429, 503]),
        ("GET /metrics", [200, 401, 403, 422, 503]),
    ],
)
def test_each_kind_of_route_lists_its_statuses(operation: str, statuses: list[int]) -> None:
    assert _statuses(_operations()[operation]) == statuses


def test_too_many_and_unavailable_say_when_to_try_again() -> None:
    responses = _operations()["POST /v1/runs/{run_id}/heartbeat"]["responses"]
    assert "Retry-After" in responses["429"]["headers"]
    assert "Retry-After" in responses["503"]["headers"]


def test_the_metrics_token_is_optional_in_the_document() -> None:
    assert {} in _operations()["GET /metrics"]["security"]
