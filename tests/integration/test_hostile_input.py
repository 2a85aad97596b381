"""Hostile and broken input at the HTTP edge, on SQLite and PostgreSQL alike: text no
database or reader can take back, numbers and times out of range, documents and bodies too
large. Each is a 422 (413 for a body) naming the field and why, and nothing is stored; the
event log and the report keep answering.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from governor.app import create_app
from governor.db.tables import Base
from governor.services.security import tokens
from governor.settings import load_settings
from tests.integration.api_scene import pilot
from tests.integration.conftest import Governor
from tests.plans import variant

OPERATOR = "hostile-input-operator"
MAX_BODY = 1_048_576
LONE = "\ud83d"  # half of a surrogate pair: no encoder takes it
NUL = "\x00"


@dataclass
class World:
    """A budget with a pod and a run, served over HTTP in-process."""

    gov: Governor
    client: TestClient
    ids: dict[str, str]
    job: str  # the run's job token

    def send(self, path: str, body: Any, token: str = OPERATOR) -> httpx.Response:
        """POST `body` as JSON text the way json.dumps writes it: a lone surrogate or a NUL
        goes out as its \\u escape, NaN as a bare NaN."""
        return self.client.post(
            path.format(**self.ids),
            content=json.dumps(_fill(body, self.ids)),
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {token}"},
        )

    def get(self, path: str, **params: Any) -> httpx.Response:
        return self.client.get(path.format(**self.ids), params=params)

    def stored(self) -> dict[str, list[str]]:
        """Every row of every table."""
        with self.gov.ctx.engine.connect() as connection:
            return {
                table.name: sorted(repr(tuple(row)) for row in connection.execute(select(table)))
                for table in Base.metadata.sorted_tables
            }


def _fill(value: Any, ids: dict[str, str]) -> Any:
    if isinstance(value, str):
        return value.format(**ids) if "{" in value else value
    if isinstance(value, dict):
        return {k: _fill(v, ids) for k, v in value.items()}
    if isinstance(value, list):
        return [_fill(v, ids) for v in value]
    return value


def ok(response: httpx.Response, status: int = 200) -> Any:
    assert response.status_code == status, response.text[:500]
    return response.json()


@pytest.fixture
def world(gov: Governor, migrated_url: str) -> Iterator[World]:
    with gov.session() as session:
        tokens.bootstrap_operator(session, OPERATOR, gov.clock.now())
    settings = load_settings(database_url=migrated_url, scheduler_enabled=False)
    app = create_app(settings, gov.ctx)
    with TestClient(app, headers={"Authorization": f"Bearer {OPERATOR}"}) as client:
        made = pilot(client, "b")
        ids = {"budget": made["budget"], "pod": made["pod"], "run": made["run"]}
        yield World(gov, client, ids, made["job"])


def assert_refused(world: World, path: str, body: Any, field: str, token: str = OPERATOR) -> str:
    """A 422 naming `field`, and not a row changed. Returns the message."""
    before = world.stored()
    response = world.send(path, body, token)
    assert response.status_code == 422, response.text[:500]
    error = response.json()["error"]
    assert error["code"] == "invalid_request"
    assert any(d["field"].startswith(field) for d in error["details"]), error
    assert world.stored() == before, "a refused request changed something"
    return str(error["message"])


def assert_log_reads(world: World) -> None:
    """The event log, filtered every way, and the JSON report all answer."""
    ok(world.get("/v1/events"))
    ok(world.get("/v1/events", severity="critical"))
    ok(world.get("/v1/events", budget_id=world.ids["budget"]))
    ok(world.get("/v1/budgets/{budget}/report"))


EVENTS = "/v1/runs/{run}/events"
HEARTBEAT = "/v1/runs/{run}/heartbeat"
TELEMETRY = "/v1/pods/{pod}/telemetry"


def _event(**changes: Any) -> dict[str, Any]:
    return {"category": "harness", "severity": "critical", "message": "m", **changes}


def _reading(**changes: Any) -> dict[str, Any]:
    gpu = {"uuid": "GPU-0", "index": 0, "name": "H100"}
    reading = {"at": "2026-01-01T12:00:00+00:00", "gpus": [gpu], **changes}
    return {"readings": [reading]}


def test_a_lone_surrogate_in_evidence_is_refused_and_the_log_still_reads(world: World) -> None:
    message = assert_refused(world, EVENTS, _event(evidence={"k": LONE}), "evidence", world.job)
    assert "lone surrogate" in message and '["k"]' in message
    assert_log_reads(world)
    ok(world.send(EVENTS, _event(evidence={"k": "\U0001f600"}), world.job), 201)  # a whole pair
    assert_log_reads(world)


# path, body, the field the error names, and who sends it (the job: None)
UNSTORABLE_TEXT: dict[str, tuple[str, Any, str, str | None]] = {
    "budget-name": ("/v1/budgets", {"name": "b{c}", "ceiling_usd": "5"}, "name", OPERATOR),
    "budget-note": (
        "/v1/budgets",
        {"name": "b", "ceiling_usd": "5", "note": "n{c}"},
        "note",
        OPERATOR,
    ),
    "pod-provider-ref": (
        "/v1/budgets/{budget}/pods",
        {"provider": "fake", "provider_ref": "p{c}"},
        "provider_ref",
        OPERATOR,
    ),
    "pod-name": (
        "/v1/budgets/{budget}/pods",
        {"provider": "fake", "provider_ref": "pod-2", "name": "n{c}"},
        "name",
        OPERATOR,
    ),
    "pod-gpu-type": (
        "/v1/budgets/{budget}/pods",
        {"provider": "fake", "provider_ref": "pod-2", "gpu_type": "H{c}"},
        "gpu_type",
        OPERATOR,
    ),
    "pod-filesystem": (
        "/v1/budgets/{budget}/pods",
        {"provider": "fake", "provider_ref": "pod-2", "persistent_filesystem": "f{c}"},
        "persistent_filesystem",
        OPERATOR,
    ),
    "run-name": (
        "/v1/budgets/{budget}/runs",
        {"name": "r{c}", "pod_id": "{pod}"},
        "name",
        OPERATOR,
    ),
    "stop-reason": ("/v1/pods/{pod}/stop", {"reason": "r{c}"}, "reason", OPERATOR),
    "extension-reason": (
        "/v1/budgets/{budget}/extensions",
        {"amount_usd": "10", "reason": "r{c}"},
        "reason",
        None,
    ),
    "event-message": (EVENTS, _event(message="m{c}"), "message", None),
    "event-kind": (EVENTS, _event(kind="k{c}"), "kind", None),
    "event-evidence": (EVENTS, _event(evidence={"k": ["v{c}"]}), "evidence", None),
    "event-evidence-key": (EVENTS, _event(evidence={"k{c}": 1}), "evidence", None),
    "checkpoint-path": (
        HEARTBEAT,
        {"step": 5, "checkpoint": {"step": 5, "path": "/ckpt{c}"}},
        "checkpoint.path",
        None,
    ),
    "metric-name": (HEARTBEAT, {"step": 5, "metrics": {"loss{c}": 1.0}}, "metrics", None),
    "metric-value": (HEARTBEAT, {"step": 5, "metrics": {"note": "x{c}"}}, "metrics", None),
    "telemetry-gpu-name": (
        TELEMETRY,
        {
            "readings": [
                {"at": "2026-01-01T12:00:00Z", "gpus": [{"uuid": "G", "index": 0, "name": "H{c}"}]}
            ]
        },
        "readings.0.gpus.0.name",
        OPERATOR,
    ),
    "telemetry-gpu-uuid": (
        TELEMETRY,
        {"readings": [{"at": "2026-01-01T12:00:00Z", "gpus": [{"uuid": "G{c}", "index": 0}]}]},
        "readings.0.gpus.0.uuid",
        OPERATOR,
    ),
    "telemetry-problem": (
        TELEMETRY,
        _reading(problems=[{"index": 0, "error": "e{c}", "lost": True}]),
        "readings.0.problems.0.error",
        OPERATOR,
    ),
    "telemetry-unavailable-reason": (
        TELEMETRY,
        _reading(available=False, unavailable_reason="no{c}"),
        "readings.0.unavailable_reason",
        OPERATOR,
    ),
    "telemetry-driver": (
        TELEMETRY,
        _reading(driver_version="5{c}"),
        "readings.0.driver_version",
        OPERATOR,
    ),
    "token-label": ("/v1/tokens", {"role": "viewer", "label": "l{c}"}, "label", OPERATOR),
    "plan-record-field": (
        "/v1/budgets/{budget}/plans",
        variant({"hardware.cloud_tier": "t{c}"}),
        "hardware.cloud_tier",
        OPERATOR,
    ),
}


def _with(value: Any, character: str) -> Any:
    """`value` with every "{c}" in its strings and keys made `character`."""
    if isinstance(value, str):
        return value.replace("{c}", character)
    if isinstance(value, dict):
        return {_with(k, character): _with(v, character) for k, v in value.items()}
    if isinstance(value, list):
        return [_with(v, character) for v in value]
    return value


@pytest.mark.parametrize(
    ("path", "body", "field", "sender"), UNSTORABLE_TEXT.values(), ids=UNSTORABLE_TEXT.keys()
)
@pytest.mark.parametrize(
    ("character", "named"),
    [(NUL, "NUL"), (LONE, "lone surrogate"), ("\x1b", "control character U+001B")],
    ids=["nul", "lone-surrogate", "escape"],
)
def test_text_no_database_or_reader_takes_is_refused(
    world: World,
    path: str,
    body: Any,
    field: str,
    sender: str | None,
    character: str,
    named: str,
) -> None:
    message = assert_refused(world, path, _with(body, character), field, sender or world.job)
    assert named in message
    assert_log_reads(world)


def test_free_text_takes_tabs_and_newlines_and_a_name_does_not(world: World) -> None:
    ok(world.send(EVENTS, _event(message="line one\n\tline two\r\n"), world.job), 201)
    assert_refused(world, "/v1/budgets", {"name": "a\tb", "ceiling_usd": "5"}, "name")


MAX_STEP = 2**63 - 1


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        (HEARTBEAT, {"step": MAX_STEP + 1}, "step"),
        (HEARTBEAT, {"step": 1, "total_steps": MAX_STEP + 1}, "total_steps"),
        (HEARTBEAT, {"step": 1, "checkpoint": {"step": 2**64, "path": "/c"}}, "checkpoint.step"),
        (
            "/v1/budgets/{budget}/runs",
            {"name": "r", "pod_id": "{pod}", "total_steps": MAX_STEP + 1},
            "total_steps",
        ),
    ],
    ids=["step", "total-steps", "checkpoint-step", "run-total-steps"],
)
def test_a_step_beyond_64_bits_is_refused(
    world: World, path: str, body: dict[str, Any], field: str
) -> None:
    assert_refused(world, path, body, field, world.job if path == HEARTBEAT else OPERATOR)


@pytest.mark.parametrize("step", [2**40, MAX_STEP], ids=["2^40", "2^63-1"])
def test_a_64_bit_step_is_stored_and_read_back(world: World, step: int) -> None:
    run = ok(
        world.send(
            "/v1/budgets/{budget}/runs", {"name": "long", "pod_id": "{pod}", "total_steps": step}
        ),
        201,
    )
    beat = {"step": step - 1, "total_steps": step, "checkpoint": {"step": step - 1, "path": "/c"}}
    ok(world.send(f"/v1/runs/{run['id']}/heartbeat", beat, run["token"]))
    again = ok(world.get(f"/v1/runs/{run['id']}"))
    assert (again["step"], again["total_steps"]) == (step - 1, step)
    assert again["checkpoint"]["step"] == step - 1


@pytest.mark.parametrize(
    "at",
    [
        "0001-01-01T00:30:00+01:00",
        "9999-12-31T23:30:00-05:00",
        "1999-12-31T23:59:59+00:00",
        "2100-01-01T00:00:00+00:00",
        "2026-01-01T12:00:00",
    ],
    ids=["year-1", "year-9999", "before-2000", "from-2100", "no-zone"],
)
def test_a_telemetry_time_out_of_range_or_without_a_zone_is_refused(world: World, at: str) -> None:
    assert_refused(world, TELEMETRY, _reading(at=at), "readings.0.at")


def test_the_event_log_filters_by_sane_times_only(world: World) -> None:
    response = world.get("/v1/events", since="0001-01-01T00:30:00+01:00")
    assert response.status_code == 422, response.text
    assert response.json()["error"]["details"][0]["field"] == "since"
    ok(world.get("/v1/events", since="2026-01-01T00:00:00"))  # no zone: UTC


def _nested(depth: int) -> dict[str, Any]:
    document: dict[str, Any] = {}
    for _ in range(depth - 1):
        document = {"a": document}
    return document


@pytest.mark.parametrize(
    ("path", "body", "why"),
    [
        (EVENTS, _event(evidence={"log": "x" * 16_384}), "bytes as JSON"),
        (EVENTS, _event(evidence=_nested(9)), "deeper than 8"),
        (EVENTS, _event(evidence={"loss": float("nan")}), "not finite"),
        (EVENTS, _event(evidence={"n": 2**64}), "64 bits"),
        (HEARTBEAT, {"step": 1, "metrics": {f"m{i}": i for i in range(65)}}, "at most 64"),
        (HEARTBEAT, {"step": 1, "metrics": {"m": "x" * 16_384}}, "bytes as JSON"),
        (HEARTBEAT, {"step": 1, "metrics": {"loss": float("inf")}}, "not finite"),
    ],
    ids=[
        "evidence-size",
        "evidence-depth",
        "evidence-nan",
        "evidence-huge-int",
        "metric-count",
        "metrics-size",
        "metric-infinite",
    ],
)
def test_a_document_out_of_bounds_is_refused(
    world: World, path: str, body: dict[str, Any], why: str
) -> None:
    field = "evidence" if path == EVENTS else "metrics"
    assert why in assert_refused(world, path, body, field, world.job)
    assert_log_reads(world)


def test_documents_within_bounds_are_taken(world: World) -> None:
    evidence = {"log": "x" * 16_000, "deep": _nested(7), "n": -(2**63), "loss": 0.25}
    ok(world.send(EVENTS, _event(evidence=evidence), world.job), 201)
    metrics = {f"m{i}": i for i in range(64)}
    ok(world.send(HEARTBEAT, {"step": 1, "metrics": metrics}, world.job))
    assert_log_reads(world)


def _assert_too_large(world: World, response: httpx.Response, before: Any) -> None:
    assert response.status_code == 413, response.text[:500]
    body = response.json()
    assert body["error"]["code"] == "too_large"
    assert str(MAX_BODY) in body["error"]["message"]
    assert world.stored() == before


def test_a_body_over_the_limit_is_413_with_or_without_a_length(world: World) -> None:
    document = json.dumps(_event(message="m", evidence={"x": "y" * MAX_BODY})).encode()
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {world.job}"}
    path = EVENTS.format(**world.ids)
    before = world.stored()

    declared = world.client.post(path, content=document, headers=headers)
    _assert_too_large(world, declared, before)

    def chunks() -> Iterator[bytes]:
        for start in range(0, len(document), 65_536):
            yield document[start : start + 65_536]

    streamed = world.client.post(path, content=chunks(), headers=headers)
    assert "content-length" not in {k.lower() for k in streamed.request.headers}
    _assert_too_large(world, streamed, before)


def test_a_body_at_the_limit_goes_through(world: World) -> None:
    body = json.dumps({"step": 1})
    padded = body + " " * (MAX_BODY - len(body))  # JSON allows the trailing spaces
    response = world.client.post(
        HEARTBEAT.format(**world.ids),
        content=padded.encode(),
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {world.job}"},
    )
    assert ok(response)["action"] == "continue"


@pytest.mark.parametrize(
    "url",
    [
        "/v1/budgets/bud%00x",
        "/v1/budgets/bud%00x/report",
        "/v1/runs/run%1b",
        "/v1/events?budget_id=bud%00x",
        "/v1/events?subject=run%3A%00",
        "/v1/extensions?budget_id=%00",
    ],
)
def test_a_control_character_in_the_url_is_refused(world: World, url: str) -> None:
    response = world.client.get(url)
    assert response.status_code == 422, response.text[:500]
    assert "the URL's" in response.json()["error"]["message"]
    ok(world.send("/v1/pods/pod%00/stop", {"reason": "r"}), 422)


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/v1/budgets", {"name": "b", "ceiling_usd": "5", "storage_tail_hours": []}, "storage"),
        (
            "/v1/budgets/{budget}/pods",
            {"provider": "fake", "provider_ref": "pod-2", "storage_gb": {"gb": 1}},
            "storage_gb",
        ),
        (
            "/v1/budgets/{budget}/runs",
            {"name": "r", "pod_id": "{pod}", "policy": {"idle_window_s": []}},
            "policy.idle_window_s",
        ),
    ],
    ids=["list", "object", "nested-list"],
)
def test_a_number_field_given_no_number_is_refused(
    world: World, path: str, body: dict[str, Any], field: str
) -> None:
    assert_refused(world, path, body, field)


def test_a_number_field_takes_a_numeric_string(world: World) -> None:
    body = {"name": "numbers", "ceiling_usd": "5", "storage_tail_hours": "2.5"}
    assert ok(world.send("/v1/budgets", body), 201)["storage_tail_hours"] == 2.5


def test_a_refusal_says_what_is_wrong_in_the_validators_own_words(world: World) -> None:
    """Not pydantic's "Value error, " before it: the field, then the problem."""
    not_money = assert_refused(world, "/v1/budgets", {"name": "x", "ceiling_usd": "abc"}, "ceiling")
    assert not_money == "ceiling_usd: 'abc' is not a decimal number of dollars"
    negative = assert_refused(world, "/v1/budgets", {"name": "x", "ceiling_usd": "-1"}, "ceiling")
    assert negative == "ceiling_usd: must not be negative"
