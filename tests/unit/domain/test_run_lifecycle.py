"""A run's lifecycle, as a table: what moves it, and how long a stop waits for a save."""

import pytest

from governor.domain.model import Reason, RunStatus
from governor.domain.run_lifecycle import after_pod_stopped, after_report, save_grace_s

LIVE = [RunStatus.RUNNING, RunStatus.CHECKPOINTING, RunStatus.STOPPING]
ENDED = [RunStatus.STOPPED, RunStatus.FINISHED, RunStatus.FAILED, RunStatus.LOST]


@pytest.mark.parametrize("current", LIVE)
@pytest.mark.parametrize("reported", list(RunStatus))
def test_a_live_run_takes_its_jobs_word(current: RunStatus, reported: RunStatus) -> None:
    assert after_report(current, reported) is reported


@pytest.mark.parametrize("current", ENDED)
@pytest.mark.parametrize("reported", list(RunStatus))
def test_an_ended_run_stays_ended(current: RunStatus, reported: RunStatus) -> None:
    assert after_report(current, reported) is current
    assert after_pod_stopped(current, heard=True) is current
    assert after_pod_stopped(current, heard=False) is current


@pytest.mark.parametrize("current", LIVE)
def test_a_pod_stop_ends_a_live_run_stopped_or_lost(current: RunStatus) -> None:
    assert after_pod_stopped(current, heard=True) is RunStatus.STOPPED
    assert after_pod_stopped(current, heard=False) is RunStatus.LOST


@pytest.mark.parametrize(
    ("reason", "heard", "saved", "grace"),
    [
        (Reason.CEILING, True, False, 300.0),
        (Reason.CEILING, True, True, 300.0),  # not a hang: the job saves what it has
        (Reason.MANUAL, False, False, 0.0),  # silent or never heard from: it cannot save
        (Reason.HEARTBEAT_LOST, True, False, 0.0),
        (Reason.IDLE_HANG, True, True, 0.0),  # saved after its last progress: nothing to lose
        (Reason.IDLE_HANG, True, False, 300.0),
        (Reason.STALLED, True, True, 0.0),
        (Reason.STALLED, True, False, 300.0),
    ],
)
def test_how_long_a_stop_waits_for_a_save(
    reason: Reason, heard: bool, saved: bool, grace: float
) -> None:
    assert save_grace_s(reason, 300.0, heard=heard, saved_since_progress=saved) == grace
