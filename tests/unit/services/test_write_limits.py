"""Per-token write limits: a fixed window per token and kind, refusals counted by kind."""

from __future__ import annotations

import pytest

from governor.services.security.write_limits import TooManyWrites, WriteKind, WriteLimiter


class Ticking:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_past_its_limit_a_token_is_refused_until_the_minute_is_over() -> None:
    clock = Ticking()
    limiter = WriteLimiter({WriteKind.EVENT: 3}, monotonic=clock)
    for _ in range(3):
        limiter.admit(WriteKind.EVENT, "tok_a")
    clock.now = 20.0
    with pytest.raises(TooManyWrites) as refused:
        limiter.admit(WriteKind.EVENT, "tok_a")
    assert refused.value.retry_after_s == pytest.approx(40.0)
    limiter.admit(WriteKind.EVENT, "tok_b")  # another token has its own count
    limiter.admit(WriteKind.HEARTBEAT, "tok_a")  # and another kind its own limit
    clock.now = 60.0
    limiter.admit(WriteKind.EVENT, "tok_a")
    assert limiter.refused() == {
        WriteKind.HEARTBEAT: 0,
        WriteKind.EVENT: 1,
        WriteKind.EXTENSION: 0,
    }


def test_a_job_heartbeating_a_few_times_a_second_is_never_refused() -> None:
    clock = Ticking()
    limiter = WriteLimiter(monotonic=clock)
    for beat in range(5 * 600):  # five a second for ten minutes
        clock.now = beat / 5
        limiter.admit(WriteKind.HEARTBEAT, "tok_job")
    assert limiter.refused()[WriteKind.HEARTBEAT] == 0
