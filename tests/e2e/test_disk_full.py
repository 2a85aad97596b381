"""The disk under the SQLite file fills up, then is freed, under a running governor with a job
beating: while the server's connections may add no page to the file, SQLite itself refuses
every write that needs one ("database or disk is full"), and a write that rewrites a row in
place (the lease's renewal) or commits nothing still goes through, as on a real full disk.

The alarms tell the truth: every heartbeat is a 503 and readiness is 503 in every sample
until the disk is freed, 200 after; the one critical event gives the outage's real length,
from the first refused heartbeat to the first that committed again; no pass is said to be
stuck; and the log says each kind of failure once, without a traceback."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.conftest import (
    GovernorServer,
    assert_told_once,
    create_run,
    declare_budget,
    http_client,
    passes_settled,
    register_pod,
    utcnow,
    wait_for,
)

pytestmark = pytest.mark.e2e

FULL_DISK = Path(__file__).with_name("full_disk.py")
OUTAGE_S = 10.0
TOLERANCE_S = 3.0


def beat(job: httpx.Client, run_id: str, step: int) -> int:
    body = {"step": step, "metrics": {"loss": 1 / step, "note": "x" * 200}}
    return job.post(f"/v1/runs/{run_id}/heartbeat", json=body).status_code


def outage_event(operator: httpx.Client) -> dict[str, Any] | None:
    response = operator.get("/v1/events", params={"severity": "critical"})
    said = "the database refused this replica's writes"
    return next((e for e in response.json()["items"] if said in e["message"]), None)


def test_a_full_disk_is_unready_throughout_and_raised_once_with_its_real_length(
    spawn: Callable[..., GovernorServer], tmp_path: Path
) -> None:
    full = tmp_path / "disk-full"  # while it exists, the disk is full
    server = spawn(f"sqlite:///{tmp_path / 'governor.db'}", GOVERNOR_ENFORCE_INTERVAL_S="0.5")
    server.command = [sys.executable, str(FULL_DISK), str(full)]
    server.start().wait_ready()
    with server.client() as operator:
        budget = declare_budget(operator, "1000000")
        pod = register_pod(operator, budget["id"])
        run = create_run(operator, budget["id"], pod["id"], heartbeat_timeout_s=600)
        with http_client(server.url, run["token"]) as job:
            steps = iter(range(1, 1_000_000))
            assert beat(job, run["id"], next(steps)) == 200

            said_before = len(server.output())
            full.touch()  # the rows already have room on their last pages for a while

            def refused() -> datetime | None:
                sent = utcnow()
                return sent if beat(job, run["id"], next(steps)) == 503 else None

            began = wait_for(refused, "the full disk to refuse a heartbeat")
            first_refused_at = utcnow()
            readiness: list[int] = []
            while (utcnow() - began).total_seconds() < OUTAGE_S:
                assert beat(job, run["id"], next(steps)) == 503
                readiness.append(operator.get("/readyz").status_code)
                time.sleep(0.2)

            freed_at = utcnow()
            full.unlink()
            wait_for(lambda: beat(job, run["id"], next(steps)) == 200, "a heartbeat to commit")
            committed_at = utcnow()

        wait_for(lambda: operator.get("/readyz").status_code == 200, "ready once freed")
        event = wait_for(lambda: outage_event(operator), "a critical event about the outage")
        wait_for(lambda: passes_settled(operator), "the passes to finish again")
        critical = operator.get("/v1/events", params={"severity": "critical"}).json()["items"]

    assert len(readiness) >= OUTAGE_S / 2 and set(readiness) == {503}, readiness
    span = event["evidence"]
    assert began <= datetime.fromisoformat(span["from"]) <= first_refused_at
    assert freed_at <= datetime.fromisoformat(span["to"]) <= committed_at
    real_s = (committed_at - began).total_seconds()
    assert abs(float(span["seconds"]) - real_s) <= TOLERANCE_S, (span, real_s)
    assert "api" in span["writers"] and "lease" not in span["writers"]  # renewed in place
    assert [e for e in critical if "refused" in e["message"]] == [event]
    assert not [e["message"] for e in critical if "restart" in e["message"]]
    assert_told_once(server.output()[said_before:])
