"""A provider's stop latency learned from its own stops: the 95th percentile of its provider
and region's latest twenty request-to-stopped times, once there are five, never below the
declared figure, and the shutdown part of committed spend holding it."""

from __future__ import annotations

from fastapi.testclient import TestClient
from sqlalchemy import func, select

from governor.db import repository as repo
from governor.db.tables import StopTimeRow
from governor.domain.model import Category, PodState
from governor.domain.money import charge
from governor.domain.stop_latency import LatencySource
from governor.services.fleet import pod_model, pods
from tests.integration.conftest import BY, OPERATOR, Governor, ok

DECLARED_S = 30.0  # the fake cloud's declared stop latency (make_governor's)


def stop_timed(
    gov: Governor,
    budget: str,
    ref: str,
    takes_s: float,
    *,
    region: str | None = None,
    failures: int = 0,
    retry_after_s: float | None = None,
) -> str:
    """A pod registered (in `region`) and stopped by hand on a cloud whose stop really takes
    `takes_s`, its first `failures` calls failing, each asking to wait `retry_after_s`; a
    tick at each of those instants, so the stop is timed at `takes_s` plus the waits."""
    if region is not None:
        gov.cloud.regions[ref] = region
    pod = gov.pod(budget, ref)
    gov.cloud.stop_takes_s = takes_s
    gov.cloud.stop_failures, gov.cloud.retry_after_s = failures, retry_after_s
    with gov.session() as s:
        pods.stop_manually(s, gov.ctx, pod, "test", gov.clock.now(), by=BY)
    gov.tick()  # sent (or refused, and retried once the wait asked for is over)
    for _ in range(failures):
        gov.tick(retry_after_s or 0.0)
    gov.tick(takes_s)
    assert stopped_state(gov, pod) is PodState.STOPPED
    return pod


def stopped_state(gov: Governor, pod_id: str) -> PodState:
    with gov.session() as s:
        return repo.get_pod(s, pod_id).state


def latency(gov: Governor, pod_id: str) -> pod_model.PodStopLatency:
    with gov.session() as s:
        return pod_model.get(s, gov.ctx.config, pod_id, gov.clock.now()).stop_latency


def provider_warnings(gov: Governor) -> list[str]:
    with gov.session() as s:
        return [
            e.message for e in repo.events(s, category=Category.PROVIDER, subject="provider:fake")
        ]


def test_fewer_than_five_stops_leave_the_declared_figure_alone(gov: Governor) -> None:
    budget = gov.budget()
    for n in range(4):
        stop_timed(gov, budget, f"slow-{n}", takes_s=100.0)
    watched = gov.pod(budget, "watched")
    seen = latency(gov, watched)
    assert (seen.source, seen.seconds, seen.learned_s, seen.stops) == (
        LatencySource.DECLARED,
        DECLARED_S,
        None,
        4,
    )
    assert provider_warnings(gov) == []


def test_five_slow_stops_widen_every_pods_shutdown_margin_and_say_so_once(gov: Governor) -> None:
    budget = gov.budget()
    running = gov.pod(budget, "running")  # registered before any stop: learns all the same
    for n, takes in enumerate([40.0, 55.0, 70.0, 45.0, 50.0]):
        stop_timed(gov, budget, f"slow-{n}", takes_s=takes)
    seen = latency(gov, running)
    # nearest rank of five: the slowest of them
    assert (seen.source, seen.seconds, seen.learned_s, seen.stops) == (
        LatencySource.LEARNED,
        70.0,
        70.0,
        5,
    )
    reaction_s = gov.ctx.config.reaction_s
    book = gov.book(budget)
    assert book.figures.shutdown == charge(book.figures.burn_per_hour, 70.0 + reaction_s)
    later = gov.pod(budget, "registered-later")
    assert latency(gov, later).seconds == 70.0
    [warning] = provider_warnings(gov)
    assert "70.0 s" in warning and "30.0 s declared" in warning
    stop_timed(gov, budget, "slow-5", takes_s=80.0)
    assert latency(gov, running).seconds == 80.0
    assert len(provider_warnings(gov)) == 1  # told when it first exceeded, not at every stop


def test_a_provider_faster_than_declared_keeps_its_declared_margin(gov: Governor) -> None:
    budget = gov.budget()
    for n in range(6):
        stop_timed(gov, budget, f"quick-{n}", takes_s=5.0 + n)
    seen = latency(gov, gov.pod(budget, "watched"))
    assert (seen.source, seen.seconds, seen.learned_s, seen.stops) == (
        LatencySource.DECLARED,
        DECLARED_S,
        10.0,
        6,
    )
    assert provider_warnings(gov) == []


def test_only_the_latest_twenty_stops_count(gov: Governor) -> None:
    budget = gov.budget()
    for n in range(20):
        stop_timed(gov, budget, f"slow-{n}", takes_s=90.0)
    watched = gov.pod(budget, "watched")
    assert latency(gov, watched).seconds == 90.0
    for n in range(19):
        stop_timed(gov, budget, f"better-{n}", takes_s=40.0 + n)
    # twenty kept: one at 90 s and 40..58 s; the 19th of twenty by rank is 58 s
    seen = latency(gov, watched)
    assert (seen.seconds, seen.stops) == (58.0, 20)
    with gov.session() as s:
        assert s.scalar(select(func.count()).select_from(StopTimeRow)) == 20


def test_each_region_learns_from_its_own_stops(gov: Governor) -> None:
    budget = gov.budget()
    for n in range(5):
        stop_timed(gov, budget, f"eu-{n}", takes_s=100.0, region="eu-west")
    gov.cloud.regions.update({"in-eu": "eu-west", "in-us": "us-east"})
    in_eu, in_us, nowhere = (gov.pod(budget, ref) for ref in ("in-eu", "in-us", "nowhere"))
    assert latency(gov, in_eu).seconds == 100.0
    assert (latency(gov, in_us).seconds, latency(gov, in_us).stops) == (DECLARED_S, 0)
    assert (latency(gov, nowhere).seconds, latency(gov, nowhere).stops) == (DECLARED_S, 0)
    with gov.session() as s:
        assert pod_model.get(s, gov.ctx.config, in_eu, gov.clock.now()).region == "eu-west"


def test_failed_calls_and_the_waits_they_ask_for_are_inside_the_stop_time(gov: Governor) -> None:
    budget = gov.budget()
    for n in range(5):
        # refused once, asked to wait 60 s, then stopped in 10 s: 70 s from the first request
        stop_timed(gov, budget, f"failing-{n}", takes_s=10.0, failures=1, retry_after_s=60.0)
    seen = latency(gov, gov.pod(budget, "watched"))
    assert (seen.source, seen.seconds) == (LatencySource.LEARNED, 70.0)


def test_a_provider_whose_stops_are_refused_carries_the_worst_retry_sequence_shown(
    gov: Governor,
) -> None:
    budget = gov.budget()
    for n in range(3):
        stop_timed(gov, budget, f"clean-{n}", takes_s=10.0)
    # refused twice, each time asked to wait 5 s: 10 s of retries, then a 10-s stop
    stop_timed(gov, budget, "twice", takes_s=10.0, failures=2, retry_after_s=5.0)
    # refused once, asked to wait 30 s: 30 s of retries, then a 10-s stop
    stop_timed(gov, budget, "once", takes_s=10.0, failures=1, retry_after_s=30.0)
    with gov.session() as s:
        kept = s.scalars(select(StopTimeRow).order_by(StopTimeRow.id)).all()
        assert [(t.seconds, t.refusals, t.retrying_s, t.longest_retry_s) for t in kept] == [
            (10.0, 0, 0.0, 0.0),
            (10.0, 0, 0.0, 0.0),
            (10.0, 0, 0.0, 0.0),
            (20.0, 2, 10.0, 5.0),
            (40.0, 1, 30.0, 30.0),
        ]
    # the slowest of five is 40 s; a stop refused twice with 30-s waits would take 70 s
    seen = latency(gov, gov.pod(budget, "watched"))
    assert (seen.source, seen.seconds, seen.stops) == (LatencySource.LEARNED, 70.0, 5)


def test_the_api_and_the_dashboard_say_whether_a_pods_latency_is_declared_or_learned(
    gov: Governor, client: TestClient
) -> None:
    budget = gov.budget()
    for n in range(5):
        stop_timed(gov, budget, f"slow-{n}", takes_s=50.0 + n)
    other = gov.budget()
    learned_pod = gov.pod(other, "watched")
    shown = ok(client.get(f"/v1/pods/{learned_pod}"))["stop_latency"]
    assert shown == {
        "seconds": 54.0,
        "source": "learned",
        "declared_s": DECLARED_S,
        "learned_s": 54.0,
        "stops": 5,
    }
    assert client.post("/login", data={"token": OPERATOR}, follow_redirects=False).is_redirect
    page = client.get(f"/status/budgets/{other}").text
    assert "stops in 54.0 s, learned from 5 stops (declared 30.0 s)" in page
