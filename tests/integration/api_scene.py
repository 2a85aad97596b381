"""A small real scene for tests that call every route in-process: two budgets, each with a
pod on its own node and a run; on the first, a pending extension, a checked plan and a spare
token; and a token for every kind of caller. Route path parameters name the first budget's."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

import httpx
from fastapi import FastAPI
from fastapi.testclient import TestClient

from governor.app import create_app
from governor.db import schema
from governor.domain.teams import DEFAULT_TEAM_ID
from governor.services.security import tokens
from governor.services.security.auth_limits import AuthLimits
from governor.settings import load_settings
from tests.clock import FrozenClock
from tests.integration.conftest import make_governor
from tests.plans import variant

OPERATOR = "gov_op_api-scene-operator"
GARBAGE = "gov_op_never-issued"


@dataclass(frozen=True)
class Scene:
    app: FastAPI
    params: dict[str, str]  # a value for every path parameter of the API
    tokens: dict[str, str | None]  # caller -> token (None: no token at all)


def _made(response: httpx.Response) -> Any:
    assert response.status_code == 201, response.text[:500]
    return response.json()


def pilot(client: TestClient, side: str) -> dict[str, Any]:
    """A budget named `side` with a fake pod on its own node and a run, made over the API
    as an operator: their ids and the run's job token."""
    budget = _made(client.post("/v1/budgets", json={"name": side, "ceiling_usd": "100000"}))
    pod = _made(
        client.post(
            f"/v1/budgets/{budget['id']}/pods",
            json={"provider": "fake", "provider_ref": f"pod-{side}", "node": f"node-{side}"},
        )
    )
    run = _made(
        client.post(
            f"/v1/budgets/{budget['id']}/runs",
            json={"name": side, "pod_id": pod["id"], "heartbeat_timeout_s": 86_400},
        )
    )
    return {"budget": budget["id"], "pod": pod["id"], "run": run["id"], "job": run["token"]}


def _token(client: TestClient, **body: Any) -> dict[str, Any]:
    return _made(client.post("/v1/tokens", json=body))


@contextmanager
def served_scene(url: str, auth_limits: AuthLimits | None = None) -> Iterator[Scene]:
    """The scene on an empty database at `url`. Token lookups are limited by `auth_limits`,
    by default not at all: these tests fail many on purpose."""
    schema.upgrade(url)
    gov = make_governor(url, FrozenClock())
    unlimited = AuthLimits(per_source=10**9)
    context = replace(gov.ctx, auth_limits=auth_limits or unlimited)
    with gov.session() as session:
        tokens.bootstrap_operator(session, OPERATOR, gov.clock.now())
    app = create_app(load_settings(database_url=url, scheduler_enabled=False), context)
    try:
        with TestClient(app, headers={"Authorization": f"Bearer {OPERATOR}"}) as client:
            mine, other = pilot(client, "a"), pilot(client, "b")
            budget = mine["budget"]
            extension = _made(
                client.post(
                    f"/v1/budgets/{budget}/extensions", json={"amount_usd": "10", "reason": "more"}
                )
            )
            plan = _made(client.post(f"/v1/budgets/{budget}/plans", json=variant()))
            yield Scene(
                app=app,
                params={
                    "budget_id": budget,
                    "team_id": DEFAULT_TEAM_ID,
                    "pod_id": mine["pod"],
                    "run_id": mine["run"],
                    "extension_id": extension["id"],
                    "plan_id": plan["id"],
                    "token_id": _token(client, role="viewer", label="spare")["id"],
                    "node": "node-a",
                    "launch_id": "lch_none",
                    "token": GARBAGE,  # a gate's path carries its token: each caller's own
                },
                tokens={
                    "operator": OPERATOR,
                    "viewer": _token(client, role="viewer")["token"],
                    "job": mine["job"],
                    "agent of the pod": _token(client, role="agent", pod_id=mine["pod"])["token"],
                    "agent of the node": _token(client, role="agent", node="node-a")["token"],
                    "no token": None,
                    "garbage token": GARBAGE,
                    "job of another run": other["job"],
                    "agent of another pod": _token(client, role="agent", pod_id=other["pod"])[
                        "token"
                    ],
                    "agent of another node": _token(client, role="agent", node="node-b")["token"],
                    "gate": _token(client, role="gate")["token"],
                },
            )
    finally:
        context.engine.dispose()
