"""Webhooks from a real server to a receiver in this test process (127.0.0.1): exactly one
notification per event that reaches a sink's minimum severity (and a completed stop to every
sink), a retry after a first 500, bounded attempts against a sink that is down (on record as
an event, told to the others, counted in /metrics), and identical messages collapsed."""

from __future__ import annotations

import json
import threading
from collections import Counter
from typing import Any

import pytest

from tests.e2e.conftest import (
    ServerFactory,
    SimulatedJob,
    budget_events,
    create_run,
    declare_budget,
    get_budget,
    http_client,
    ok,
    register_pod,
    wait_for,
    wait_pod_stopped,
)
from tests.e2e.webhook_receiver import Receiver

pytestmark = pytest.mark.e2e

RANK = {"info": 0, "warning": 1, "critical": 2}
MAX_ATTEMPTS = 3


def to_every_sink(event: dict[str, Any]) -> bool:
    """What a sink that takes critical events only is told: those, and a completed stop."""
    return event["severity"] == "critical" or event["message"].startswith("Pod stopped")


def test_every_event_that_crosses_a_sinks_severity_arrives_exactly_once(
    start_server: ServerFactory, receiver: Receiver
) -> None:
    hooks = [
        {"url": f"{receiver.url}/flaky", "kind": "json", "min_severity": "warning"},
        {"url": f"{receiver.url}/slack", "kind": "slack", "min_severity": "critical"},
        {"url": f"{receiver.url}/down", "kind": "json", "min_severity": "critical"},
    ]
    server = start_server(
        GOVERNOR_WEBHOOKS=json.dumps(hooks),
        GOVERNOR_WEBHOOK_BACKOFF_S="0.1",
        GOVERNOR_WEBHOOK_MAX_ATTEMPTS=str(MAX_ATTEMPTS),
    )
    down = f"json webhook 3 at {receiver.url}"  # how the server names that sink
    with server.client() as operator:
        budget = declare_budget(operator, "4")  # $1 a second: the ceiling comes in seconds
        pod = register_pod(operator, budget["id"])
        run = create_run(operator, budget["id"], pod["id"])
        with SimulatedJob(server.url, run) as job, http_client(server.url, job.token) as c:
            path = f"/v1/runs/{run['id']}/events"
            reports = [
                ("info", "provider", "a note: the image pull took 40 s"),
                ("warning", "harness", "disk almost full on /workspace"),
                ("warning", "harness", "disk almost full on /workspace"),  # folds into one
                ("critical", "model", "CUDA out of memory at step 12"),
            ]
            for severity, category, message in reports:
                body = {"severity": severity, "category": category, "message": message}
                ok(c.post(path, json=body), 201)
            wait_pod_stopped(operator, pod["id"])  # the ceiling: critical events
            wait_for(
                lambda: get_budget(operator, budget["id"])["state"] == "exhausted", "exhausted"
            )
        missed = {e["id"] for e in budget_events(operator, budget["id"]) if to_every_sink(e)}
        assert len(missed) >= 4  # the OOM, the ceiling stop, the exhaustion; the pod stopped

        # /down takes nothing: each critical is given up on after its attempts, and that is
        # on record as one warning (folded) whose count is the notices /down missed
        def gave_up() -> list[dict[str, Any]]:
            return [
                e
                for e in budget_events(operator, budget["id"])
                if e["subject"] == f"webhook:{down}" and e["count"] == len(missed)
            ]

        [recorded] = wait_for(gave_up, "the give-ups on record")
        log = budget_events(operator, budget["id"])
        metrics = operator.get("/metrics").text

    assert recorded["severity"] == "warning"
    assert recorded["message"].startswith(f"The {down} did not take a notice after 3 attempt(s)")
    [repeated] = [e for e in log if e["message"] == "disk almost full on /workspace"]
    assert repeated["count"] == 2  # one event, told once
    wanted = {
        "/flaky": {e["id"] for e in log if RANK[e["severity"]] >= 1 or to_every_sink(e)},
        "/slack": {e["id"] for e in log if to_every_sink(e)},
    }
    assert wanted["/slack"] == missed
    assert recorded["id"] in wanted["/flaky"]  # the other sinks are told that /down is down

    def all_arrived() -> bool:
        return all(set(receiver.delivered(p)) >= ids for p, ids in wanted.items())

    wait_for(all_arrived, "every notification")
    threading.Event().wait(1.0)  # anything more would come within this second

    for p, ids in wanted.items():
        assert receiver.delivered(p) == Counter(dict.fromkeys(ids, 1)), p
    first = receiver.at("/flaky")[0]
    assert first.status == 500
    assert receiver.delivered("/flaky")[first.event_id] == 1  # the retry reached it
    attempts = Counter(r.event_id for r in receiver.at("/down"))
    # every critical, MAX_ATTEMPTS times; a completed stop too (it goes to every sink)
    assert attempts == Counter(dict.fromkeys(wanted["/slack"], MAX_ATTEMPTS))
    given_up = len(wanted["/slack"])
    for outcome, count in [("gave_up", given_up), ("failed", given_up * (MAX_ATTEMPTS - 1))]:
        series = f'governor_webhook_deliveries_total{{outcome="{outcome}",sink="{down}"}}'
        assert f"{series} {float(count)}" in metrics, outcome

    by_id = {e["id"]: e for e in log}
    for r in receiver.at("/flaky"):
        assert r.body["event"]["message"] == by_id[r.event_id]["message"]
        assert r.body["budget"]["name"] == budget["name"]
    for r in receiver.at("/slack"):
        event = by_id[r.event_id]
        mark = (
            ":rotating_light: *CRITICAL*"
            if event["severity"] == "critical"
            else ":information_source: *INFO*"
        )
        assert r.body["text"].startswith(mark)
        assert f"budget *{budget['name']}*" in r.body["blocks"][0]["text"]["text"]
