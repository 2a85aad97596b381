"""Heartbeats on a background thread, so that a training loop only reads flags."""

from __future__ import annotations

import logging
import os
import threading
import traceback
from collections import deque
from collections.abc import Mapping
from dataclasses import replace
from types import TracebackType
from typing import Any

from governor.client.core import (
    Category,
    Checkpoint,
    Directive,
    Governor,
    Phase,
    Status,
    non_finite,
)

logger = logging.getLogger(__name__)

LAST_WORD_RETRY_S = 30.0  # how long stopped/finished/failed and failure reports are retried
_DATA_LOADING = os.path.join("torch", "utils", "data")


def classify_failure(exc: BaseException) -> tuple[Category, str | None]:
    """Whose failure a crash is, as (category, kind).

    Out of memory is the model's ("oom"); an error raised while loading data is the
    harness's ("data-loading"); anything else is the harness's too.
    """
    if type(exc).__name__ == "OutOfMemoryError" or "out of memory" in str(exc).lower():
        return "model", "oom"
    frames = (frame.f_code.co_filename for frame, _ in traceback.walk_tb(exc.__traceback__))
    if "DataLoader worker" in str(exc) or any(_DATA_LOADING in name for name in frames):
        return "harness", "data-loading"
    return "harness", None


class GovernorLoop:
    """A background thread checks in at the pace the governor asks; the loop reads flags.

    with GovernorLoop.from_env() as gov:  # a crash is reported, a normal end is "finished"
        for n in range(steps):
            train_step(); gov.step(n)
            if gov.should_stop(): gov.stopped(save(n)); break
    """

    def __init__(
        self, governor: Governor, *, phase: Phase | None = None, total_steps: int | None = None
    ) -> None:
        self.governor = governor
        self._step = 0
        self._total_steps = total_steps
        self._phase = phase
        # Phases entered and not yet sent: each is sent, in order, from the first.
        self._entered: deque[Phase] = deque([phase] if phase else [])
        self._metrics: dict[str, Any] | None = None
        self._non_finite: set[str] = set()  # the metrics whose latest value is NaN or infinite
        self._unsent: Checkpoint | None = None  # saved, not yet heard by the governor
        self._saves = 0
        self._stopping = False  # the loop has seen the stop: its next checkpoint acknowledges it
        self._directive = governor.directive
        self._error: Exception | None = None  # what ended the thread, raised in the loop
        self._ended = False
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._halt = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="governor-heartbeat", daemon=True)
        self._thread.start()

    @classmethod
    def from_env(
        cls, *, phase: Phase | None = None, total_steps: int | None = None, **options: Any
    ) -> GovernorLoop:
        """From GOVERNOR_URL, GOVERNOR_RUN_ID and GOVERNOR_JOB_TOKEN; `options` go to Governor."""
        return cls(Governor.from_env(**options), phase=phase, total_steps=total_steps)

    # --- what the training loop calls -------------------------------------------------

    def step(
        self, n: int, *, total_steps: int | None = None, metrics: Mapping[str, Any] | None = None
    ) -> None:
        """Record progress; the thread sends it with the next heartbeat. Never blocks."""
        self._raise_error()
        self._step = n
        if total_steps is not None:
            self._total_steps = total_steps
        if metrics is not None:
            self.metrics(metrics)

    def metrics(self, values: Mapping[str, Any]) -> None:
        """Record metrics (loss, learning rate, grad norm, eval scores, rewards): the next
        heartbeat sends the latest value of each, once. Never blocks, never raises for a value
        (NaN and infinities are sent as the governor's "NaN", "Infinity", "-Infinity"). A
        metric that turns NaN or infinite is sent right away: the governor may stop the run."""
        bad = non_finite(values)
        with self._lock:
            self._metrics = {**(self._metrics or {}), **values}
            turned = bad - self._non_finite
            self._non_finite = (self._non_finite - {str(name) for name in values}) | bad
        if turned:
            self._wake.set()

    def should_checkpoint(self) -> bool:
        """The governor asks for a checkpoint: save, then call checkpoint(path)."""
        self._raise_error()
        return self._directive.should_checkpoint

    def should_stop(self) -> bool:
        """The governor says stop: save (unless `directive.save_first` is False: the weights
        may be NaN), call stopped(path) (or stopped() without a save), and leave the loop."""
        self._raise_error()
        self._stopping = self._stopping or self._directive.should_stop
        return self._stopping

    @property
    def directive(self) -> Directive:
        """The latest directive, with its reason, message, deadline and budget figures."""
        return self._directive

    def phase(self, name: Phase) -> None:
        """Enter a phase (loading, compiling, training, evaluation, ...); sent right away, and
        every phase is sent, however short (a quick compile still shows as one)."""
        with self._lock:
            if name == self._phase:
                return
            self._phase = name
            self._entered.append(name)
        self._wake.set()

    def checkpoint(self, path: str | os.PathLike[str], step: int | None = None) -> None:
        """Report a saved checkpoint (sent right away); once should_stop() has said so, this
        acknowledges the stop."""
        with self._lock:
            self._unsent = Checkpoint(self._step if step is None else step, os.fspath(path))
            self._saves += 1
            if self._directive.should_checkpoint:
                self._directive = replace(self._directive, action="continue")
        self._wake.set()

    def report_failure(self, category: Category, message: str, kind: str | None = None) -> bool:
        """Record a failure (harness, model or provider) now; False if undeliverable."""
        return self.governor.report_failure(
            category, message, kind=kind, retry_for_s=LAST_WORD_RETRY_S
        )

    # --- the last word ------------------------------------------------------------------

    def stopped(self, path: str | os.PathLike[str] | None = None, step: int | None = None) -> None:
        """The job has saved (at `path`, if given) and is exiting: acknowledges a stop."""
        if path is not None:
            self.checkpoint(path, step)
        self._end("stopped")

    def finished(self) -> None:
        """The run completed."""
        self._end("finished")

    def failed(self, exc: BaseException | None = None) -> None:
        """The run gave up; an exception is first reported, classified by classify_failure."""
        if exc is not None and not self._ended and self._error is None:
            category, kind = classify_failure(exc)
            self.report_failure(category, f"{type(exc).__name__}: {exc}", kind)
        self._end("failed")

    def __enter__(self) -> GovernorLoop:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if isinstance(exc, Exception):
            self.failed(exc)
        elif exc is not None or self._directive.should_stop:
            self.stopped()
        else:
            self.finished()

    # --- the thread ----------------------------------------------------------------------

    def _end(self, status: Status) -> None:
        self._halt.set()
        self._wake.set()
        self._thread.join()
        if self._ended:
            return
        self._ended = True
        if self._error is not None:  # refused, or broken: nothing more to say
            self.governor.close()
            return
        try:
            self.governor.heartbeat(
                self._step,
                status=status,
                phase=self._phase,
                total_steps=self._total_steps,
                checkpoint=self._unsent,
                retry_for_s=LAST_WORD_RETRY_S,
            )
        finally:
            self.governor.close()

    def _raise_error(self) -> None:
        if self._error is not None:
            raise self._error

    def _beat(self) -> None:
        while not self._halt.is_set():
            self._wake.clear()
            with self._lock:
                checkpoint, saves = self._unsent, self._saves
                status: Status = "stopping" if self._stopping else "running"
                phase = self._entered.popleft() if self._entered else self._phase
                more = bool(self._entered)
                metrics, self._metrics = self._metrics, None  # each value is sent once
            try:
                directive = self.governor.heartbeat(
                    self._step,
                    status=status,
                    phase=phase,
                    total_steps=self._total_steps,
                    checkpoint=checkpoint,
                    metrics=metrics,
                )
            except Exception as exc:  # a refusal, or a bug: never die silently
                logger.error("Heartbeats stopped: %s", exc)
                self._error = exc
                return
            with self._lock:
                if self.governor.in_contact and self._unsent is checkpoint:
                    self._unsent = None
                # A checkpoint saved while this call was in flight already answers its request.
                if not (directive.should_checkpoint and self._saves != saves):
                    self._directive = directive
            if not more:
                self._wake.wait(directive.next_heartbeat_s)
