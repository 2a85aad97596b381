"""Counts per key in fixed windows, as both limiters keep them: a full table lets its oldest
keys go, one for each new key, and keeps every other count."""

from __future__ import annotations

from governor.services.security.windows import FixedWindows


class Ticking:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_full_table_lets_its_oldest_keys_go_and_keeps_the_rest() -> None:
    clock = Ticking()
    windows = FixedWindows(60, max_keys=3, monotonic=clock)
    for key in "abc":
        windows.add(key)
    assert [windows.add("a") for _ in range(2)] == [2, 3]  # counted again: now the newest
    windows.add("d")  # the table is full: b, counted longest ago, goes
    assert [windows.count(k) for k in "abcd"] == [3, 0, 1, 1]
    assert not windows.take("a", 3)
    assert windows.take("e", 3)  # and c goes
    assert [windows.count(k) for k in "acde"] == [3, 0, 1, 1]
    clock.now = 60.0  # a new window: every count starts again
    assert windows.count("a") == 0
