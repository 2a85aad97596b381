"""Bad input over real HTTP: a clear 4xx in the contract's error shape, never a 500, and
nothing written. One server per database serves every case in this module.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import reset_postgres
from tests.e2e.conftest import (
    OPERATOR_TOKEN,
    GovernorServer,
    assert_error,
    create_run,
    declare_budget,
    migrate,
    ok,
    register_pod,
)

pytestmark = pytest.mark.e2e


@dataclass
class World:
    """Two budgets, each with a pod and a run, and a token for every kind of caller."""

    server: GovernorServer
    tokens: dict[str, str | None] = field(default_factory=dict)
    ids: dict[str, str] = field(default_factory=dict)

    def send(self, call: Call) -> httpx.Response:
        token = self.tokens[call.token]
        with self.server.client(token) as client:
            headers = {"Content-Type": "application/json"} if call.raw is not None else {}
            return client.request(
                call.method,
                call.path.format(**self.ids),
                json=_fill(call.json, self.ids),
                content=call.raw,
                headers=headers,
            )

    def snapshot(self) -> dict[str, Any]:
        """Everything a bad request could have written, read back as an operator."""
        with self.server.client() as client:
            budgets = ok(client.get("/v1/budgets"))["items"]
            return {
                "budgets": sorted(
                    (b["id"], b["name"], b["ceiling_usd"], b["effective_ceiling_usd"], b["state"])
                    for b in budgets
                ),
                "events": [
                    e["id"] for e in ok(client.get("/v1/events", params={"limit": 1000}))["items"]
                ],
                "extensions": ok(client.get("/v1/extensions"))["items"],
                "runs": [ok(client.get(f"/v1/runs/{self.ids[r]}")) for r in ("run_a", "run_b")],
                "pods": [
                    {
                        k: v
                        for k, v in ok(client.get(f"/v1/pods/{self.ids[p]}")).items()
                        if k not in ("spent_usd", "accrued_until")
                    }
                    for p in ("pod_a", "pod_b")
                ],
            }


def _fill(value: Any, ids: dict[str, str]) -> Any:
    """Put the world's ids into a request body's strings ("{pod_a}" -> "pod_...")."""
    if isinstance(value, str):
        return value.format(**ids)
    if isinstance(value, dict):
        return {k: _fill(v, ids) for k, v in value.items()}
    if isinstance(value, list):
        return [_fill(v, ids) for v in value]
    return value


@dataclass(frozen=True)
class Call:
    method: str
    path: str
    token: str = "operator"
    json: Any = None
    raw: str | None = None


def _start_world(database: str, workdir: Path) -> GovernorServer:
    if database == "sqlite":
        url = f"sqlite:///{workdir / 'governor.db'}"
    else:
        url = reset_postgres()
        migrate(url, workdir)
    return GovernorServer(workdir, url, {}).start()


@pytest.fixture(
    scope="module",
    params=[
        pytest.param("sqlite", id="sqlite"),
        pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
    ],
)
def world(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[World]:
    server = _start_world(request.param, tmp_path_factory.mktemp("bad-input"))
    try:
        server.wait_ready()
        world = World(server)
        with server.client() as operator:
            for side in ("a", "b"):
                budget = declare_budget(operator, "100000.00", name=f"budget {side}")
                pod = register_pod(operator, budget["id"], f"pod-{side}")
                run = create_run(operator, budget["id"], pod["id"], heartbeat_timeout_s=86_400)
                world.ids.update({f"budget_{side}": budget["id"], f"pod_{side}": pod["id"]})
                world.ids[f"run_{side}"] = run["id"]
                world.tokens[f"job_{side}"] = run["token"]
            viewer = ok(operator.post("/v1/tokens", json={"role": "viewer"}), 201)
        world.tokens.update(
            operator=OPERATOR_TOKEN,
            viewer=viewer["token"],
            none=None,
            wrong="gov_op_this-token-was-never-issued",
        )
        yield world
    finally:
        server.close()


def assert_rejected(world: World, call: Call, status: int) -> dict[str, Any]:
    before = world.snapshot()
    error = assert_error(world.send(call), status)
    assert world.snapshot() == before, "a rejected request changed something"
    return error


# --- malformed or absurd bodies: 422 ---------------------------------------------------

BAD_BUDGETS = {
    "negative-ceiling": Call("POST", "/v1/budgets", json={"name": "x", "ceiling_usd": "-5.00"}),
    "negative-number": Call("POST", "/v1/budgets", json={"name": "x", "ceiling_usd": -5}),
    "zero-ceiling": Call("POST", "/v1/budgets", json={"name": "x", "ceiling_usd": "0"}),
    "non-numeric": Call("POST", "/v1/budgets", json={"name": "x", "ceiling_usd": "abc"}),
    "boolean": Call("POST", "/v1/budgets", json={"name": "x", "ceiling_usd": True}),
    "nan": Call("POST", "/v1/budgets", raw='{"name": "x", "ceiling_usd": NaN}'),
    "nan-string": Call("POST", "/v1/budgets", json={"name": "x", "ceiling_usd": "NaN"}),
    "infinity": Call("POST", "/v1/budgets", raw='{"name": "x", "ceiling_usd": Infinity}'),
    "absurd": Call("POST", "/v1/budgets", json={"name": "x", "ceiling_usd": 1e30}),
    "absurd-string": Call("POST", "/v1/budgets", json={"name": "x", "ceiling_usd": "1e30"}),
    "too-many-decimals": Call(
        "POST", "/v1/budgets", json={"name": "x", "ceiling_usd": "5.0000001"}
    ),
    "unknown-field": Call(
        "POST", "/v1/budgets", json={"name": "x", "ceiling_usd": "5", "colour": "red"}
    ),
    "missing-ceiling": Call("POST", "/v1/budgets", json={"name": "x"}),
    "blank-name": Call("POST", "/v1/budgets", json={"name": "   ", "ceiling_usd": "5"}),
    "right-to-left-override-in-name": Call(
        "POST", "/v1/budgets", json={"name": "ops\u202egpj", "ceiling_usd": "5"}
    ),
    "reserve-over-ceiling": Call(
        "POST", "/v1/budgets", json={"name": "x", "ceiling_usd": "5", "reserve_usd": "6"}
    ),
    "missing-body": Call("POST", "/v1/budgets"),
    "malformed-json": Call("POST", "/v1/budgets", raw='{"name": "x", "ceiling_usd": '),
    "json-not-an-object": Call("POST", "/v1/budgets", raw='["x", "5.00"]'),
}


@pytest.mark.parametrize("call", BAD_BUDGETS.values(), ids=BAD_BUDGETS.keys())
def test_bad_budget_declaration_is_422_and_declares_nothing(world: World, call: Call) -> None:
    error = assert_rejected(world, call, 422)
    assert error["code"] == "invalid_request"


BAD_OTHER_BODIES = {
    "negative-step": Call("POST", "/v1/runs/{run_a}/heartbeat", token="job_a", json={"step": -1}),
    "unknown-status": Call(
        "POST", "/v1/runs/{run_a}/heartbeat", token="job_a", json={"step": 1, "status": "dozing"}
    ),
    "checkpoint-without-path": Call(
        "POST",
        "/v1/runs/{run_a}/heartbeat",
        token="job_a",
        json={"step": 1, "status": "stopping", "checkpoint": {"step": 1}},
    ),
    "negative-extension": Call(
        "POST",
        "/v1/budgets/{budget_a}/extensions",
        token="job_a",
        json={"amount_usd": "-10", "reason": "more"},
    ),
    "extension-without-reason": Call(
        "POST", "/v1/budgets/{budget_a}/extensions", token="job_a", json={"amount_usd": "10"}
    ),
    "pod-with-nan-rate": Call(
        "POST",
        "/v1/budgets/{budget_a}/pods",
        raw='{"provider": "fake", "provider_ref": "pod-c", "hourly_rate_usd": NaN}',
    ),
    "run-with-zero-timeout": Call(
        "POST",
        "/v1/budgets/{budget_a}/runs",
        json={"name": "r", "pod_id": "{pod_a}", "heartbeat_timeout_s": 0},
    ),
    "job-token-role": Call("POST", "/v1/tokens", json={"role": "job"}),
    "thousand-levels-deep": Call(
        "POST",
        "/v1/runs/{run_a}/heartbeat",
        token="job_a",
        raw='{"step": 1, "metrics": {"m": ' + "[" * 1000 + "]" * 1000 + "}}",
    ),
}


@pytest.mark.parametrize("call", BAD_OTHER_BODIES.values(), ids=BAD_OTHER_BODIES.keys())
def test_bad_body_elsewhere_is_422_and_writes_nothing(world: World, call: Call) -> None:
    assert_rejected(world, call, 422)


def test_unknown_provider_is_422_and_registers_nothing(world: World) -> None:
    call = Call(
        "POST", "/v1/budgets/{budget_a}/pods", json={"provider": "nimbus", "provider_ref": "x"}
    )
    error = assert_rejected(world, call, 422)
    assert "nimbus" in error["message"]


# --- who may call what: 401 and 403 ----------------------------------------------------

AUTH_FAILURES = {
    "missing-token-read": (Call("GET", "/v1/budgets", token="none"), 401),
    "missing-token-write": (
        Call("POST", "/v1/budgets", token="none", json={"name": "x", "ceiling_usd": "5"}),
        401,
    ),
    "missing-token-heartbeat": (
        Call("POST", "/v1/runs/{run_a}/heartbeat", token="none", json={"step": 1}),
        401,
    ),
    "wrong-token": (Call("GET", "/v1/budgets", token="wrong"), 401),
    "wrong-token-write": (
        Call("POST", "/v1/budgets", token="wrong", json={"name": "x", "ceiling_usd": "5"}),
        401,
    ),
    "viewer-declares-budget": (
        Call("POST", "/v1/budgets", token="viewer", json={"name": "x", "ceiling_usd": "5"}),
        403,
    ),
    "viewer-stops-pod": (Call("POST", "/v1/pods/{pod_a}/stop", token="viewer"), 403),
    "viewer-issues-token": (Call("POST", "/v1/tokens", token="viewer", json={}), 403),
    "viewer-approves": (Call("POST", "/v1/extensions/ext_0000/approve", token="viewer"), 403),
    "viewer-heartbeats": (
        Call("POST", "/v1/runs/{run_a}/heartbeat", token="viewer", json={"step": 1}),
        403,
    ),
    "job-token-on-another-run": (
        Call("POST", "/v1/runs/{run_b}/heartbeat", token="job_a", json={"step": 1}),
        403,
    ),
    "job-token-reports-on-another-run": (
        Call(
            "POST",
            "/v1/runs/{run_b}/events",
            token="job_a",
            json={"category": "harness", "message": "not mine"},
        ),
        403,
    ),
    "job-token-on-another-budget-extension": (
        Call(
            "POST",
            "/v1/budgets/{budget_b}/extensions",
            token="job_a",
            json={"amount_usd": "10", "reason": "more"},
        ),
        403,
    ),
    "job-token-on-operator-route": (
        Call("POST", "/v1/budgets", token="job_a", json={"name": "x", "ceiling_usd": "5"}),
        403,
    ),
    "job-token-approves": (
        Call("POST", "/v1/extensions/ext_0000/approve", token="job_a"),
        403,
    ),
}


@pytest.mark.parametrize(("call", "status"), AUTH_FAILURES.values(), ids=AUTH_FAILURES.keys())
def test_caller_without_the_right_token_is_refused_and_changes_nothing(
    world: World, call: Call, status: int
) -> None:
    assert_rejected(world, call, status)


def test_viewer_token_reads(world: World) -> None:
    """The control for the 403s above: the viewer token itself is good."""
    with world.server.client(world.tokens["viewer"]) as viewer:
        assert len(ok(viewer.get("/v1/budgets"))["items"]) == 2
        ok(viewer.get("/v1/pods/{pod_a}".format(**world.ids)))


# --- things that are not there: 404 ----------------------------------------------------

UNKNOWN_IDS = {
    "budget": Call("GET", "/v1/budgets/bud_0000000000000000"),
    "pod": Call("GET", "/v1/pods/pod_0000000000000000"),
    "run": Call("GET", "/v1/runs/run_0000000000000000"),
    "heartbeat-for-unknown-run": Call(
        "POST", "/v1/runs/run_0000000000000000/heartbeat", json={"step": 1}
    ),
    "stop-unknown-pod": Call("POST", "/v1/pods/pod_0000000000000000/stop"),
    "pod-under-unknown-budget": Call(
        "POST",
        "/v1/budgets/bud_0000000000000000/pods",
        json={"provider": "fake", "provider_ref": "pod-z"},
    ),
    "run-under-unknown-budget": Call(
        "POST", "/v1/budgets/bud_0000000000000000/runs", json={"name": "r", "pod_id": "{pod_a}"}
    ),
    "run-on-unknown-pod": Call(
        "POST", "/v1/budgets/{budget_a}/runs", json={"name": "r", "pod_id": "pod_0000"}
    ),
    "extension-on-unknown-budget": Call(
        "POST",
        "/v1/budgets/bud_0000000000000000/extensions",
        json={"amount_usd": "10", "reason": "more"},
    ),
    "approve-unknown-extension": Call("POST", "/v1/extensions/ext_0000000000000000/approve"),
    "deny-unknown-extension": Call("POST", "/v1/extensions/ext_0000000000000000/deny"),
    "unknown-route": Call("GET", "/v1/nothing-here"),
}


@pytest.mark.parametrize("call", UNKNOWN_IDS.values(), ids=UNKNOWN_IDS.keys())
def test_unknown_id_is_404_and_changes_nothing(world: World, call: Call) -> None:
    assert_rejected(world, call, 404)
