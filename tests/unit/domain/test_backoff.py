"""Exponential backoff: the one formula the stop orders' and the webhooks' retries share."""

from __future__ import annotations

import pytest

from governor.domain.backoff import backoff_s


@pytest.mark.parametrize(
    ("attempt", "first_s", "most_s", "expected"),
    [
        (1, 1.0, 60.0, 1.0),
        (2, 1.0, 60.0, 2.0),
        (6, 1.0, 60.0, 32.0),
        (7, 1.0, 60.0, 60.0),  # 64 s, capped
        (50, 1.0, 60.0, 60.0),
        (1, 0.5, 10.0, 0.5),
        (3, 0.5, 10.0, 2.0),
        (0, 2.0, 60.0, 2.0),  # no attempt yet waits as the first
    ],
)
def test_the_wait_doubles_from_the_first_and_is_capped(
    attempt: int, first_s: float, most_s: float, expected: float
) -> None:
    assert backoff_s(attempt, first_s=first_s, most_s=most_s) == expected
