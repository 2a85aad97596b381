"""A Lightning Trainer that obeys the governor (`pip install gpu-governor[lightning]`)."""

from __future__ import annotations

import os
from math import inf
from typing import Any

import pytorch_lightning as pl

from governor.client.loop import GovernorLoop


class GovernorLightningCallback(pl.Callback):
    """`checkpoint` saves `governor-step=N.ckpt`; `stop` saves, acknowledges and stops the fit.

    Phases: `loading` until the fit starts, `compiling` until the first optimizer step has
    finished, then `training` (`evaluation` during validation).

    gov = GovernorLightningCallback.from_env()
    with gov.guard(): pl.Trainer(callbacks=[gov]).fit(model)
    """

    def __init__(
        self, governor: GovernorLoop, dirpath: str | os.PathLike[str] | None = None
    ) -> None:
        """Checkpoints go to `dirpath` (default: the trainer's default_root_dir)."""
        self.governor = governor
        self.dirpath = dirpath

    @classmethod
    def from_env(
        cls, dirpath: str | os.PathLike[str] | None = None, **options: Any
    ) -> GovernorLightningCallback:
        """From GOVERNOR_URL, GOVERNOR_RUN_ID and GOVERNOR_JOB_TOKEN; `options` go to Governor."""
        return cls(GovernorLoop.from_env(phase="loading", **options), dirpath)

    def guard(self) -> GovernorLoop:
        """Wrap trainer.fit(): a crash is reported and the run marked failed (on_exception
        does that too); a normal end marks it finished."""
        return self.governor

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        total = trainer.estimated_stepping_batches
        self.governor.step(trainer.global_step, total_steps=int(total) if total < inf else None)
        self.governor.phase("compiling")

    def on_train_batch_end(
        self,
        trainer: pl.Trainer,
        pl_module: pl.LightningModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
    ) -> None:
        # global_step counts optimizer steps: with gradient accumulation the first batches
        # come before the first step.
        # The step first: entering a phase sends a beat at once, with the step it finds.
        self.governor.step(trainer.global_step)
        if trainer.global_step < 1:
            self.governor.phase("compiling")
        else:
            self.governor.phase("canary" if self.governor.directive.held_to_canary else "training")
        # The loggers' pace; Lightning's logger connector sets it on the Trainer, undeclared.
        pace = trainer.log_every_n_steps  # type: ignore[attr-defined]
        if trainer.global_step % max(1, pace) == 0:
            self.governor.metrics(trainer.callback_metrics)
        if self.governor.should_stop() and not trainer.should_stop:
            if self.governor.directive.save_first:
                self._save(trainer)
            trainer.should_stop = True
        elif self.governor.should_checkpoint():
            self._save(trainer)

    def on_validation_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.governor.phase("evaluation")

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.governor.metrics(trainer.callback_metrics)

    def on_train_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if self.governor.should_stop():
            self.governor.stopped()

    def on_exception(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, exception: BaseException
    ) -> None:
        if isinstance(exception, Exception):  # an interrupt is not the run's failure
            self.governor.failed(exception)

    def _save(self, trainer: pl.Trainer) -> None:
        directory = self.dirpath or trainer.default_root_dir
        path = os.path.join(directory, f"governor-step={trainer.global_step}.ckpt")
        trainer.save_checkpoint(path)
        self.governor.checkpoint(path, trainer.global_step)
