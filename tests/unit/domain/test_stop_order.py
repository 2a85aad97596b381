from datetime import UTC, datetime, timedelta

import pytest

from governor.domain.stop_order import (
    StopState,
    after_ack,
    after_clock,
    after_delivery,
    retry_delay_s,
)

S = StopState
DEADLINE = datetime(2026, 1, 1, 12, tzinfo=UTC)


@pytest.mark.parametrize(
    ("state", "delivered", "acked"),
    [
        (S.REQUESTED, S.JOB_NOTIFIED, S.JOB_ACKED),
        (S.JOB_NOTIFIED, S.JOB_NOTIFIED, S.JOB_ACKED),
        (S.JOB_ACKED, S.JOB_ACKED, S.JOB_ACKED),
        (S.DEADLINE_PASSED, S.DEADLINE_PASSED, S.DEADLINE_PASSED),  # too late to ack
        (S.PROVIDER_STOP_SENT, S.PROVIDER_STOP_SENT, S.PROVIDER_STOP_SENT),
        (S.STOPPED, S.STOPPED, S.STOPPED),
        (S.FAILED, S.FAILED, S.FAILED),
    ],
)
def test_job_transitions(state: StopState, delivered: StopState, acked: StopState) -> None:
    assert after_delivery(state) is delivered
    assert after_ack(state) is acked


@pytest.mark.parametrize(
    ("state", "offset_s", "expected"),
    [
        (S.REQUESTED, 0, S.DEADLINE_PASSED),
        (S.JOB_NOTIFIED, 1, S.DEADLINE_PASSED),
        (S.JOB_NOTIFIED, -1, S.JOB_NOTIFIED),
        (S.JOB_ACKED, 10, S.JOB_ACKED),
        (S.PROVIDER_STOP_SENT, 10, S.PROVIDER_STOP_SENT),
    ],
)
def test_the_deadline_stops_waiting_for_the_job(
    state: StopState, offset_s: int, expected: StopState
) -> None:
    assert after_clock(state, DEADLINE, DEADLINE + timedelta(seconds=offset_s)) is expected


def test_only_saved_or_late_orders_go_to_the_provider() -> None:
    ready = {s for s in S if s.ready_for_provider}
    assert ready == {S.JOB_ACKED, S.DEADLINE_PASSED, S.PROVIDER_STOP_SENT}
    assert {s for s in S if not s.is_active} == {S.STOPPED, S.FAILED}


@pytest.mark.parametrize(
    ("attempts", "delay"), [(1, 1.0), (2, 2.0), (3, 4.0), (7, 60.0), (50, 60.0)]
)
def test_retry_backoff_doubles_up_to_a_minute(attempts: int, delay: float) -> None:
    assert retry_delay_s(attempts) == delay


@pytest.mark.parametrize("spread", [0.0, 0.5, 0.999])
def test_jitter_shortens_a_step_by_at_most_a_fifth(spread: float) -> None:
    delay = retry_delay_s(3, spread=spread)
    assert 4.0 * 0.8 < delay <= 4.0
    assert delay == 4.0 * (1 - 0.2 * spread)


@pytest.mark.parametrize(
    ("attempts", "asked", "delay"),
    [(1, 30.0, 30.0), (7, 5.0, 60.0), (1, 0.0, 1.0), (1, 86_400.0, 900.0)],
)
def test_a_providers_retry_after_is_honoured(attempts: int, asked: float, delay: float) -> None:
    assert retry_delay_s(attempts, asked_s=asked) == delay
