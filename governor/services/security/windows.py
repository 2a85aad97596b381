"""Counting per key in fixed windows of time, in memory: what the limiters share.

Each window lasts `window_s` seconds of the injected monotonic clock; every count starts
again at zero when a new window begins. Thread-safe. The number of keys is bounded: past
`max_keys` in one window the keys counted longest ago are let go, one for each new key, so many
distinct keys cannot grow memory without bound, nor reset the counts of keys still counting.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import TypeVar

from governor.domain.errors import GovernorError

MAX_KEYS = 100_000

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class Throttled(GovernorError):
    """Too many requests of one kind from one caller in this window (429 with Retry-After)."""

    code = "too_many_requests"

    def __init__(self, message: str, retry_after_s: float) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class FixedWindows:
    def __init__(
        self,
        window_s: float,
        *,
        max_keys: int = MAX_KEYS,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.window_s = window_s
        self._max_keys, self._monotonic = max_keys, monotonic
        self._window = -1
        self._counts: OrderedDict[Hashable, int] = OrderedDict()
        self._lock = threading.Lock()

    def count(self, key: Hashable) -> int:
        """How many times `key` was added in this window."""
        with self._lock:
            self._roll()
            return self._counts.get(key, 0)

    def add(self, key: Hashable) -> int:
        """Count `key` once more; its count in this window, this one included."""
        with self._lock:
            self._roll()
            return self._add(key)

    def take(self, key: Hashable, limit: int) -> bool:
        """Count `key` once more if it is under `limit` in this window; False if it is not."""
        with self._lock:
            self._roll()
            if self._counts.get(key, 0) >= limit:
                return False
            self._add(key)
            return True

    def left_s(self) -> float:
        """Seconds until the next window (at least one: what a Retry-After may say)."""
        with self._lock:
            return max(1.0, (self._window + 1) * self.window_s - self._monotonic())

    def _add(self, key: Hashable) -> int:
        count = self._counts.get(key, 0) + 1
        keep_newest(self._counts, key, count, self._max_keys)
        return count

    def _roll(self) -> None:
        window = int(self._monotonic() // self.window_s)
        if window != self._window:
            self._window = window
            self._counts.clear()


def keep_newest(table: OrderedDict[K, V], key: K, value: V, max_keys: int) -> None:
    """Set `key` to `value` as the table's newest entry; past `max_keys` entries the oldest
    go (those set longest ago), never more than that."""
    table[key] = value
    table.move_to_end(key)
    while len(table) > max_keys:
        table.popitem(last=False)
