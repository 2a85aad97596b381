"""The stop order's state machine: save first, then stop the pod the way that keeps its volume.

requested -> job_notified -> job_acked | deadline_passed -> provider_stop_sent -> stopped | failed
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum


class StopState(StrEnum):
    REQUESTED = "requested"
    JOB_NOTIFIED = "job_notified"
    JOB_ACKED = "job_acked"
    DEADLINE_PASSED = "deadline_passed"
    PROVIDER_STOP_SENT = "provider_stop_sent"
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


def after_delivery(state: StopState) -> StopState:
    """The job has been handed the stop directive."""
    return StopState.JOB_NOTIFIED if state is StopState.REQUESTED else state


def after_ack(state: StopState) -> StopState:
    """The job says it has saved and is stopping."""
    return StopState.JOB_ACKED if state.waits_for_job else state


def after_clock(state: StopState, deadline: datetime, now: datetime) -> StopState:
    """The deadline stops the pod whether or not the job has saved."""
    return StopState.DEADLINE_PASSED if state.waits_for_job and now >= deadline else state


def retry_delay_s(attempts: int) -> float:
    """Exponential backoff after a retryable provider failure: 1 s, 2 s, 4 s ... 60 s."""
    return min(MAX_RETRY_DELAY_S, 2.0 ** max(0, attempts - 1))
