"""Several replicas on one PostgreSQL database, each in its own process, governing pods on the
fake RunPod cloud (its own process too): one leader at a time, a new one within the bound
when it is killed, and a leader paused past its lease that wakes up to do nothing.

The replicas run with a 3 s lease probed every 0.5 s, so a takeover is due within 3.5 s of
the last renewal; the waits here are far more generous (a busy 2-core machine), and the
time each takeover took is printed for the record, not asserted tightly (bench/ measures it).
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterator
from decimal import Decimal
from itertools import pairwise
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import create_engine, select
from sqlalchemy.orm import Session

from governor.db.tables import LedgerEntryRow
from tests.conftest import reset_postgres
from tests.e2e.conftest import (
    GovernorServer,
    SimulatedJob,
    create_run,
    declare_budget,
    get_pod,
    migrate,
    ok,
    usd,
    utcnow,
    wait_for,
    wait_pod_stopped,
)
from tests.e2e.runpod_cloud import KEY, RunPodCloud

pytestmark = [pytest.mark.e2e, pytest.mark.postgres]

LEASE_S, PROBE_S = 3.0, 0.5
TAKEOVER_DEADLINE_S = 60.0  # the bound is LEASE_S + PROBE_S; this is a generous deadline
# The ledger runs to the instant the governor saw a stop confirmed, the cloud's bill to the
# stop itself: apart by the stop call's round trip, well under this on a busy machine. A
# charge counted twice is seconds of the pod's life, far more.
STOP_SEEN_WITHIN_S = 1


@pytest.fixture
def cloud(tmp_path: Path) -> Iterator[RunPodCloud]:
    cloud = RunPodCloud(tmp_path)
    yield cloud
    cloud.close()


@pytest.fixture
def replicas(
    spawn: Callable[..., GovernorServer], cloud: RunPodCloud
) -> Callable[..., GovernorServer]:
    """`replica(name, scheduler=True)`: a governor on this test's database, not started."""
    url = reset_postgres()
    migrate(url, Path(os.getcwd()))

    def make(name: str, *, scheduler: bool = True) -> GovernorServer:
        return spawn(
            url,
            GOVERNOR_REPLICA_ID=name,
            GOVERNOR_SCHEDULER_ENABLED=str(scheduler).lower(),
            GOVERNOR_ENFORCE_INTERVAL_S="0.5",
            GOVERNOR_LEADER_LEASE_S=str(LEASE_S),
            GOVERNOR_LEADER_PROBE_S=str(PROBE_S),
            GOVERNOR_BILLING_INTERVAL_S="60",
            GOVERNOR_RUNPOD_API_KEY=KEY,
            GOVERNOR_RUNPOD_URL=f"{cloud.url}/graphql",
            GOVERNOR_RUNPOD_STOP_LATENCY_S="0.5",
        )

    return make


def readyz(server: GovernorServer) -> dict[str, Any]:
    with server.client(None) as client:
        response = client.get("/readyz")
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def leader_seen_by(server: GovernorServer, after_term: int = 0) -> dict[str, Any] | None:
    leader = readyz(server)["leader"]
    return leader if leader is not None and leader["term"] > after_term else None


def wait_leader(server: GovernorServer, after_term: int = 0) -> tuple[dict[str, Any], float]:
    """The leader a replica reports once its term is past `after_term`; and how long it took."""
    started = time.monotonic()
    leader = wait_for(
        lambda: leader_seen_by(server, after_term),
        f"a leader after term {after_term}",
        TAKEOVER_DEADLINE_S,
        interval_s=0.1,
    )
    return leader, time.monotonic() - started


def register(client: httpx.Client, budget_id: str, ref: str) -> dict[str, Any]:
    body = {"provider": "runpod", "provider_ref": ref}
    return ok(client.post(f"/v1/budgets/{budget_id}/pods", json=body), 201)


def stops_sent(cloud: RunPodCloud, ref: str) -> dict[str, int]:
    sent: dict[str, int] = {}
    for mutation in cloud.state().mutations:
        if mutation["pod_id"] == ref:
            sent[mutation["name"]] = sent.get(mutation["name"], 0) + 1
    return sent


def ledger(database_url: str, pod_id: str) -> list[LedgerEntryRow]:
    engine = create_engine(database_url)
    try:
        with Session(engine) as session:
            return list(
                session.scalars(
                    select(LedgerEntryRow)
                    .where(LedgerEntryRow.pod_id == pod_id)
                    .order_by(LedgerEntryRow.period_start)
                )
            )
    finally:
        engine.dispose()


def assert_charged_once(entries: list[LedgerEntryRow]) -> Decimal:
    """No two accruals of one charge overlap in time; returns the compute charged."""
    for charge in ("compute", "storage"):
        spans = [(e.period_start, e.period_end) for e in entries if e.charge == charge]
        for (_, end), (start, _) in pairwise(spans):
            assert end <= start, f"{charge} charged twice between {start} and {end}"
    return sum((e.amount_usd for e in entries if e.charge == "compute"), Decimal(0))


def test_killing_the_leader_mid_stop_and_mid_metering_hands_over_without_a_double(
    replicas: Callable[..., GovernorServer], cloud: RunPodCloud
) -> None:
    first, second = replicas("gov-a"), replicas("gov-b")
    front = replicas("gov-front", scheduler=False)  # serves the jobs; never leads
    usd_per_hour = {"pod-stop": 360, "pod-meter": 36}
    cloud.start(",".join(f"{ref}={rate}" for ref, rate in usd_per_hour.items()))
    first.start().wait_ready()
    leader, _ = wait_leader(first)
    assert leader["replica"] == "gov-a"
    second.start().wait_ready()
    front.start().wait_ready()
    assert readyz(front)["leading"] is False and readyz(second)["leading"] is False

    with front.client() as operator:
        budget = declare_budget(operator, "1000")
        doomed = register(operator, budget["id"], "pod-stop")
        metered = register(operator, budget["id"], "pod-meter")
        create_run(operator, budget["id"], doomed["id"], checkpoint_grace_s=4)
        run = create_run(operator, budget["id"], metered["id"], heartbeat_timeout_s=60)
        with SimulatedJob(front.url, run, interval_s=0.5, max_s=240) as job:
            # 1. The leader dies while a stop order waits for its job to save.
            order = ok(operator.post(f"/v1/pods/{doomed['id']}/stop", json={"reason": "e2e"}), 202)
            assert order["state"] == "requested"  # its job never checks in: the deadline rules
            first.kill()
            leader, took = wait_leader(front, after_term=leader["term"])
            print(f"takeover after the leader was killed mid-stop: {took:.1f} s")
            assert leader["replica"] == "gov-b"
            stopped = wait_pod_stopped(operator, doomed["id"], timeout_s=TAKEOVER_DEADLINE_S)
            assert stopped["stop_order"]["state"] == "stopped"
            assert stops_sent(cloud, "pod-stop") == {"podStop": 1}

            # 2. The new leader dies while it meters; the first comes back and takes over.
            first.start().wait_ready()
            wait_for(lambda: len(job.replies) >= 5, "the job to check in a few times")
            second.kill()
            leader, took = wait_leader(front, after_term=leader["term"])
            print(f"takeover after the leader was killed mid-metering: {took:.1f} s")
            assert leader["replica"] == "gov-a"
            beats = len(job.replies)
            wait_for(lambda: len(job.replies) >= beats + 4, "the job to go on checking in")
        assert job.errors == [], "every heartbeat sent to a live replica is answered"
        ok(operator.post(f"/v1/pods/{metered['id']}/stop", json={"reason": "e2e"}), 202)
        wait_pod_stopped(operator, metered["id"], timeout_s=TAKEOVER_DEADLINE_S)
        spent = {
            ref: usd(get_pod(operator, p["id"])["spent_usd"])
            for ref, p in (("pod-stop", doomed), ("pod-meter", metered))
        }

    assert stops_sent(cloud, "pod-meter") == {"podStop": 1}
    now = utcnow()
    for ref, pod in (("pod-stop", doomed), ("pod-meter", metered)):
        entries = ledger(first.database_url, pod["id"])
        governed_from = min(e.period_start for e in entries)  # its registration
        bill = cloud.state().pods[ref].bill_usd(now, since=governed_from)
        charged = assert_charged_once(entries)
        apart = Decimal(usd_per_hour[ref] * STOP_SEEN_WITHIN_S) / 3600
        assert abs(charged - bill) <= apart, f"{ref}: ledger ${charged}, cloud ${bill}"
        assert spent[ref] >= charged


def test_a_paused_leader_wakes_up_to_do_nothing_and_steps_down(
    replicas: Callable[..., GovernorServer], cloud: RunPodCloud
) -> None:
    first, second = replicas("gov-a"), replicas("gov-b")
    cloud.start("pod-1=36")
    first.start().wait_ready()
    leader, _ = wait_leader(first)
    second.start().wait_ready()
    with second.client() as operator:
        budget = declare_budget(operator, "1000")
        pod = register(operator, budget["id"], "pod-1")

        assert first.process is not None
        first.process.send_signal(signal.SIGSTOP)
        try:
            taken, took = wait_leader(second, after_term=leader["term"])
            print(f"takeover from a paused leader: {took:.1f} s")
            assert taken["replica"] == "gov-b"
            ok(operator.post(f"/v1/pods/{pod['id']}/stop", json={"reason": "e2e"}), 202)
            wait_pod_stopped(operator, pod["id"], timeout_s=TAKEOVER_DEADLINE_S)
            resumed_at = len(first.output(this_start_only=False))
        finally:
            first.process.send_signal(signal.SIGCONT)

        wait_for(lambda: readyz(first)["leading"] is False, "the old leader to step down")
        wait_for(
            lambda: "stops leading" in first.output(this_start_only=False)[resumed_at:],
            "the old leader to say it stepped down",
        )
        assert readyz(second)["leading"] is True
        assert readyz(first)["leader"]["replica"] == "gov-b"
        assert ok(operator.get("/v1/status"))["leader"]["replica"] == "gov-b"

    after = first.output(this_start_only=False)[resumed_at:]
    acted = [line for line in after.splitlines() if "governor.events" in line]
    assert acted == [], "the old leader acted after it woke up:\n" + "\n".join(acted)
    assert stops_sent(cloud, "pod-1") == {"podStop": 1}
