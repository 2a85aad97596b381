"""Who is calling is settled before the body is read, on SQLite and PostgreSQL: a caller without
the right token is told so (401, 403) whatever it sent, failed attempts are counted once each,
and a caller with the right token still learns what is wrong with its body (422, 415)."""

from __future__ import annotations

from typing import Any

import fastapi.routing
import httpx
import pytest
from fastapi.testclient import TestClient

from governor.services.security.auth_limits import AuthLimits
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
    # one window throughout: the attempts must not straddle two minutes
    limiter = AuthLimits(per_source=4, monotonic=lambda: 0.0)
    with served_scene(database_url, limiter) as scene, TestClient(scene.app) as client:
        for _ in range(4):
            response = send(client, scene, "garbage token", "/v1/budgets", MALFORMED)
            assert response.status_code == 401, response.text
        refused = send(client, scene, "garbage token", "/v1/budgets", MALFORMED)
        assert refused.status_code == 429, refused.text
        assert refused.json()["error"]["code"] == "too_many_attempts"
        assert int(refused.headers["Retry-After"]) >= 1


def test_a_remembered_token_meets_no_limit_whatever_its_address_has_failed(
    database_url: str,
) -> None:
    # one window throughout; past its rate a source has one lookup a minute, never waited for
    limiter = AuthLimits(per_source=2, pace_s=60, max_wait_s=0, monotonic=lambda: 0.0)
    with served_scene(database_url, limiter) as scene, TestClient(scene.app) as client:
        first = send(client, scene, "job", HEARTBEAT, b'{"step": 1}')
        assert first.status_code == 200, first.text  # looked up once, then remembered
        failed = [send(client, scene, "garbage token", "/v1/budgets", MALFORMED) for _ in range(3)]
        assert [r.status_code for r in failed] == [401, 401, 429]
        # the address is past its rate and its one turn is taken: a token not yet remembered
        # is refused unasked...
        unseen = send(client, scene, "viewer", "/v1/budgets", MALFORMED)
        assert unseen.status_code == 429, unseen.text
        assert unseen.json()["error"]["code"] == "too_many_attempts"
        # ...but the remembered ones are answered as ever, from the same address
        beat = send(client, scene, "job", HEARTBEAT, b'{"step": 2}')
        assert beat.status_code == 200, beat.text
        operator = send(client, scene, "operator", "/v1/budgets", MALFORMED)
        assert operator.status_code == 422, operator.text


def test_a_well_formed_beat_is_served_lean_and_any_other_as_every_route(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A heartbeat FastAPI need not read for itself skips its dependency resolution; one that
    is not well formed is answered by FastAPI, as any route's request."""
    resolved: list[bytes] = []
    resolve = fastapi.routing.solve_dependencies

    async def counted(*args: Any, **kwargs: Any) -> Any:
        request = kwargs["request"]
        if request.url.path.endswith("/heartbeat"):
            resolved.append(await request.body())
        return await resolve(*args, **kwargs)

    monkeypatch.setattr(fastapi.routing, "solve_dependencies", counted)
    with served_scene(database_url) as scene, TestClient(scene.app) as client:
        for body in (b'{"step": 1}', b'{"step": 2, "phase": "training", "metrics": {"loss": 1}}'):
            beat = send(client, scene, "job", HEARTBEAT, body)
            assert beat.status_code == 200, beat.text
            assert beat.json()["action"] == "continue"
        assert resolved == []
        answered = {
            (b'{"step": -1}', "application/json"): 422,
            (b'{"step": 3, "colour": "red"}', "application/json"): 422,
            (b'{"step": 3', "application/json"): 422,
            (b'{"step": 3}', "text/plain"): 415,
            (b"", "application/json"): 422,
        }
        for (body, content_type), status in answered.items():
            response = send(client, scene, "job", HEARTBEAT, body, content_type)
            assert response.status_code == status, (body, response.text)
        # each went to FastAPI, which refuses malformed JSON before it resolves anything
        fastapis = [body for body, _ in answered if body != b'{"step": 3']
        assert resolved == fastapis
        denied = send(client, scene, "job of another run", HEARTBEAT, b'{"step": 4}')
        assert denied.status_code == 403, denied.text
        assert resolved == fastapis  # refused before either path reads the body
