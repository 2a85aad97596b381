"""The stop order's state machine: save first, then stop the pod the way that keeps its volume.

requested -> job_notified -> job_acked | deadline_passed -> provider_stop_sent -> stopped | failed

A terminate-only provider (no stop that keeps the disk) goes on from job_acked only when the
job's checkpoint lies on the pod's persistent filesystem; otherwise the order is held (the
operator is alerted until the job saves there, or someone stops the pod by hand).
"""

from __future__ import annotations

import posixpath
from datetime import datetime
from enum import StrEnum

from governor.domain.backoff import backoff_s


class StopState(StrEnum):
    REQUESTED = "requested"
    JOB_NOTIFIED = "job_notified"
    JOB_ACKED = "job_acked"
    DEADLINE_PASSED = "deadline_passed"
    PROVIDER_STOP_SENT = "provider_stop_sent"
    HELD = "held"  # terminate-only and no checkpoint on the persistent filesystem: alerting
    STOPPED = "stopped"
    FAILED = "failed"

    @property
    def is_active(self) -> bool:
        return self not in (StopState.STOPPED, StopState.FAILED)

    @property
    def waits_for_job(self) -> bool:
        return self in (StopState.REQUESTED, StopState.JOB_NOTIFIED)

    @property
    def ready_for_provider(self) -> bool:
        return self in (
            StopState.JOB_ACKED,
            StopState.DEADLINE_PASSED,
            StopState.PROVIDER_STOP_SENT,
        )


ACTIVE_STATES = tuple(s for s in StopState if s.is_active)
ESCALATE_AFTER_ATTEMPTS = 3
MAX_RETRY_DELAY_S = 60.0
MAX_ASKED_DELAY_S = 900.0  # a provider asking for longer is asked again after this
JITTER = 0.2  # retries spread over the last fifth of each backoff step


def after_delivery(state: StopState) -> StopState:
    """The job has been handed the stop directive."""
    return StopState.JOB_NOTIFIED if state is StopState.REQUESTED else state


def after_ack(state: StopState) -> StopState:
    """The job says it has saved and is stopping (a held order looks at the new checkpoint)."""
    return StopState.JOB_ACKED if state.waits_for_job or state is StopState.HELD else state


def after_clock(state: StopState, deadline: datetime, now: datetime) -> StopState:
    """The deadline stops the pod whether or not the job has saved."""
    return StopState.DEADLINE_PASSED if state.waits_for_job and now >= deadline else state


def retry_delay_s(attempts: int, *, asked_s: float | None = None, spread: float = 0.0) -> float:
    """The wait after a retryable provider failure: the one place retries are paced.

    Exponential backoff (1 s, 2 s, 4 s ... 60 s), shortened by up to JITTER of itself by
    `spread` (a random fraction in [0, 1)) so many governors do not retry in step; never
    less than what the provider asked for (its Retry-After), up to MAX_ASKED_DELAY_S.
    """
    backoff = backoff_s(attempts, most_s=MAX_RETRY_DELAY_S) * (1.0 - JITTER * spread)
    if asked_s is None:
        return backoff
    return max(backoff, min(asked_s, MAX_ASKED_DELAY_S))


def saved_on(checkpoint_path: str | None, mount: str | None) -> bool:
    """Whether a checkpoint path lies on the filesystem mounted at `mount`."""
    if not checkpoint_path or not mount or not posixpath.isabs(checkpoint_path):
        return False
    path, root = posixpath.normpath(checkpoint_path), posixpath.normpath(mount)
    return path == root or path.startswith(root.rstrip("/") + "/")
