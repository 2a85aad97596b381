"""The database goes away under a running governor: a PostgreSQL cluster of the test's own is
restarted, then stopped for 12 s. Every request meanwhile is a clean 503 with Retry-After
(never a 500), readiness and /metrics say writes are refused, a webhook hears of it while it
lasts (from memory: nothing can be committed), the server recovers by itself, the time
without a leader and when metering stopped and resumed are raised as critical events, and
the spend afterwards is exactly the rate times the time the pod ran. The alarms tell the
truth: readiness is 503 throughout and 200 after, the outage's event gives its real length,
no pass is said to be stuck (they waited on the database), and the log says each kind of
failure once, without a traceback."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from decimal import Decimal

import httpx
import pytest

from governor.services.replica.write_watch import QUIET_S
from tests.e2e.conftest import (
    RATE_USD_PER_HOUR,
    WAIT_TIMEOUT_S,
    GovernorServer,
    assert_told_once,
    declare_budget,
    get_pod,
    migrate,
    passes_settled,
    register_pod,
    usd,
    utcnow,
    wait_for,
)
from tests.e2e.private_postgres import PrivatePostgres
from tests.e2e.webhook_receiver import Receiver

pytestmark = [pytest.mark.e2e, pytest.mark.postgres]

OUTAGE_S = 12.0
PER_SECOND = Decimal(RATE_USD_PER_HOUR) / 3600


@pytest.fixture
def cluster() -> Iterator[PrivatePostgres]:
    postgres = PrivatePostgres()
    try:
        postgres.start()
        yield postgres
    finally:
        postgres.close()


def assert_unavailable(response: httpx.Response) -> None:
    assert response.status_code == 503, response.text[:300]
    assert int(response.headers["Retry-After"]) > 0
    assert response.json()["error"]["code"] == "unavailable"


def seconds(a: datetime, b: datetime) -> Decimal:
    return Decimal(str((b - a).total_seconds()))


def passes_finished_since(client: httpx.Client, since: datetime, within_s: float = 5.0) -> bool:
    """Every pass that runs at least every `within_s` has finished since `since`."""
    response = client.get("/readyz")
    leader = response.json().get("leader") if response.status_code == 200 else None
    if not leader:
        return False
    return all(
        p["last_finished"] is not None and datetime.fromisoformat(p["last_finished"]) > since
        for p in leader["passes"].values()
        if p["every_s"] <= within_s
    )


def test_an_outage_is_a_clean_503_then_recovers_alarms_and_loses_no_money(
    cluster: PrivatePostgres, spawn: Callable[..., GovernorServer], receiver: Receiver
) -> None:
    url = cluster.create_database("governor")
    hooks = [{"url": f"{receiver.url}/hooks", "kind": "json", "min_severity": "critical"}]
    server = spawn(  # a 2 s lease
        url, GOVERNOR_ENFORCE_INTERVAL_S="0.5", GOVERNOR_WEBHOOKS=json.dumps(hooks)
    )
    migrate(url, server.workdir)
    server.start().wait_ready()
    with server.client() as operator:
        budget = declare_budget(operator, "1000000")
        before = utcnow()
        pod = register_pod(operator, budget["id"])
        after = utcnow()

        restarted = utcnow()
        cluster.restart()  # a blink: the next requests find fresh connections
        # A writer the blink refused ends its outage with its next write that changes rows; if
        # that was the hourly accrual, which has nothing to write for an hour, the outage ends
        # once no write has been refused for QUIET_S (write_watch): ready within that, or at once.
        wait_for(
            lambda: operator.get("/readyz").status_code == 200,
            "ready after a restart",
            timeout_s=QUIET_S + WAIT_TIMEOUT_S,
        )
        assert operator.get(f"/v1/pods/{pod['id']}").status_code == 200
        # a pass that met a connection the blink ended has failed, and committed again since,
        # so that the blink's failures are a span of their own, told before the outage's
        wait_for(lambda: passes_finished_since(operator, restarted), "the passes to run again")

        said_before = len(server.output())  # the blink above is told on its own
        stopped_at = utcnow()
        cluster.stop()
        down_at = time.monotonic()
        while time.monotonic() - down_at < OUTAGE_S:
            assert_unavailable(operator.get(f"/v1/pods/{pod['id']}"))
            assert operator.get("/readyz").status_code == 503
            assert operator.get("/healthz").status_code == 200  # the process is alive
            time.sleep(0.5)
        readyz = operator.get("/readyz").json()
        assert readyz["checks"]["writes"].startswith("refused since"), readyz
        assert "governor_database_writes_failing 1.0" in operator.get("/metrics").text
        notices = wait_for(lambda: receiver.at("/hooks"), "a webhook notice during the outage")
        assert "refuses writes" in notices[0].body["event"]["message"], notices[0].body
        started_at = utcnow()  # writes can succeed from here on, before start() returns
        cluster.start()

        wait_for(lambda: operator.get("/readyz").status_code == 200, "ready after the outage")
        ready_at = utcnow()

        def alarm() -> dict[str, object] | None:
            response = operator.get("/v1/events", params={"severity": "critical"})
            if response.status_code != 200:
                return None
            return next(
                (e for e in response.json()["items"] if "no replica led" in e["message"]), None
            )

        event = wait_for(alarm, "a critical event about the time nobody metered")

        def resumed() -> dict[str, object] | None:
            response = operator.get("/v1/events", params={"severity": "critical"})
            if response.status_code != 200:
                return None
            said = "metering and enforcement stopped at"
            return next((e for e in response.json()["items"] if said in e["message"]), None)

        outage = wait_for(resumed, "a critical event saying when metering stopped and resumed")
        asked_from = utcnow()
        spent = usd(get_pod(operator, pod["id"])["spent_usd"])
        asked_to = utcnow()
        # the passes run again (each finishes within its interval), and none was said stuck
        wait_for(lambda: passes_settled(operator), "the passes to finish again after the outage")
        critical = operator.get("/v1/events", params={"severity": "critical"}).json()["items"]

    evidence = event["evidence"]
    assert isinstance(evidence, dict) and float(evidence["seconds"]) >= OUTAGE_S
    span = outage["evidence"]
    assert isinstance(span, dict) and "lease" in span["writers"]  # type: ignore[operator]
    assert stopped_at <= datetime.fromisoformat(str(span["from"])) <= started_at
    assert started_at <= datetime.fromisoformat(str(span["to"])) <= ready_at
    assert OUTAGE_S - 2 <= float(span["seconds"]) <= float(seconds(stopped_at, ready_at))
    assert not [e["message"] for e in critical if "restart" in e["message"]]
    assert_told_once(server.output()[said_before:])
    # Exactly the rate times the time it ran: at least from the latest moment it can have
    # been registered to the earliest the figure can have been read, at most the widest.
    assert PER_SECOND * seconds(after, asked_from) <= spent
    assert spent <= PER_SECOND * seconds(before, asked_to)
