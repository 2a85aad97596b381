"""The app's outward behaviour, pinned: its OpenAPI document, what its read routes answer in
one fixed scene (SQLite, a frozen clock, the fake cloud), and one chain of migrations.

The committed copies are under tests/golden/. A change that means to alter the API rewrites
them on purpose (tests/golden/README.md says how) and commits the difference for review;
any other difference fails with a short diff.

The scene is made only over the HTTP API, with the fixtures' governor for time and the
periodic passes. Every random identifier and token is replaced by a placeholder numbered in
the order it first appears (`<bud_1>`, `<job_token_1>`), so the documents are the same at
every run; fields are never dropped.
"""

from __future__ import annotations

import base64
import difflib
import json
import os
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from alembic.config import Config
from alembic.script import ScriptDirectory
from fastapi.testclient import TestClient

from governor.app import create_app
from governor.settings import load_settings
from tests.clock import FrozenClock
from tests.integration.conftest import Governor
from tests.plans import variant

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "golden"
UPDATE_ENV = "GOVERNOR_UPDATE_GOLDEN"
START = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
ABOUT = (
    "What the read routes answer in the scene of tests/integration/test_golden_contract.py, "
    "ids and tokens as numbered placeholders. Not edited by hand: regenerated with "
    f"{UPDATE_ENV}=1 when a change means to alter the API (tests/golden/README.md)."
)


# --- comparing with the committed copies ---


def updating() -> bool:
    return os.environ.get(UPDATE_ENV) == "1"


def golden(name: str, actual: str) -> None:
    """`actual` equals tests/golden/`name`, or the test fails with a short unified diff.
    With GOVERNOR_UPDATE_GOLDEN=1 the file is rewritten instead, and the test is skipped."""
    path = GOLDEN / name
    if updating():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(actual, encoding="utf-8")
        pytest.skip(f"{UPDATE_ENV}=1: rewrote tests/golden/{name}; review and commit the diff")
    if not path.is_file():
        pytest.fail(
            f"tests/golden/{name} is missing: generate it with {UPDATE_ENV}=1 "
            "(see tests/golden/README.md)"
        )
    expected = path.read_text(encoding="utf-8")
    if actual == expected:
        return
    diff = list(
        difflib.unified_diff(
            expected.splitlines(),
            actual.splitlines(),
            f"tests/golden/{name} (committed)",
            f"{name} (this code)",
            lineterm="",
            n=2,
        )
    )
    shown = "\n".join(diff[:60])
    more = f"\n... and {len(diff) - 60} more diff lines" if len(diff) > 60 else ""
    where = differing(json.loads(expected), json.loads(actual))
    listed = "".join(f"\n  {w}" for w in where[:20]) or " only the order of keys"
    if len(where) > 20:
        listed += f"\n  ... and {len(where) - 20} more"
    pytest.fail(
        f"The app's {name} differs from the committed tests/golden/{name}. If the change is "
        f"meant, rerun with {UPDATE_ENV}=1 and commit the new file (tests/golden/README.md); "
        f"otherwise the change altered the API's behaviour. Where:{listed}\n{shown}{more}",
        pytrace=False,
    )


def differing(expected: Any, actual: Any, at: tuple[str, ...] = (), depth: int = 3) -> list[str]:
    """Where two JSON documents differ, as key paths at most `depth` keys deep."""
    if expected == actual:
        return []
    if depth == 0 or not (isinstance(expected, dict) and isinstance(actual, dict)):
        return [" > ".join(at) or "(the whole document)"]
    found: list[str] = []
    for key in [*expected, *(k for k in actual if k not in expected)]:
        if key not in actual or key not in expected:
            gone = "only in the committed copy" if key not in actual else "new"
            found.append(f"{' > '.join((*at, key))} ({gone})")
        else:
            found += differing(expected[key], actual[key], (*at, key), depth - 1)
    return found


# --- making responses deterministic ---

ID = re.compile(r"\b(bud|pod|run|ext|pln|stop|tok)_[0-9a-f]{16}\b")
TOKEN = re.compile(r"\bgov_(op|view|job|agent)_[A-Za-z0-9_-]{43}(?![A-Za-z0-9_-])")
TOKEN_KINDS = {"op": "operator", "view": "viewer", "job": "job", "agent": "agent"}


class Placeholders:
    """Each distinct random id or token becomes a placeholder numbered by kind in the order
    it is first seen: bud_1a2b... -> <bud_1>, gov_job_... -> <job_token_1>. One instance
    numbers a whole document, so equal ids stay equal across responses.

    The leader's lease alone keeps the wall clock, not the test's (`wall`: its times, as
    /readyz gives them): those times become <lease since> and <lease expires_at>."""

    def __init__(self, wall: dict[datetime, str]) -> None:
        self.wall = wall
        self.seen: dict[str, str] = {}
        self.counts: dict[str, int] = {}

    def _name(self, value: str, kind: str) -> str:
        if value not in self.seen:
            self.counts[kind] = self.counts.get(kind, 0) + 1
            self.seen[value] = f"<{kind}_{self.counts[kind]}>"
        return self.seen[value]

    def text(self, value: str) -> str:
        at = _time(value)
        if at is not None and at in self.wall:
            return self.wall[at]
        value = TOKEN.sub(lambda m: self._name(m[0], f"{TOKEN_KINDS[m[1]]}_token"), value)
        return ID.sub(lambda m: self._name(m[0], m[1]), value)

    def cursor(self, value: str) -> str:
        """A page's cursor is opaque base64 of its last item's key, ids included: shown
        decoded, with those ids replaced, so its content stays pinned."""
        try:
            key = json.loads(base64.urlsafe_b64decode(value + "=" * (-len(value) % 4)))
        except ValueError:
            return self.text(value)
        return f"<cursor {self.text(json.dumps(key, separators=(',', ':')))}>"

    def json(self, value: Any, key: str | None = None) -> Any:
        if isinstance(value, dict):
            return {self.text(k): self.json(v, k) for k, v in value.items()}
        if isinstance(value, list):
            return [self.json(v) for v in value]
        if isinstance(value, str):
            return self.cursor(value) if key == "next_cursor" else self.text(value)
        return value

    def metrics(self, text: str) -> list[str]:
        """The exposition's lines; a sample whose value is a wall-clock time of the lease
        (or an age measured from one) shows the placeholder instead of its number."""
        stamps = {at.timestamp(): name for at, name in self.wall.items()}
        lines = []
        for line in self.text(text).splitlines():
            name, _, value = line.rpartition(" ")
            if not line.startswith("#") and name:
                if name.startswith(WALL_AGES):
                    line = f"{name} <age from the lease's wall-clock times>"
                elif _float(value) in stamps:
                    line = f"{name} {stamps[_float(value)]}"
            lines.append(line)
        return lines


WALL_AGES = ("governor_pass_age_seconds",)


def _time(value: str) -> datetime | None:
    if not 19 <= len(value) <= 40 or value[4:5] != "-":
        return None
    try:
        at = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return at if at.tzinfo is not None else None


def _float(value: str) -> float | None:
    try:
        return float(value)
    except ValueError:
        return None


def lease_times(client: TestClient) -> dict[datetime, str]:
    leader = client.get("/readyz").json().get("leader") or {}
    return {
        at: f"<lease {key}>"
        for key in ("since", "expires_at")
        if isinstance(leader.get(key), str) and (at := _time(leader[key])) is not None
    }


# --- the scene ---


@pytest.fixture
def database_url(tmp_path: Path) -> str:
    """SQLite alone: the documents are the API's, not the database's."""
    return f"sqlite:///{tmp_path / 'governor.db'}"


@pytest.fixture
def clock() -> FrozenClock:
    return FrozenClock(START)


def made(response: httpx.Response, status: int = 201) -> Any:
    assert response.status_code == status, response.text[:500]
    return response.json()


def as_(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def build_scene(client: TestClient, gov: Governor) -> dict[str, str]:
    """Two budgets over the API, a second apart at each step (lists are ordered by creation
    time, then by the random id): the pilot with a checked plan, a pod on a node, a run
    that beats, reports GPUs and a failure, asks for more, is stopped by hand and saves; and
    a second budget with its own pod and run, later closed after its pod was stopped."""

    def step(seconds: float = 1.0) -> None:
        gov.clock.advance(seconds)

    pilot = made(
        client.post(
            "/v1/budgets",
            json={
                "name": "llama-lora-pilot",
                "ceiling_usd": "500",
                "reserve_usd": "25",
                "storage_tail_hours": 168,
                "require_plan": True,
                "note": "load, canary, train, eval",
            },
        )
    )
    budget = pilot["id"]
    step()
    document = variant(
        {"job_id": "pilot-gemma3-lora-001", "hardware.rate_quoted_at": START.date().isoformat()}
    )
    plan = made(client.post(f"/v1/budgets/{budget}/plans", json=document))
    step()
    pod = made(
        client.post(
            f"/v1/budgets/{budget}/pods",
            json={
                "provider": "fake",
                "provider_ref": "pod-1",
                "name": "trainer",
                "gpu_type": "H200",
                "gpu_count": 1,
                "storage_gb": 200,
                "storage_usd_per_gb_month": "0.10",
                "stopped_storage_usd_per_gb_month": "0.20",
                "node": "node-a",
                "plan_id": plan["id"],
            },
        )
    )
    step()
    run = made(
        client.post(
            f"/v1/budgets/{budget}/runs",
            json={
                "name": "sft",
                "pod_id": pod["id"],
                "total_steps": 3000,
                "heartbeat_timeout_s": 600,
                "checkpoint_grace_s": 300,
                "policy": {
                    "idle_util_pct": 5,
                    "health": [{"kind": "non_finite", "metric": "loss", "action": "warn"}],
                },
            },
        )
    )
    job = as_(run["token"])
    step()
    agent = made(
        client.post("/v1/tokens", json={"role": "agent", "pod_id": pod["id"], "label": "pod agent"})
    )
    step()
    made(client.post("/v1/tokens", json={"role": "viewer", "label": "dashboard"}))
    step()
    spare = made(client.post("/v1/tokens", json={"role": "operator", "label": "spare"}))
    step()
    made(client.post(f"/v1/tokens/{spare['id']}/revoke"), 200)

    beats = [
        {"step": 0, "phase": "loading", "total_steps": 3000},
        {"step": 40, "phase": "training", "metrics": {"loss": 2.5, "lr": 0.0002}},
        {"step": 120, "phase": "training", "metrics": {"loss": 1.75, "lr": 0.0002}},
    ]
    for beat in beats:
        gov.tick(30)
        made(client.post(f"/v1/runs/{run['id']}/heartbeat", json=beat, headers=job), 200)
        reading = {
            "at": gov.clock.now().isoformat(),
            "driver_version": "570.124.06",
            "gpus": [
                {
                    "uuid": "GPU-0",
                    "index": 0,
                    "name": "NVIDIA H200",
                    "utilization_pct": 97.0,
                    "utilization_max_pct": 99.0,
                    "memory_total_bytes": 150_000_000_000,
                    "memory_used_bytes": 60_000_000_000 + 1_000_000_000 * beat["step"] // 40,
                    "memory_free_bytes": 90_000_000_000 - 1_000_000_000 * beat["step"] // 40,
                    "power_w": 650.0,
                    "temperature_c": 61.0,
                    "processes": [
                        {"pid": 4100, "used_memory_bytes": 59_000_000_000, "name": "python3"}
                    ],
                    "clock_event_reasons": 0,
                }
            ],
        }
        made(
            client.post(
                f"/v1/pods/{pod['id']}/telemetry",
                json={"readings": [reading], "gpu_uuids": ["GPU-0"]},
                headers=as_(agent["token"]),
            ),
            202,
        )
    step()
    made(
        client.post(
            f"/v1/runs/{run['id']}/events",
            json={
                "category": "harness",
                "kind": "dataloader",
                "message": "dataloader worker 3 crashed; restarted",
                "evidence": {"worker": 3},
            },
            headers=job,
        )
    )
    step()
    asked = made(
        client.post(
            f"/v1/budgets/{budget}/extensions",
            json={"amount_usd": "40", "reason": "eval rerun"},
            headers=job,
        )
    )
    step()
    made(client.post(f"/v1/extensions/{asked['id']}/approve", json={"note": "last one"}), 200)
    step()
    denied = made(
        client.post(f"/v1/budgets/{budget}/extensions", json={"amount_usd": "900", "reason": "x"})
    )
    step()
    made(client.post(f"/v1/extensions/{denied['id']}/deny", json={"note": "too much"}), 200)
    step()
    made(
        client.post(
            f"/v1/budgets/{budget}/extensions", json={"amount_usd": "15", "reason": "pending"}
        )
    )

    gov.tick(60)
    made(client.post(f"/v1/pods/{pod['id']}/stop", json={"reason": "end of day"}), 202)
    step()
    saved = {
        "step": 130,
        "status": "stopping",
        "checkpoint": {"step": 130, "path": "/workspace/ckpt-130"},
    }
    made(client.post(f"/v1/runs/{run['id']}/heartbeat", json=saved, headers=job), 200)
    gov.tick(1)  # the stop is sent
    gov.tick(30)  # and confirmed: the fake cloud takes 30 s
    gov.tick(600)  # stopped, the storage still bills

    step()
    other = made(client.post("/v1/budgets", json={"name": "eval-sweep", "ceiling_usd": "50"}))
    step()
    other_pod = made(
        client.post(
            f"/v1/budgets/{other['id']}/pods",
            json={"provider": "fake", "provider_ref": "pod-2", "node": "node-b"},
        )
    )
    step()
    made(
        client.post(
            f"/v1/budgets/{other['id']}/runs",
            json={"name": "eval", "pod_id": other_pod["id"], "heartbeat_timeout_s": 86_400},
        )
    )
    gov.tick(120)
    made(client.post(f"/v1/pods/{other_pod['id']}/stop", json={"reason": "sweep done"}), 202)
    gov.tick(1)
    gov.tick(30)
    step()
    made(
        client.post(
            f"/v1/budgets/{other['id']}/close",
            json={"reason": "sweep finished", "storage_deleted": True},
        ),
        200,
    )
    gov.tick(5)
    return {
        "budget": budget,
        "other": other["id"],
        "pod": pod["id"],
        "other_pod": other_pod["id"],
        "run": run["id"],
    }


def reads(ids: dict[str, str]) -> list[str]:
    """The read routes, in the order the document lists them."""
    b, p, r = ids["budget"], ids["pod"], ids["run"]
    return [
        "/healthz",
        "/readyz",
        "/v1/budgets",
        "/v1/budgets?limit=1",
        "/v1/budgets?name=llama-lora-pilot",
        f"/v1/budgets/{b}",
        f"/v1/budgets/{ids['other']}",
        "/v1/budgets/bud_0000000000000000",
        "/v1/pods",
        f"/v1/pods?budget_id={b}",
        f"/v1/pods/{p}",
        f"/v1/pods/{ids['other_pod']}",
        "/v1/runs",
        f"/v1/runs?budget_id={b}&status=stopped",
        f"/v1/runs/{r}",
        f"/v1/runs/{r}/metrics",
        f"/v1/runs/{r}/metrics?name=loss",
        "/v1/events",
        "/v1/events?limit=5",
        f"/v1/events?budget_id={b}&min_severity=warning",
        "/v1/events?category=harness",
        "/v1/extensions",
        f"/v1/extensions?budget_id={b}&state=pending",
        f"/v1/budgets/{b}/plans",
        f"/v1/budgets/{b}/plans/admitted",
        "/v1/tokens",
        "/v1/tokens?limit=2",
        "/v1/status",
        f"/v1/budgets/{b}/report",
        f"/v1/budgets/{b}/report?format=md",
        f"/v1/budgets/{b}/report?format=html",
        f"/v1/budgets/{ids['other']}/report?format=md",
        "/metrics",
    ]


def answer(response: httpx.Response, names: Placeholders, path: str) -> dict[str, Any]:
    kind = response.headers.get("content-type", "")
    shown: dict[str, Any] = {"status": response.status_code, "content_type": kind}
    if kind.startswith("application/json"):
        shown["body"] = names.json(response.json())
    elif path == "/metrics":
        shown["lines"] = names.metrics(response.text)
    else:
        shown["lines"] = names.text(response.text).splitlines()
    return shown


def get_responses(client: TestClient, gov: Governor) -> str:
    ids = build_scene(client, gov)
    names = Placeholders(lease_times(client))
    document: dict[str, Any] = {"about": ABOUT}
    for path in reads(ids):
        response = client.get(path)
        shown = answer(response, names, path)
        document[f"GET {names.text(path)}"] = shown
    return json.dumps(document, indent=1, ensure_ascii=False) + "\n"


# --- the tests ---


def test_the_openapi_document_is_the_committed_one() -> None:
    app = create_app(load_settings(database_url="sqlite://", scheduler_enabled=False))
    golden("openapi.json", json.dumps(app.openapi(), sort_keys=True, indent=1) + "\n")


def test_the_read_routes_answer_as_committed(client: TestClient, gov: Governor) -> None:
    golden("get_responses.json", get_responses(client, gov))


def test_the_migrations_form_one_chain_with_one_head() -> None:
    """One line of migrations, base to head, as the project's own Alembic configuration
    (pyproject.toml) finds them: what `governor migrate` upgrades to is never ambiguous."""
    script = ScriptDirectory.from_config(Config(toml_file=str(ROOT / "pyproject.toml")))
    assert Path(script.dir).resolve() == ROOT / "migrations"
    heads = script.get_heads()
    assert len(heads) == 1, (
        f"migrations/ has {len(heads)} heads ({', '.join(sorted(heads))}); it must have one. "
        "A new migration chains onto the newest one: its down_revision is the current head's "
        "revision (`alembic heads` names it), and of two written at once the second chains "
        "onto the first"
    )
    revisions = {r.revision: r for r in script.walk_revisions()}
    chain: list[str] = []
    at: str | None = heads[0]
    while at is not None:
        down = revisions[at].down_revision
        assert down is None or isinstance(down, str), (
            f"migration {at} merges {down}: chain it onto one revision instead"
        )
        chain.append(at)
        at = down
    assert sorted(chain) == sorted(revisions), (
        f"migrations off the chain from {heads[0]} down to the base: "
        f"{sorted(set(revisions) - set(chain))}"
    )
