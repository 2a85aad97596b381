"""A transformers Trainer that obeys the governor (`pip install gpu-governor[hf]`)."""

from __future__ import annotations

import os
from typing import Any

from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

from governor.client.core import Phase
from governor.client.loop import GovernorLoop


class GovernorCallback(TrainerCallback):
    """`checkpoint` makes the Trainer save; `stop` makes it save, acknowledge and stop.

    Phases: `loading` until training begins, `compiling` until the first optimizer step has
    finished (kernels compile, caches warm: the governor allows that longer than a stall),
    then `training` (`evaluation` while the Trainer evaluates).

    gov = GovernorCallback.from_env()
    with gov.guard(): Trainer(..., callbacks=[gov]).train()
    """

    def __init__(self, governor: GovernorLoop) -> None:
        self.governor = governor
        self._training = False
        self._stepped = False  # the first optimizer step has finished

    @classmethod
    def from_env(cls, **options: Any) -> GovernorCallback:
        """From GOVERNOR_URL, GOVERNOR_RUN_ID and GOVERNOR_TOKEN; `options` go to Governor."""
        return cls(GovernorLoop.from_env(phase="loading", **options))

    def guard(self) -> GovernorLoop:
        """Wrap trainer.train(): a crash is reported (an OOM as the model's, a data-loading
        error as the harness's) and the run marked failed; a normal end marks it finished."""
        return self.governor

    def on_train_begin(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **_: Any
    ) -> None:
        self._training = True
        self.governor.step(state.global_step, total_steps=state.max_steps or None)
        self.governor.phase(self._training_phase())

    def on_step_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **_: Any
    ) -> None:
        self._stepped = True
        self.governor.phase(self._training_phase())
        self.governor.step(state.global_step)
        if self.governor.should_stop():
            control.should_training_stop = True
            control.should_save = self.governor.directive.save_first
        elif self.governor.should_checkpoint():
            control.should_save = True

    def on_save(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **_: Any
    ) -> None:
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
        if logs:
            self.governor.step(state.global_step, metrics=logs)

    def on_train_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **_: Any
    ) -> None:
        self._training = False
        if self.governor.should_stop():
            self.governor.stopped()
