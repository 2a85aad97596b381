"""GovernorLoop: a real background thread against a scripted governor; the loop reads flags."""

from __future__ import annotations

import time

import httpx
import pytest

from governor.client import UNREACHABLE, GovernorError, GovernorLoop
from tests.unit.client.fakes import ScriptedServer, beat_with, directive, eventually


def test_the_loop_obeys_checkpoint_then_stop_and_the_thread_reports_it_all() -> None:
    server = ScriptedServer(directive())
    gov = GovernorLoop(server.governor(), phase="loading", total_steps=100)
    beat_with(server, step=0, phase="loading", total_steps=100)

    gov.phase("training")
    gov.step(5, metrics={"loss": 2.5})
    beat_with(server, step=5, phase="training", metrics={"loss": 2.5})
    assert not gov.should_checkpoint() and not gov.should_stop()

    server.answer(directive("checkpoint", reason="pre-stop"))
    eventually(gov.should_checkpoint, "the checkpoint directive")
    gov.checkpoint("/ckpt/5")
    assert not gov.should_checkpoint()  # asked once, answered once
    beat_with(server, status="running", checkpoint={"step": 5, "path": "/ckpt/5"})

    server.answer(directive("stop", reason="ceiling"))
    eventually(gov.should_stop, "the stop directive")
    assert gov.directive.reason == "ceiling"
    gov.step(6)
    gov.stopped("/ckpt/6")

    last = server.bodies()[-1]
    assert last["status"] == "stopped" and last["checkpoint"] == {"step": 6, "path": "/ckpt/6"}
    count = len(server.requests)
    time.sleep(0.05)
    assert len(server.requests) == count, "the thread kept beating after stopped()"


def test_a_checkpoint_acknowledges_a_stop_only_once_the_loop_has_seen_it() -> None:
    server = ScriptedServer(directive("stop", reason="manual"))
    gov = GovernorLoop(server.governor())
    eventually(lambda: gov.directive.should_stop, "the stop directive to arrive")

    gov.checkpoint("/ckpt/2", step=2)  # saved for an earlier request: the loop is not stopping
    beat_with(server, status="running", checkpoint={"step": 2, "path": "/ckpt/2"})
    assert gov.should_stop()
    beat_with(server, status="stopping")
    gov.checkpoint("/ckpt/3", step=3)
    beat_with(server, status="stopping", checkpoint={"step": 3, "path": "/ckpt/3"})
    gov.stopped()
    assert server.bodies()[-1]["status"] == "stopped"


def test_a_refused_token_is_raised_in_the_training_loop() -> None:
    server = ScriptedServer(401)
    gov = GovernorLoop(server.governor())

    def raised() -> bool:
        try:
            gov.should_stop()
        except GovernorError as exc:
            return exc.status == 401
        return False

    eventually(raised, "the refusal to reach the loop")
    with pytest.raises(GovernorError, match="GOVERNOR_JOB_TOKEN"):
        gov.step(1)
    gov.finished()  # says nothing more to a governor that refuses the token
    assert len(server.requests) == 1


def test_as_a_context_manager_a_crash_is_reported_classified_and_the_run_marked_failed() -> None:
    server = ScriptedServer(directive())
    with (
        pytest.raises(RuntimeError, match="out of memory"),
        GovernorLoop(server.governor()) as gov,
    ):
        gov.step(4)
        raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")

    [event] = server.bodies("/events")
    assert (event["category"], event["kind"]) == ("model", "oom")
    assert "RuntimeError: CUDA out of memory" in event["message"]
    assert server.bodies()[-1] == {"step": 4, "status": "failed"}


def test_as_a_context_manager_a_normal_end_is_finished() -> None:
    server = ScriptedServer(directive())
    with GovernorLoop(server.governor()) as gov:
        gov.step(10)
    assert server.bodies()[-1] == {"step": 10, "status": "finished"}


def test_the_fail_safe_stops_the_loop_when_the_governor_vanishes() -> None:
    server = ScriptedServer(directive(next_heartbeat_s=0.05))
    gov = GovernorLoop(server.governor(fail_safe_after_s=0.3))
    beat_with(server, step=0)

    server.answer(httpx.ConnectError("connection refused"))
    eventually(gov.should_stop, "the fail-safe stop")

    assert 0.3 <= time.monotonic() - server.answered_at < 1.5
    assert gov.directive.reason == UNREACHABLE
    started = time.monotonic()
    gov.stopped("/ckpt/0")
    assert time.monotonic() - started < 0.5, "the last word waited for a governor long gone"


def test_every_phase_is_sent_in_order_however_short() -> None:
    server = ScriptedServer(directive())
    gov = GovernorLoop(server.governor(), phase="loading")
    gov.phase("compiling")  # a compile that takes no time at all
    gov.phase("training")
    beat_with(server, phase="training")
    gov.finished()
    sent = [b["phase"] for b in server.bodies()]
    seen = [p for i, p in enumerate(sent) if i == 0 or p != sent[i - 1]]
    assert seen[:3] == ["loading", "compiling", "training"]
