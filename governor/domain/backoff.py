"""How long to wait before trying again: exponential backoff, the one formula every retry uses."""

from __future__ import annotations


def backoff_s(attempt: int, *, first_s: float = 1.0, most_s: float = 60.0) -> float:
    """The wait after failed attempt number `attempt` (the first is 1): `first_s`, doubling
    with each attempt, at most `most_s`."""
    return min(most_s, first_s * 2.0 ** max(0, attempt - 1))
