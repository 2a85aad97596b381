"""Metrics from the job: encoded as the governor takes them, each value sent once."""

from __future__ import annotations

from governor.client import GovernorLoop
from tests.unit.client.fakes import ScriptedServer, beat_with, directive, eventually


class Scalar:
    """A tensor or NumPy scalar: a float through __float__."""

    def __init__(self, value: float) -> None:
        self.value = value

    def __float__(self) -> float:
        return self.value


class Broken:
    def __float__(self) -> float:
        raise RuntimeError("a tensor on a lost device")


def test_non_finite_and_odd_values_are_sent_in_the_agreed_forms_and_never_raise() -> None:
    server = ScriptedServer(directive())
    with server.governor() as gov:
        gov.heartbeat(
            1,
            metrics={
                "loss": float("nan"),
                "grad_norm": float("inf"),
                "kl": -float("inf"),
                "reward": Scalar(0.25),
                "lost": Broken(),
                "bad": Scalar(float("nan")),
                "epoch": 2,
                "tag": "sft",
                "done": False,
            },
        )
    [body] = server.bodies()
    assert body["metrics"] == {
        "loss": "NaN",
        "grad_norm": "Infinity",
        "kl": "-Infinity",
        "reward": 0.25,
        "bad": "NaN",
        "epoch": 2,
        "tag": "sft",
        "done": False,
    }


def test_the_loop_merges_metrics_and_sends_each_value_once() -> None:
    server = ScriptedServer(directive())
    gov = GovernorLoop(server.governor(), phase="training")
    try:
        gov.step(5, metrics={"loss": 2.5})
        gov.metrics({"eval_loss": 2.7, "loss": float("nan")})
        body = beat_with(server, step=5, metrics={"loss": "NaN", "eval_loss": 2.7})
        assert body["status"] == "running"
        count = len(server.bodies())
        gov.step(6)
        later = eventually(
            lambda: [b for b in server.bodies()[count:] if b["step"] == 6], "a beat at step 6"
        )
        assert "metrics" not in later[-1]  # sent once: a stale value is no new observation
    finally:
        gov.finished()


def test_a_metric_that_turns_non_finite_is_sent_at_once() -> None:
    server = ScriptedServer(directive(next_heartbeat_s=3600))  # the next beat is an hour away
    gov = GovernorLoop(server.governor(), phase="training")
    try:
        beat_with(server, step=0)
        gov.step(7, metrics={"loss": 2.5})
        gov.metrics({"loss": float("nan")})
        body = beat_with(server, step=7, metrics={"loss": "NaN"})
        assert body["status"] == "running"
    finally:
        gov.finished()
