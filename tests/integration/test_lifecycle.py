"""Every run ends in a true state when its pod stops; a hang whose work is saved, and a job
that cannot save, stop without waiting; a step that goes backwards is a restart (SQLite and
PostgreSQL)."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from governor.db import repository as repo
from governor.db.tables import GpuSampleRow, RunRow, StopOrderRow
from governor.domain.errors import RunEnded
from governor.domain.model import Action, PodState, Reason, RunStatus
from governor.domain.stop_order import StopState
from governor.services.fleet import pods
from governor.services.jobs.checkins import Checkpoint, Directive
from governor.services.view import metrics
from tests.integration.conftest import BY, Governor, gpu_sample


def run_of(gov: Governor, run_id: str) -> RunRow:
    with gov.session() as s:
        return repo.get_run(s, run_id)


def order_of(gov: Governor, pod_id: str) -> StopOrderRow:
    with gov.session() as s:
        order = repo.latest_stop_order(s, pod_id)
    assert order is not None
    return order


def messages(gov: Governor) -> list[str]:
    with gov.session() as s:
        return [e.message for e in reversed(repo.events(s, limit=1000))]


def heartbeat_ages(gov: Governor) -> dict[tuple[str, ...], float]:
    with gov.session() as s:
        families = metrics.collect(
            s, gov.ctx.config, gov.clock.now(), gov.ctx.replica, gov.ctx.leading()
        )
    (ages,) = [f for f in families if f.name == "governor_run_heartbeat_age_seconds"]
    return dict(ages.samples)


def hang_until_stopped(gov: Governor, pod: str, run: str) -> Directive:
    """The job goes on beating at step 100 while every GPU idles holding memory, 10 s at a
    time, until it is told to stop (at most 800 s)."""
    directive = gov.beat(run, step=100)
    for _ in range(80):
        gov.clock.advance(10)
        gov.report(pod, gpu_sample(util=0, used_gib=19.5))
        gov.tick()
        directive = gov.beat(run, step=100)
        if directive.action is Action.STOP:
            break
    return directive


def test_a_silent_job_is_lost_once_its_pod_stops_and_leaves_the_heartbeat_metric(
    gov: Governor,
) -> None:
    budget = gov.budget("1000")
    pod = gov.pod(budget)
    run = gov.run(budget, pod, timeout_s=60)
    gov.beat(run, step=5)
    assert [labels[0] for labels in heartbeat_ages(gov)] == [run]
    gov.tick(61)  # silent past its timeout: stopped at once
    gov.tick(30)  # the fake cloud's stop latency
    assert order_of(gov, pod).state is StopState.STOPPED
    ended = run_of(gov, run)
    assert ended.status is RunStatus.LOST and ended.ended_at == gov.clock.now()
    assert heartbeat_ages(gov) == {}
    assert any(m.startswith("Run lost: its job went silent") for m in messages(gov))


def test_a_job_that_acknowledged_its_stop_ends_stopped(gov: Governor) -> None:
    budget = gov.budget("1000")
    pod = gov.pod(budget)
    run = gov.run(budget, pod, grace_s=60)
    gov.beat(run, step=10)
    with gov.session() as s:
        pods.stop_manually(s, gov.ctx, pod, "done for today", gov.clock.now(), by=BY)
    ack = gov.beat(run, step=11, status=RunStatus.STOPPING, checkpoint=Checkpoint(11, "/ws/c11"))
    assert ack.action is Action.STOP
    gov.tick(1)
    gov.tick(30)
    ended = run_of(gov, run)
    assert ended.status is RunStatus.STOPPED
    assert any(
        "Run stopped with its pod at step 11. Its last checkpoint: step 11, /ws/c11." in m
        for m in messages(gov)
    )

    with pytest.raises(RunEnded, match="should stop"):  # a late beat: refused, no resurrection
        gov.beat(run, step=11, status=RunStatus.RUNNING)
    assert run_of(gov, run).status is RunStatus.STOPPED
    late = gov.beat(run, step=12, status=RunStatus.STOPPED, checkpoint=Checkpoint(12, "/ws/c12"))
    assert late.action is Action.STOP
    after = run_of(gov, run)
    assert after.status is RunStatus.STOPPED  # a late acknowledgement keeps its checkpoint
    assert (after.checkpoint_step, after.checkpoint_path) == (12, "/ws/c12")


def test_a_hang_whose_work_is_saved_is_stopped_without_the_grace(gov: Governor) -> None:
    budget = gov.budget("1000")
    pod = gov.pod(budget)
    run = gov.run(budget, pod, timeout_s=3600, grace_s=300)
    gov.report(pod, gpu_sample())
    gov.beat(run, step=100)
    gov.beat(run, step=100, checkpoint=Checkpoint(100, "/ws/adapter-final"))  # saved: export
    directive = hang_until_stopped(gov, pod, run)  # the export deadlocks
    assert directive.reason is Reason.IDLE_HANG
    order = order_of(gov, pod)
    assert order.deadline == order.created_at, "nothing to save: no grace"
    stop_event = next(m for m in messages(gov) if m.startswith("Stop ordered (idle-hang)"))
    assert "already saved (run " in stop_event and "step 100, /ws/adapter-final" in stop_event
    gov.tick(1)
    gov.tick(30)
    assert order_of(gov, pod).state is StopState.STOPPED
    assert run_of(gov, run).status is RunStatus.STOPPED  # it kept beating: stopped, not lost


def test_a_hang_with_unsaved_progress_still_waits_for_its_save(gov: Governor) -> None:
    budget = gov.budget("1000")
    pod = gov.pod(budget)
    run = gov.run(budget, pod, timeout_s=3600, grace_s=300)
    gov.beat(run, step=90, checkpoint=Checkpoint(90, "/ws/c90"))
    gov.clock.advance(10)
    gov.report(pod, gpu_sample())
    gov.beat(run, step=100)  # progress after the checkpoint: unsaved work
    assert hang_until_stopped(gov, pod, run).reason is Reason.IDLE_HANG
    order = order_of(gov, pod)
    assert order.deadline == order.created_at + timedelta(seconds=300)


def test_a_manual_stop_of_a_job_that_never_checked_in_does_not_wait(gov: Governor) -> None:
    budget = gov.budget("1000")
    pod = gov.pod(budget)
    run = gov.run(budget, pod, grace_s=300)
    with gov.session() as s:
        order = pods.stop_manually(s, gov.ctx, pod, "wrong image", gov.clock.now(), by=BY)
    assert order.deadline == order.created_at
    gov.tick(1)
    gov.tick(30)
    assert order_of(gov, pod).state is StopState.STOPPED
    with gov.session() as s:
        assert repo.get_pod(s, pod).state is PodState.STOPPED
    assert run_of(gov, run).status is RunStatus.LOST  # never heard from


def test_a_step_that_goes_backwards_is_a_restart_and_keeps_the_stall_clock(
    gov: Governor,
) -> None:
    budget = gov.budget("1000")
    pod = gov.pod(budget)
    run = gov.run(budget, pod)
    gov.beat(run, step=2200, checkpoint=Checkpoint(2200, "/ws/c2200"))
    gov.beat(run, step=2212)
    progressed = run_of(gov, run).progress_at
    gov.clock.advance(30)
    gov.beat(run, step=5)
    restarted = run_of(gov, run)
    assert restarted.step == 5
    assert restarted.progress_at == progressed
    assert any(
        m == "The job restarted from step 5 (it had reached step 2212); its last checkpoint "
        "was at step 2200."
        for m in messages(gov)
    )
    gov.clock.advance(30)
    gov.beat(run, step=6)  # moving on from the restart is progress again
    assert run_of(gov, run).progress_at == gov.clock.now()


def test_readings_for_a_stopped_pod_are_flagged_not_shown_as_live(gov: Governor) -> None:
    budget = gov.budget("1000")
    pod = gov.pod(budget)
    gov.report(pod, gpu_sample(util=90))
    with gov.session() as s:
        pods.stop_manually(s, gov.ctx, pod, "done", gov.clock.now(), by=BY)
    gov.tick(1)
    gov.tick(30)
    for _ in range(3):  # its agent goes on reporting
        gov.clock.advance(5)
        gov.report(pod, gpu_sample(util=95))
    with gov.session() as s:
        stopped = repo.get_pod(s, pod)
        samples = s.scalars(select(GpuSampleRow.at).where(GpuSampleRow.pod_id == pod)).all()
    assert stopped.state is PodState.STOPPED
    said = (
        "readings arrive for a stopped pod and are not kept: stop its agent, or resume the pod "
        "to run it again"
    )
    assert stopped.telemetry_note == said
    assert max(samples) < stopped.stopped_at  # nothing after the stop
    flagged = [m for m in messages(gov) if "readings arrive for a stopped pod" in m]
    assert flagged == [f"GPU {said}."]  # once, and not as telemetry unavailable
    assert not any(m.startswith("GPU telemetry unavailable") for m in messages(gov))


def test_an_agent_reporting_for_a_stopped_pod_is_told_its_readings_are_not_kept(
    gov: Governor, client: TestClient
) -> None:
    budget = gov.budget("1000")
    pod = gov.pod(budget)
    reading = {"at": gov.clock.now().isoformat(), "gpus": []}
    kept = client.post(f"/v1/pods/{pod}/telemetry", json={"readings": [reading]})
    assert kept.status_code == 202 and kept.json()["not_kept"] is None
    client.post(f"/v1/pods/{pod}/stop")
    gov.tick(1)
    gov.tick(31)
    refused = client.post(f"/v1/pods/{pod}/telemetry", json={"readings": [reading]})
    assert refused.status_code == 202
    assert refused.json() == {
        "readings": 1,
        "samples": 0,
        "not_kept": "readings arrive for a stopped pod and are not kept: stop its agent, or "
        "resume the pod to run it again",
    }


def test_gpus_that_are_not_what_the_pod_was_registered_with_raise_one_warning(
    gov: Governor,
) -> None:
    budget = gov.budget("1000")
    with gov.session() as s:
        registration = pods.Registration("fake", "b300-pod", gpu_type="B300", gpu_count=2)
        pod = pods.register(s, gov.ctx, budget, registration, gov.clock.now()).id
    h100 = replace(gpu_sample(), name="NVIDIA H100 80GB HBM3")
    gov.report(pod, h100, replace(h100, uuid="GPU-1", index=1))
    gov.report(pod, h100, replace(h100, uuid="GPU-1", index=1))
    warned = [m for m in messages(gov) if m.startswith("The pod was registered with")]
    assert warned == [
        "The pod was registered with 2 x B300 GPUs, but its telemetry shows "
        "2 x NVIDIA H100 80GB HBM3: its rate and memory plan may be wrong."
    ]


def test_gpus_that_match_their_registration_raise_nothing(gov: Governor) -> None:
    budget = gov.budget("1000")
    with gov.session() as s:
        registration = pods.Registration("fake", "h100-pod", gpu_type="H100 80GB", gpu_count=1)
        pod = pods.register(s, gov.ctx, budget, registration, gov.clock.now()).id
    gov.report(pod, replace(gpu_sample(), name="NVIDIA H100 80GB HBM3"))
    assert not any(m.startswith("The pod was registered with") for m in messages(gov))


def test_stopping_a_pod_already_stopped_answers_200_with_the_order_that_stopped_it(
    gov: Governor, client: TestClient
) -> None:
    budget = gov.budget(ceiling="1000")
    pod = gov.pod(budget, ref="gpu-a")
    first = client.post(f"/v1/pods/{pod}/stop", json={"reason": "end of day"})
    assert first.status_code == 202 and first.json()["state"] == "requested"
    again = client.post(f"/v1/pods/{pod}/stop")  # under way: the same order, still accepted
    assert (again.status_code, again.json()["id"]) == (202, first.json()["id"])
    gov.tick(1)
    gov.tick(31)  # the fake cloud answers "pending" for 30 s, then "stopped"
    assert client.get(f"/v1/pods/{pod}").json()["state"] == "stopped"

    stopped = client.post(f"/v1/pods/{pod}/stop", json={"reason": "again"})
    assert stopped.status_code == 200  # nothing new is ordered
    assert stopped.json()["id"] == first.json()["id"]
    assert stopped.json()["state"] == "stopped" and stopped.json()["confirmed_at"] is not None
    with gov.session() as s:
        assert len(s.scalars(select(StopOrderRow).where(StopOrderRow.pod_id == pod)).all()) == 1
