"""A JSON body is bounded before it is parsed, on every route that takes one (each found in the
OpenAPI document, so that a new route is held to it too), the heartbeat's lean route
included, on SQLite and PostgreSQL: a body nesting a thousand levels deep, or an array of a
hundred thousand members, is a 422 with the bound's code, never a 500; brackets inside strings
are text."""

from __future__ import annotations

import json
from typing import Any

import httpx
from fastapi.testclient import TestClient

from governor.services.security.json_bounds import MAX_DEPTH, MAX_MEMBERS
from tests.integration.api_scene import OPERATOR, Scene, served_scene

DEEP = b"[" * 1000 + b"]" * 1000
HEARTBEAT = "/v1/runs/{run_id}/heartbeat"
WIDE = json.dumps({"step": 1, "metrics": [0] * 100_000}).encode()


def _json_routes(client: TestClient) -> list[tuple[str, str]]:
    document = client.get("/openapi.json").json()
    return [
        (method, path)
        for path, operations in document["paths"].items()
        for method, operation in operations.items()
        if "application/json" in operation.get("requestBody", {}).get("content", {})
    ]


def _post(client: TestClient, scene: Scene, method: str, path: str, body: bytes) -> httpx.Response:
    return client.request(
        method,
        path.format(**scene.params),
        content=body,
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {OPERATOR}"},
    )


def test_every_route_with_a_json_body_refuses_one_out_of_bounds(database_url: str) -> None:
    wrong: list[str] = []
    with served_scene(database_url) as scene, TestClient(scene.app) as client:
        routes = _json_routes(client)
        assert ("post", HEARTBEAT) in routes
        for method, path in routes:
            for body, code, bound in (
                (DEEP, "too_deep", MAX_DEPTH),
                (WIDE, "too_many_members", MAX_MEMBERS),
            ):
                response = _post(client, scene, method, path, body)
                error: dict[str, Any] = response.json().get("error", {})
                if (response.status_code, error.get("code")) != (422, code) or str(
                    bound
                ) not in error.get("message", ""):
                    wrong.append(f"{method} {path} {code}: {response.text[:200]}")
        assert not wrong, "\n".join(wrong)

        # brackets and commas inside strings are text: the beat is taken on the lean route
        note = '[{"' * 1000 + "," * (MAX_MEMBERS + 1)
        beat = json.dumps({"step": 1, "metrics": {"note": note, "loss": 0.5}}).encode()
        response = _post(client, scene, "post", HEARTBEAT, beat)
        assert response.status_code == 200, response.text[:300]
        assert response.json()["action"] == "continue"
