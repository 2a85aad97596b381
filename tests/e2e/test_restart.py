"""SIGKILL the governor and start it again on the same database and the same fake cloud.

The cloud does not stop billing because the governor died: the downtime must be charged,
a stop that was under way must finish, and nothing may be charged twice.
"""

from __future__ import annotations

import time
from datetime import datetime
from decimal import Decimal

import pytest

from tests.e2e.conftest import (
    RATE_USD_PER_HOUR,
    ServerFactory,
    SimulatedJob,
    create_run,
    declare_budget,
    get_budget,
    parse_time,
    register_pod,
    usd,
    utcnow,
    wait_for,
    wait_pod_stopped,
    wait_stop_order,
)

pytestmark = pytest.mark.e2e

DOWNTIME_S = 2.0
ROUNDING_USD = Decimal("0.01")  # micro-dollar rounding of each accrual, summed, with room
STOP_LATENCY_S = 5  # long enough to kill the governor while the provider is still stopping


def cost(seconds: float) -> Decimal:
    return RATE_USD_PER_HOUR * Decimal(str(max(0.0, seconds))) / 3600


def seconds_between(start: datetime | str, end: datetime | str) -> float:
    start = parse_time(start) if isinstance(start, str) else start
    end = parse_time(end) if isinstance(end, str) else end
    return (end - start).total_seconds()


def test_time_the_governor_was_down_is_charged_after_restart(start_server: ServerFactory) -> None:
    server = start_server()
    with server.client() as operator:
        budget = declare_budget(operator, "1000.00")
        pod = register_pod(operator, budget["id"], "pod-1")
        wait_for(lambda: usd(get_budget(operator, budget["id"])["spent_usd"]) > 0, "spend")

    server.kill()
    killed_at = utcnow()
    time.sleep(DOWNTIME_S)  # the point of the test: the cloud bills while nobody meters
    server.start().wait_ready()
    restarted_at = utcnow()
    assert seconds_between(killed_at, restarted_at) >= DOWNTIME_S

    with server.client() as operator:  # spend is the ledger plus what is not yet written to it
        cloud_pod = server.cloud_pod("pod-1")
        asked_at = utcnow()
        spent = usd(get_budget(operator, budget["id"])["spent_usd"])
        answered_at = utcnow()

    registration_skew = seconds_between(pod["accrued_until"], cloud_pod.started_at)
    assert spent >= cloud_pod.bill_usd(asked_at) - ROUNDING_USD, "the downtime was not charged"
    most = cloud_pod.bill_usd(answered_at) + cost(registration_skew) + ROUNDING_USD
    assert spent <= most, f"metered ${spent}, more than the cloud's ${most}: charged twice"


def test_stop_interrupted_by_a_crash_completes_after_restart_and_charges_once(
    start_server: ServerFactory,
) -> None:
    ceiling = Decimal("12.00")
    server = start_server(GOVERNOR_FAKE_STOP_LATENCY_S=str(STOP_LATENCY_S))
    with server.client() as operator:
        budget = declare_budget(operator, str(ceiling))
        pod = register_pod(operator, budget["id"], "pod-1")
        run = create_run(
            operator, budget["id"], pod["id"], heartbeat_timeout_s=5, checkpoint_grace_s=1
        )
        with SimulatedJob(server.url, run, on_stop="ack") as job:
            job.join()
        assert job.errors == [] and job.ack is not None
        sent = wait_stop_order(operator, pod["id"], "provider_stop_sent")

    server.kill()
    killed_at = utcnow()
    cloud_pod = server.cloud_pod("pod-1")
    assert cloud_pod.stopped_at is None or parse_time(cloud_pod.stopped_at) > killed_at, (
        "the stop had already finished before the kill: the scenario did not happen"
    )
    server.start().wait_ready()

    with server.client() as operator:
        stopped = wait_pod_stopped(operator, pod["id"])
        spent_on_budget = usd(get_budget(operator, budget["id"])["spent_usd"])

    order = stopped["stop_order"]
    assert order["id"] == sent["id"], "the interrupted order was not the one that finished"
    # by the restarted server, which may finish it before its readiness is seen from here
    assert parse_time(order["confirmed_at"]) > killed_at
    assert order["ack_checkpoint"] == job.ack["checkpoint"]

    cloud = server.cloud()
    cloud_pod = cloud.pods["pod-1"]
    assert cloud_pod.stopped_at is not None

    spent_on_pod = usd(stopped["spent_usd"])
    bill = cloud_pod.bill_usd(utcnow())
    assert spent_on_pod >= bill, f"metered ${spent_on_pod} under the cloud's bill ${bill}"
    # The meter counts the pod until the governor confirms the stop; nothing more than that.
    unconfirmed_s = seconds_between(cloud_pod.stopped_at, stopped["stopped_at"])
    registration_skew = seconds_between(pod["accrued_until"], cloud_pod.started_at)
    most = bill + cost(unconfirmed_s) + cost(registration_skew) + ROUNDING_USD
    assert spent_on_pod <= most, f"metered ${spent_on_pod}, more than ${most}: charged twice"
    assert spent_on_budget == spent_on_pod
    assert spent_on_budget <= ceiling
