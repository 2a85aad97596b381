"""A transformers Trainer that obeys the governor (`pip install gpu-governor[hf]`)."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from typing import Any

import torch
from torch.utils.hooks import RemovableHandle
from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

from governor.client.core import Phase, non_finite
from governor.client.loop import GovernorLoop


class GovernorCallback(TrainerCallback):
    """`checkpoint` makes the Trainer save; `stop` makes it save, acknowledge and stop.

    Phases: `loading` until training begins, `compiling` until the first optimizer step has
    finished (kernels compile, caches warm: the governor allows that longer than a stall),
    then `training` (`evaluation` while the Trainer evaluates).

    A loss that turns NaN or infinite is caught although the Trainer's default
    `logging_nan_inf_filter` keeps it out of the logs: the callback watches the loss the model
    returns on each training forward, and a non-finite `grad_norm` in the logs (unless `fp16`,
    whose loss scaling skips such steps by design). It sends `loss` as NaN at once, so the
    governor's `non_finite` rule stops the run, and never lets the Trainer save those weights:
    the last good checkpoint stays the last one.

    gov = GovernorCallback.from_env()
    with gov.guard(): Trainer(..., callbacks=[gov]).train()
    """

    def __init__(self, governor: GovernorLoop) -> None:
        self.governor = governor
        self._training = False
        self._stepped = False  # the first optimizer step has finished
        # Whether every training loss since the last step was finite: a tensor on the model's
        # device, read once a step (never a device sync per forward).
        self._losses_finite: torch.Tensor | None = None
        self._blew_up = False  # a non-finite loss since the last logged one
        self._hook: RemovableHandle | None = None

    @classmethod
    def from_env(cls, **options: Any) -> GovernorCallback:
        """From GOVERNOR_URL, GOVERNOR_RUN_ID and GOVERNOR_JOB_TOKEN; `options` go to Governor."""
        return cls(GovernorLoop.from_env(phase="loading", **options))

    def guard(self) -> GovernorLoop:
        """Wrap trainer.train(): a crash is reported (an OOM as the model's, a data-loading
        error as the harness's) and the run marked failed; a normal end marks it finished."""
        return self.governor

    def on_train_begin(
        self,
        args: TrainingArguments,
        state: TrainerState,
        control: TrainerControl,
        model: torch.nn.Module | None = None,
        **_: Any,
    ) -> None:
        self._training = True
        if model is not None and self._hook is None:
            self._hook = model.register_forward_hook(self._saw_output)
        self.governor.step(state.global_step, total_steps=state.max_steps or None)
        self.governor.phase(self._training_phase())

    def on_step_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **_: Any
    ) -> None:
        self._stepped = True
        # The step first: entering a phase sends a beat at once, with the step it finds.
        self.governor.step(state.global_step)
        self.governor.phase(self._training_phase())
        if self.governor.should_stop():
            control.should_training_stop = True
            control.should_save = self.governor.directive.save_first
        elif self.governor.should_checkpoint():
            control.should_save = True
        finite, self._losses_finite = self._losses_finite, None
        if finite is not None and not bool(finite):
            self._blown_up(control)

    def _saw_output(self, module: torch.nn.Module, inputs: Any, output: Any) -> None:
        """A forward hook: folds a training forward's loss into `_losses_finite`."""
        loss = output.get("loss") if isinstance(output, Mapping) else None
        if module.training and isinstance(loss, torch.Tensor):
            finite = torch.isfinite(loss.detach()).all()
            seen = self._losses_finite
            self._losses_finite = finite if seen is None else seen & finite

    def _blown_up(self, control: TrainerControl) -> None:
        """The loss went NaN or infinite: tell the governor now, and do not save these weights."""
        self._blew_up = True
        control.should_save = False
        self.governor.metrics({"loss": math.nan})

    def on_save(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **_: Any
    ) -> None:
        assert args.output_dir is not None  # TrainingArguments sets its default when none is given
        path = os.path.join(args.output_dir, f"{PREFIX_CHECKPOINT_DIR}-{state.global_step}")
        self.governor.checkpoint(path, state.global_step)

    def on_prediction_step(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **_: Any
    ) -> None:
        self.governor.phase("evaluation")

    def on_evaluate(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **_: Any
    ) -> None:
        if self._training:
            self.governor.phase(self._training_phase())

    def _training_phase(self) -> Phase:
        if not self._stepped:
            return "compiling"
        return "canary" if self.governor.directive.held_to_canary else "training"

    def on_log(
        self,
        args: TrainingArguments,
        state: TrainerState,
        control: TrainerControl,
        logs: dict[str, Any] | None = None,
        **_: Any,
    ) -> None:
        if not logs:
            return
        if not args.fp16 and non_finite({"grad_norm": logs.get("grad_norm")}):
            self._blown_up(control)
        if self._blew_up and "loss" in logs:  # the Trainer's filter logged a stand-in
            logs, self._blew_up = {**logs, "loss": math.nan}, False
        self.governor.step(state.global_step, metrics=logs)

    def on_train_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **_: Any
    ) -> None:
        self._training = False
        if self._hook is not None:
            self._hook.remove()
            self._hook = None
        if self.governor.should_stop():
            self.governor.stopped()
