"""A run's lifecycle: the job's own word moves it while it lives; its pod's stop ends it.

    running <-> checkpointing -> stopping -> stopped      (the job reports each)
    running | checkpointing | stopping -> finished | failed   (the job says so)
    any live state -> stopped    its pod stopped, the job having checked in within its timeout
    any live state -> lost       its pod stopped, the job silent (or never heard from)

An ended run stays ended: a late heartbeat never brings it back (a late stop acknowledgement
still records its checkpoint). A lost run wants an operator until one acknowledges it (its
loss has been seen to); a run lost again after a resume wants one again. How long a stop
waits for a run to save is decided here too.
"""

from __future__ import annotations

from datetime import datetime

from governor.domain.model import Reason, RunStatus

HANGS = (Reason.IDLE_HANG, Reason.STALLED)


def after_report(current: RunStatus, reported: RunStatus) -> RunStatus:
    """What a job's own word moves its run to: anything while it lives, nothing after."""
    return reported if current.is_live else current


def after_pod_stopped(current: RunStatus, *, heard: bool) -> RunStatus:
    """The run's pod has stopped: a live run ends, lost if its job had gone silent."""
    if not current.is_live:
        return current
    return RunStatus.STOPPED if heard else RunStatus.LOST


def awaits_acknowledgement(
    status: RunStatus, ended_at: datetime | None, acknowledged_at: datetime | None
) -> bool:
    """A lost run no operator has acknowledged since it was lost."""
    if status is not RunStatus.LOST:
        return False
    return acknowledged_at is None or (ended_at is not None and acknowledged_at < ended_at)


def save_grace_s(
    reason: Reason, checkpoint_grace_s: float, *, heard: bool, saved_since_progress: bool
) -> float:
    """How long a stop for `reason` waits for this run's job to save.

    Not at all for a job that is silent (it cannot save) or was never heard from, nor for a
    hang whose work is already saved (a checkpoint newer than the last progress): waiting
    would only bill. Otherwise the run's whole checkpoint grace."""
    if reason is Reason.HEARTBEAT_LOST or not heard:
        return 0.0
    if reason in HANGS and saved_since_progress:
        return 0.0
    return checkpoint_grace_s
