"""governor.client against the real server: a plain PyTorch loop obeys checkpoint and stop,
and with the governor killed the client's fail-safe stops the loop by itself.

A fake pod bills a dollar a second. With a $20.00 ceiling and a 15 s checkpoint grace, the
committed spend is the spend plus ~$15.60 once the job checks in, so the pre-stop checkpoint
(committed at 90%) comes about 2.4 s in and the ceiling about 4.4 s in.
"""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest
import torch

from governor.client import UNREACHABLE, Governor, GovernorError, GovernorLoop
from tests.e2e.conftest import (
    GovernorServer,
    budget_events,
    create_run,
    declare_budget,
    get_pod,
    ok,
    register_pod,
    wait_for,
    wait_pod_stopped,
)

pytestmark = pytest.mark.e2e

GIVE_UP_S = 45.0  # a loop that is never told to stop fails the test instead of hanging it


class TinyTraining:
    """A tiny nn.Linear and its optimizer, built before any pod bills: the first optimizer
    in a process imports torch._dynamo, which takes seconds on a loaded machine."""

    def __init__(self, checkpoint_dir: Path) -> None:
        self.model = torch.nn.Linear(8, 1)
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.01)
        self.inputs, self.targets = torch.randn(32, 8), torch.randn(32, 1)
        self.checkpoint_dir = checkpoint_dir
        self.saved: list[Path] = []
        self.reasons: list[str] = []  # for each checkpoint, the reason of the directive that asked

    def run(self, gov: GovernorLoop) -> None:
        """One SGD step every 10 ms until told to stop; saves when asked."""
        give_up = time.monotonic() + GIVE_UP_S
        step = 0
        while time.monotonic() < give_up:
            step += 1
            loss = torch.nn.functional.mse_loss(self.model(self.inputs), self.targets)
            loss.backward()
            self.optimizer.step()
            self.optimizer.zero_grad()
            gov.step(step, metrics={"loss": loss.item()})
            if gov.should_stop():
                gov.stopped(self.save(step, gov), step)
                return
            if gov.should_checkpoint():
                gov.checkpoint(self.save(step, gov), step)
            time.sleep(0.01)
        raise AssertionError(f"the loop was never told to stop in {GIVE_UP_S:g} s")

    def save(self, step: int, gov: GovernorLoop) -> Path:
        path = self.checkpoint_dir / f"step-{step}.pt"
        torch.save({"step": step, "model": self.model.state_dict()}, path)
        self.saved.append(path)
        self.reasons.append(str(gov.directive.reason))
        return path


def test_a_pytorch_loop_saves_when_asked_then_saves_and_stops_at_the_ceiling(
    server: GovernorServer, operator: httpx.Client, tmp_path: Path
) -> None:
    training = TinyTraining(tmp_path)
    budget = declare_budget(operator, "20.00")
    pod = register_pod(operator, budget["id"])
    run = create_run(operator, budget["id"], pod["id"], checkpoint_grace_s=15)

    with GovernorLoop(Governor(server.url, run["id"], run["token"]), phase="training") as gov:
        training.run(gov)

    assert training.reasons == ["pre-stop", "ceiling"]
    pre_stop, final = training.saved
    for path in training.saved:
        torch.nn.Linear(8, 1).load_state_dict(torch.load(path)["model"])
    final_step = torch.load(final)["step"]

    order = wait_pod_stopped(operator, pod["id"])["stop_order"]
    assert order["reason"] == "ceiling"
    assert order["ack_checkpoint"] == {"step": final_step, "path": str(final)}
    run_now = ok(operator.get(f"/v1/runs/{run['id']}"))
    assert run_now["status"] == "stopped"
    assert run_now["checkpoint"]["path"] == str(final)
    assert run_now["step"] == final_step
    saved_events = [e["evidence"].get("path") for e in budget_events(operator, budget["id"])]
    assert str(pre_stop) in saved_events, "the pre-stop checkpoint was never reported"


def test_with_the_governor_killed_the_fail_safe_stops_the_loop(
    server: GovernorServer, operator: httpx.Client, tmp_path: Path
) -> None:
    training = TinyTraining(tmp_path)
    budget = declare_budget(operator, "1000.00")
    pod = register_pod(operator, budget["id"])
    run = create_run(operator, budget["id"], pod["id"])
    gov = GovernorLoop(Governor(server.url, run["id"], run["token"], fail_safe_after_s=2))
    wait_for(lambda: gov.directive.budget, "the first answer from the governor")

    server.kill()
    killed = time.monotonic()
    training.run(gov)
    took = time.monotonic() - killed

    assert training.reasons == [UNREACHABLE]
    # stopped by the fail-safe, not by a hang: the allowance past it is a busy machine's
    assert took <= 2 + 10, f"the fail-safe took {took:.1f} s after the kill (fail_safe_after_s=2)"
    assert training.saved[0].exists()


def test_a_wrong_token_or_run_is_a_clear_error_at_once(
    server: GovernorServer, operator: httpx.Client
) -> None:
    budget = declare_budget(operator, "1000.00")
    pod = register_pod(operator, budget["id"])
    run = create_run(operator, budget["id"], pod["id"])

    with (
        Governor(server.url, run["id"], "not-the-token") as gov,
        pytest.raises(GovernorError, match="GOVERNOR_JOB_TOKEN") as refused,
    ):
        gov.heartbeat(0, retry_for_s=30)
    assert refused.value.status == 401
    with (
        Governor(server.url, "run-nope", run["token"]) as gov,
        pytest.raises(GovernorError) as refused,
    ):
        gov.heartbeat(0, retry_for_s=30)
    assert refused.value.status in (403, 404)
    assert get_pod(operator, pod["id"])["state"] == "running"
