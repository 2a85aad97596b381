"""Readiness that tells the truth: an idle, healthy server stays ready through its slowest
passes; and on SQLite, one process runs the periodic work, a second says why it does not."""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import GovernorServer, ServerFactory, ok, wait_for

pytestmark = pytest.mark.e2e

BILLING_S = 1.0


def readyz(server: GovernorServer) -> tuple[int, dict[str, Any]]:
    with server.client(None) as client:
        response = client.get("/readyz")
    return response.status_code, response.json()


def test_an_idle_server_stays_ready_across_its_slowest_passes(start_server: ServerFactory) -> None:
    server = start_server(GOVERNOR_BILLING_INTERVAL_S=str(BILLING_S))
    wait_for(lambda: readyz(server)[1]["leader"], "the server to lead")
    deadline = time.monotonic() + 3 * BILLING_S
    answers = []
    while time.monotonic() < deadline:
        answers.append(readyz(server))
        time.sleep(0.1)
    assert {code for code, _ in answers} == {200}
    _, body = answers[-1]
    assert body["checks"] == {"database": "ok", "schema": "ok", "writes": "ok"}
    assert body["leading"] is True and body["scheduler"] == "on"
    passes = body["leader"]["passes"]
    assert set(passes) == {
        *("enforce", "stops", "accrue", "sample", "fold", "event_fold", "billing", "sweep"),
        "launches",  # accepted launches' reservations released when their time is up
        "kueue",  # Kueue's admission checks answered (nothing to do without GOVERNOR_KUEUE_*)
    }
    assert {p["state"] for p in passes.values()} == {"ok"}
    for slowest in ("billing", "sweep"):  # the account sweep runs at the billing interval
        assert passes[slowest]["every_s"] == BILLING_S
        assert passes[slowest]["last_finished"] is not None


def test_a_second_process_on_one_sqlite_file_serves_but_leaves_the_passes_to_the_first(
    spawn: Callable[..., GovernorServer], tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'governor.db'}"
    first = spawn(url, GOVERNOR_REPLICA_ID="first").start().wait_ready()
    wait_for(lambda: readyz(first)[1]["leading"], "the first process to lead")
    second = spawn(url, GOVERNOR_REPLICA_ID="second").start().wait_ready()

    code, body = readyz(second)
    assert code == 200 and body["leading"] is False
    assert body["leader"]["replica"] == "first"
    wait_for(
        lambda: "another process on this SQLite file runs the periodic work" in second.output(),
        "the second process to say why it does not run the passes",
    )
    with second.client() as operator:  # it serves the whole API all the same
        ok(operator.post("/v1/budgets", json={"name": "b", "ceiling_usd": "10"}), 201)

    # A clean shutdown (uvicorn re-raises the signal once it has shut down) hands the file
    # and the lease back: the second takes over.
    assert first.terminate() in (0, -signal.SIGTERM)
    assert "replica first stepped down" in first.output()
    wait_for(lambda: readyz(second)[1]["leading"], "the second process to take over")
