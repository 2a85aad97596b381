"""Writes a token may make are limited per minute, by kind: heartbeats, events, extension
requests. Past its limit a token's writes of that kind are refused until the minute is over
(429 with Retry-After) and counted by kind. In memory: each replica counts its own.

The defaults leave a job's ordinary pace far below the limit: a job heartbeating a few times
a second is never refused.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Mapping
from enum import StrEnum

from governor.services.security.windows import FixedWindows, Throttled

WINDOW_S = 60.0


class WriteKind(StrEnum):
    HEARTBEAT = "heartbeat"
    EVENT = "event"
    EXTENSION = "extension"


PER_MINUTE: Mapping[WriteKind, int] = {
    WriteKind.HEARTBEAT: 600,
    WriteKind.EVENT: 60,
    WriteKind.EXTENSION: 10,
}


class TooManyWrites(Throttled):
    code = "too_many_writes"


class WriteLimiter:
    def __init__(
        self,
        per_minute: Mapping[WriteKind, int] = PER_MINUTE,
        *,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._limits = {**PER_MINUTE, **per_minute}
        self._counts = FixedWindows(WINDOW_S, monotonic=monotonic)
        self._refused = dict.fromkeys(WriteKind, 0)
        self._lock = threading.Lock()

    def admit(self, kind: WriteKind, token_id: str | None) -> None:
        """Count one write of `kind` by this token; TooManyWrites past its limit."""
        if self._counts.take((kind, token_id), self._limits[kind]):
            return
        with self._lock:
            self._refused[kind] += 1
        left = self._counts.left_s()
        raise TooManyWrites(
            f"more than {self._limits[kind]} {kind.value} writes in a minute from this token; "
            f"try again in {math.ceil(left)} s",
            left,
        )

    def refused(self) -> dict[WriteKind, int]:
        """Writes refused since this process started, by kind."""
        with self._lock:
            return dict(self._refused)
