"""A state the provider does not document: the pod keeps its last known state, the provider's
word is recorded with `state_known` false and told once per new word, its compute accrues as
running, a stop order goes on asking (never done), and a documented state clears it. And what a
provider says a stop would lose: a RunPod pod with only a container disk is refused."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from governor.adapters.providers.runpod import RunPodProvider
from governor.db import repository as repo
from governor.db.tables import PodRow
from governor.domain.errors import Conflict, Invalid
from governor.domain.model import Category, PodState, Severity
from governor.domain.stop_order import StopState
from governor.fakes.http_cloud import running
from governor.fakes.runpod import FakeRunPod
from governor.services.fleet import pods, resumes
from governor.services.stopping import provider_states
from governor.web import templates
from tests.integration.conftest import BY, Governor, ok, read_dashboard

RATE = Decimal("3.60")  # the fake cloud's rate in these tests, per hour


def pod_row(gov: Governor, pod_id: str) -> PodRow:
    with gov.session() as s:
        pod = repo.get_pod(s, pod_id)
        s.expunge(pod)
        return pod


def unknown_state_events(gov: Governor, pod_id: str) -> list[str]:
    with gov.session() as s:
        found = repo.events(s, subject=f"pod:{pod_id}", category=Category.PROVIDER, limit=1000)
        return [e.message for e in reversed(found) if "does not document" in e.message]


def documented_again(gov: Governor, pod_id: str) -> list[str]:
    with gov.session() as s:
        found = repo.events(s, subject=f"pod:{pod_id}", severity=Severity.INFO, limit=1000)
        return [e.message for e in found if "documents again" in e.message]


def spent(gov: Governor, budget: str) -> Decimal:
    return gov.book(budget).figures.spent


def say(gov: Governor, word: str | None, ref: str = "pod-1") -> None:
    """The fake cloud answers `word` for the pod's state from now on (None: its own again)."""
    gov.cloud.describe(ref)  # the cloud has the pod from its first sight on
    gov.cloud.state.pods[ref].undocumented_state = word


def test_a_stop_order_goes_on_asking_and_compute_accrues_as_running(gov: Governor) -> None:
    budget = gov.budget()
    pod = gov.pod(budget)
    with gov.session() as s:
        pods.stop_manually(s, gov.ctx, pod, "test", gov.clock.now(), by=BY)
    say(gov, "HIBERNATING")
    gov.tick()
    row = pod_row(gov, pod)
    assert (row.state, row.provider_state, row.state_known) == (
        PodState.STOPPING,  # its last known state, shown and kept for its stop order
        "HIBERNATING",
        False,
    )
    before = spent(gov, budget)
    for _ in range(12):  # an hour of passes: the order asks at each, never done
        gov.tick(300)
        with gov.session() as s:
            order = repo.latest_stop_order(s, pod)
            assert order is not None and order.state is StopState.PROVIDER_STOP_SENT
    assert gov.cloud.state.pods["pod-1"].stop_requested_at is None  # nothing sent meanwhile
    assert spent(gov, budget) - before == RATE  # an hour of compute, as if running
    [told] = unknown_state_events(gov, pod)  # once for the word, not at every pass
    assert "'HIBERNATING'" in told and "stopping" in told

    say(gov, "FROZEN")  # a new word is told again
    gov.tick(5)
    assert len(unknown_state_events(gov, pod)) == 2
    assert pod_row(gov, pod).provider_state == "FROZEN"

    say(gov, None)  # a documented state: the stop is sent, and done once the pod stopped
    gov.tick(5)
    gov.tick(30)  # the fake cloud's stop latency
    row = pod_row(gov, pod)
    assert (row.state, row.state_known) == (PodState.STOPPED, True)
    with gov.session() as s:
        order = repo.latest_stop_order(s, pod)
        assert order is not None and order.state is StopState.STOPPED
    assert len(documented_again(gov, pod)) == 1


def test_a_pod_registered_in_an_unknown_state_runs_until_a_documented_one_arrives(
    gov: Governor,
) -> None:
    budget = gov.budget()
    say(gov, "WARMING")
    pod = gov.pod(budget)
    row = pod_row(gov, pod)
    assert (row.state, row.provider_state, row.state_known) == (PodState.RUNNING, "WARMING", False)
    assert len(unknown_state_events(gov, pod)) == 1
    gov.tick(60)  # asked again, with no stop order: the same word is not told again
    assert len(unknown_state_events(gov, pod)) == 1
    say(gov, None)
    gov.tick(5)
    row = pod_row(gov, pod)
    assert (row.state, row.provider_state, row.state_known) == (PodState.RUNNING, None, True)
    assert len(documented_again(gov, pod)) == 1


def test_a_stopped_pod_in_an_unknown_state_is_not_resumed_and_accrues_compute(
    gov: Governor,
) -> None:
    budget = gov.budget()
    pod = gov.pod(budget)
    with gov.session() as s:
        pods.stop_manually(s, gov.ctx, pod, "test", gov.clock.now(), by=BY)
    gov.tick()
    gov.tick(30)
    assert pod_row(gov, pod).state is PodState.STOPPED
    say(gov, "REBOOTING_MAYBE")
    with pytest.raises(Conflict, match="'REBOOTING_MAYBE', a state it does not document"):
        resumes.resume(gov.ctx, pod, "test", by=BY)
    row = pod_row(gov, pod)
    assert (row.state, row.state_known) == (PodState.STOPPED, False)  # stopped, never resumed
    before = spent(gov, budget)
    gov.tick(3600)
    assert spent(gov, budget) - before == RATE  # its compute counted, as if it ran
    say(gov, None)
    gov.tick(5)
    assert pod_row(gov, pod).state_known
    before = spent(gov, budget)
    gov.tick(3600)
    assert spent(gov, budget) == before  # stopped, known: no compute (and no storage here)


def test_the_pod_shows_the_providers_word_beside_its_last_known_state(
    gov: Governor, client: TestClient
) -> None:
    budget = gov.budget()
    pod = gov.pod(budget)
    say(gov, "FOO")
    with gov.session() as s:  # as a stop order's look records it
        registered = repo.get_pod(s, pod)
        provider_states.note(s, registered, "FOO", False, gov.clock.now())
    shown = ok(client.get(f"/v1/pods/{pod}"))
    assert (shown["state"], shown["provider_state"], shown["state_known"]) == (
        "running",
        "FOO",
        False,
    )
    [line] = [p for b in read_dashboard(gov).budgets for p in b.pods]
    assert (line.state, line.provider_state, line.state_known) == (PodState.RUNNING, "FOO", False)
    html = templates().get_template("_pods.html").render(b={"pods": [line]}, page=None, dash=None)
    assert "(provider says 'FOO', unknown)" in html


def test_a_runpod_pod_with_only_a_container_disk_is_refused_saying_what_is_lost(
    gov: Governor, tmp_path: Path
) -> None:
    cloud = FakeRunPod(tmp_path / "runpod.json", "rp-key")
    cloud.add_pod("pod-9", "0.44")
    cloud.state.pods["pod-9"].volume_in_gb = 0
    budget = gov.budget()
    with running(cloud) as server, httpx.Client(timeout=30.0) as http:
        adapter = RunPodProvider(http, "rp-key", f"{server.url}/graphql")
        gov.ctx.providers["runpod"] = adapter  # type: ignore[index]
        registration = pods.Registration("runpod", "pod-9")
        with pytest.raises(Invalid, match="erases its container disk"), gov.session() as s:
            pods.register(s, gov.ctx, budget, registration, gov.clock.now())
        cloud.state.pods["pod-9"].volume_in_gb = 20  # a volume disk: its workspace is kept
        with gov.session() as s:
            registered = pods.register(s, gov.ctx, budget, registration, gov.clock.now())
            assert registered.storage_gb == 20.0
