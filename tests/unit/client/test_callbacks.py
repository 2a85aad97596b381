"""The framework callbacks map directives onto each trainer's own controls."""

from __future__ import annotations

import os

os.environ["HF_HUB_OFFLINE"] = "1"  # before transformers reads it: nothing here may download

from pathlib import Path
from types import SimpleNamespace
from typing import Any

from transformers import TrainerControl, TrainerState

from governor.client import GovernorLoop
from governor.client.hf import GovernorCallback
from governor.client.lightning import GovernorLightningCallback
from tests.unit.client.fakes import ScriptedServer, beat_with, directive, eventually


def hf_step(gov: GovernorCallback, step: int) -> TrainerControl:
    control = TrainerControl()
    gov.on_step_end(SimpleNamespace(), TrainerState(global_step=step), control)
    return control


def test_hf_checkpoint_saves_and_stop_saves_then_stops_acknowledging_the_save() -> None:
    server = ScriptedServer(directive("checkpoint", reason="pre-stop"))
    gov = GovernorCallback(GovernorLoop(server.governor(), phase="loading"))
    args: Any = SimpleNamespace(output_dir="/out")
    gov.on_train_begin(args, TrainerState(global_step=0, max_steps=50), TrainerControl())
    beat_with(server, phase="compiling", total_steps=50)  # until the first step has finished

    eventually(gov.governor.should_checkpoint, "the checkpoint directive")
    control = hf_step(gov, 3)
    assert control.should_save and not control.should_training_stop
    beat_with(server, phase="training")
    gov.on_save(args, TrainerState(global_step=3), control)
    beat_with(server, status="running", checkpoint={"step": 3, "path": "/out/checkpoint-3"})

    server.answer(directive("stop", reason="ceiling"))
    eventually(gov.governor.should_stop, "the stop directive")
    control = hf_step(gov, 4)
    assert control.should_save and control.should_training_stop
    gov.on_save(args, TrainerState(global_step=4), control)
    beat_with(server, status="stopping", checkpoint={"step": 4, "path": "/out/checkpoint-4"})
    gov.on_train_end(args, TrainerState(global_step=4), control)
    assert server.bodies()[-1]["status"] == "stopped"


class Told:
    """Stands in for a GovernorLoop: what a callback told it, in order."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.directive = SimpleNamespace(held_to_canary=False, save_first=True)

    def step(self, n: int, **_: Any) -> None:
        self.calls.append(("step", n))

    def phase(self, name: str) -> None:
        self.calls.append(("phase", name))

    def metrics(self, values: Any) -> None:
        self.calls.append(("metrics", None))

    def should_stop(self) -> bool:
        return False

    def should_checkpoint(self) -> bool:
        return False


def test_both_callbacks_record_the_step_before_entering_the_phase() -> None:
    """Entering a phase wakes the heartbeat at once, which sends the step it finds: a first
    step's end must not be sent as training at step 0, which looks like a stall."""
    told: Any = Told()
    hf_step(GovernorCallback(told), 1)
    assert told.calls == [("step", 1), ("phase", "training")]

    told = Told()
    trainer: Any = FakeLightningTrainer(
        global_step=1, should_stop=False, log_every_n_steps=50, callback_metrics={}
    )
    GovernorLightningCallback(told, Path("/nowhere")).on_train_batch_end(
        trainer, None, None, None, 0
    )
    assert told.calls[:2] == [("step", 1), ("phase", "training")]


class FakeLightningTrainer(SimpleNamespace):
    def save_checkpoint(self, path: str) -> None:
        Path(path).write_text("weights")


def test_a_non_finite_stop_stops_both_trainers_without_saving(tmp_path: Path) -> None:
    server = ScriptedServer(directive("stop", reason="non-finite", message="Do not save."))
    hf = GovernorCallback(GovernorLoop(server.governor()))
    eventually(hf.governor.should_stop, "the stop directive")
    control = hf_step(hf, 9)
    assert control.should_training_stop and not control.should_save
    hf.on_train_end(SimpleNamespace(), TrainerState(global_step=9), control)
    assert "checkpoint" not in server.bodies()[-1]
    assert server.bodies()[-1]["status"] == "stopped"

    lightning = GovernorLightningCallback(GovernorLoop(server.governor()), tmp_path)
    trainer: Any = FakeLightningTrainer(
        global_step=9, should_stop=False, log_every_n_steps=50, callback_metrics={}
    )
    eventually(lightning.governor.should_stop, "the stop directive")
    lightning.on_train_batch_end(trainer, None, None, None, 0)
    assert trainer.should_stop and list(tmp_path.iterdir()) == []


def hf_log(gov: GovernorCallback, logs: dict[str, Any], *, fp16: bool) -> TrainerControl:
    control = TrainerControl(should_save=True)  # the Trainer would save after this log
    gov.on_log(SimpleNamespace(fp16=fp16), TrainerState(global_step=7), control, logs=logs)
    return control


def test_hf_a_non_finite_grad_norm_is_a_nan_loss_and_cancels_the_save() -> None:
    """The Trainer's default logging_nan_inf_filter logs a stand-in loss; the grad norm tells."""
    server = ScriptedServer(directive())
    gov = GovernorCallback(GovernorLoop(server.governor(), phase="training"))
    try:
        control = hf_log(gov, {"loss": 2.25, "grad_norm": float("nan")}, fp16=False)
        assert not control.should_save
        beat_with(server, step=7, metrics={"loss": "NaN", "grad_norm": "NaN"})

        # fp16's loss scaling skips an overflowing step by design: no blow-up, the save stands.
        control = hf_log(gov, {"loss": 2.0, "grad_norm": float("inf")}, fp16=True)
        assert control.should_save
        beat_with(server, step=7, metrics={"loss": 2.0, "grad_norm": "Infinity"})
    finally:
        gov.governor.finished()


def test_lightning_saves_when_asked_and_reports_a_crash(tmp_path: Path) -> None:
    server = ScriptedServer(directive("checkpoint", reason="pre-stop"))
    gov = GovernorLightningCallback(GovernorLoop(server.governor()), tmp_path)
    trainer: Any = FakeLightningTrainer(
        global_step=7, should_stop=False, log_every_n_steps=50, callback_metrics={"loss": 0.5}
    )
    eventually(gov.governor.should_checkpoint, "the checkpoint directive")

    gov.on_train_batch_end(trainer, None, None, None, 0)

    saved = tmp_path / "governor-step=7.ckpt"
    assert saved.exists() and not trainer.should_stop
    beat_with(server, checkpoint={"step": 7, "path": str(saved)})

    gov.on_exception(trainer, None, RuntimeError("CUDA out of memory"))
    [event] = server.bodies("/events")
    assert (event["category"], event["kind"]) == ("model", "oom")
    assert server.bodies()[-1]["status"] == "failed"


def test_a_run_held_to_its_canary_reports_canary_until_training_is_released() -> None:
    server = ScriptedServer(directive(reason="canary-hold", message="Held to the canary"))
    gov = GovernorCallback(GovernorLoop(server.governor(), phase="loading"))
    eventually(lambda: gov.governor.directive.held_to_canary, "the hold")
    hf_step(gov, 1)
    beat_with(server, phase="canary")
    server.answer(directive())  # released
    eventually(lambda: not gov.governor.directive.held_to_canary, "the release")
    hf_step(gov, 2)
    beat_with(server, phase="training")
