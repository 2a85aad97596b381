"""Who is calling is settled before the body is read, on SQLite and PostgreSQL: a caller without
the right token is told so (401, 403) whatever it sent, failed attempts are counted once each,
and a caller with the right token still learns what is wrong with its body (422, 415)."""

from __future__ import annotations

import httpx
from fastapi.testclient import TestClient

from governor.services.auth_limits import FailureLimiter
from tests.integration.api_scene import Scene, served_scene

MALFORMED = b'{"name": "b", "ceiling_usd": '
HEARTBEAT = "/v1/runs/{run_id}/heartbeat"


def send(
    client: TestClient,
    scene: Scene,
    caller: str,
    path: str,
    body: bytes,
    content_type: str = "application/json",
) -> httpx.Response:
    token = scene.tokens[caller]
    headers = {"Content-Type": content_type}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    return client.post(path.format(**scene.params), content=body, headers=headers)


REFUSED = [
    ("no token", "/v1/budgets", 401),
    ("garbage token", "/v1/budgets", 401),
    ("viewer", "/v1/budgets", 403),
    ("job", "/v1/budgets", 403),
    ("job of another run", HEARTBEAT, 403),
    ("agent of another pod", "/v1/pods/{pod_id}/telemetry", 403),
    ("agent of another node", "/v1/nodes/{node}/telemetry", 403),
]
BODIES = [
    (MALFORMED, "application/json"),
    (b'{"name": 5, "colour": "red"}', "application/json"),
    (b"name=b&ceiling_usd=5", "application/x-www-form-urlencoded"),
]


def test_a_caller_without_the_right_token_is_refused_whatever_the_body(
    database_url: str,
) -> None:
    wrong = []
    with served_scene(database_url) as scene, TestClient(scene.app) as client:
        for caller, path, status in REFUSED:
            for body, content_type in BODIES:
                response = send(client, scene, caller, path, body, content_type)
                code = {401: "unauthenticated", 403: "forbidden"}[status]
                if (response.status_code, response.json()["error"]["code"]) != (status, code):
                    wrong.append(f"{caller} {path} {body!r}: {response.text}")
    assert not wrong, "\n".join(wrong)


def test_the_right_token_learns_what_is_wrong_with_the_body(database_url: str) -> None:
    with served_scene(database_url) as scene, TestClient(scene.app) as client:
        malformed = send(client, scene, "operator", "/v1/budgets", MALFORMED)
        assert malformed.status_code == 422, malformed.text
        assert malformed.json()["error"]["details"][0]["field"] == "body"

        invalid = send(client, scene, "job", HEARTBEAT, b'{"step": -1}')
        assert invalid.status_code == 422, invalid.text
        assert [d["field"] for d in invalid.json()["error"]["details"]] == ["step"]

        form = send(client, scene, "operator", "/v1/budgets", b"name=b", "text/plain")
        assert form.status_code == 415, form.text

        latin = send(client, scene, "operator", "/v1/budgets", '{"name": "é"}'.encode("latin-1"))
        assert latin.status_code == 422, latin.text
        assert latin.json()["error"]["details"][0]["field"] == "body"
        assert "utf-8" in latin.json()["error"]["message"]


def test_a_failed_attempt_is_counted_once_whatever_the_body(database_url: str) -> None:
    limiter = FailureLimiter(per_address=4, per_prefix=1000)
    with served_scene(database_url, limiter) as scene, TestClient(scene.app) as client:
        for _ in range(4):
            response = send(client, scene, "garbage token", "/v1/budgets", MALFORMED)
            assert response.status_code == 401, response.text
        refused = send(client, scene, "garbage token", "/v1/budgets", MALFORMED)
        assert refused.status_code == 429, refused.text
        assert refused.json()["error"]["code"] == "too_many_attempts"
        assert int(refused.headers["Retry-After"]) >= 1
