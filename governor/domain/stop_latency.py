"""How long a provider's stop really takes, learned from the stops it has carried out.

The shutdown part of committed spend holds each pod's burn over its provider's stop latency.
The provider declares a figure; the governor measures every completed stop from its first
request to the provider confirming the pod stopped (failed calls, their retries and any
wait the provider asked for are inside it), keeps the last LEARN_FROM_LAST of each provider
and region, and once it holds MIN_STOPS learns a figure from them (`learned_s`): their 95th
percentile while none of them was refused; once any was, no less than the worst retry
sequence they have shown on top of the 95th percentile of the stop calls themselves. The
figure in force is never below the declared one: a provider faster than it says keeps its
declared margin.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

LEARN_FROM_LAST = 20  # the stops each provider and region is judged on: the latest ones
MIN_STOPS = 5  # fewer than this and the declared figure stands alone
PERCENTILE = 95


def percentile_95(seconds: Sequence[float]) -> float | None:
    """The 95th percentile of `seconds` by nearest rank (the smallest value that at least 95%
    of them do not exceed: always one of them, never an interpolation below it), or None
    while there are fewer than MIN_STOPS."""
    return None if len(seconds) < MIN_STOPS else _nearest_rank(seconds)


def _nearest_rank(seconds: Sequence[float]) -> float:
    ordered = sorted(seconds)
    return ordered[math.ceil(PERCENTILE / 100 * len(ordered)) - 1]


@dataclass(frozen=True)
class StopTime:
    """One completed stop: `seconds` from the first request to the pod confirmed stopped;
    `refusals`, how many of its requests the provider refused retryably; `retrying_s`, from
    the first request to the request after the last refusal (0 when none was refused);
    `longest_retry_s`, the longest span from a refused request to the next one (the call,
    the wait it asked for or the governor's backoff, and the pass that sent the retry)."""

    seconds: float
    refusals: int = 0
    retrying_s: float = 0.0
    longest_retry_s: float = 0.0

    @property
    def call_s(self) -> float:
        """The stop call that was taken: from its request to the pod confirmed stopped."""
        return max(0.0, self.seconds - self.retrying_s)


def learned_s(stops: Sequence[StopTime]) -> float | None:
    """What a provider and region's latest stops teach (None while fewer than MIN_STOPS).

    Their 95th percentile, while none of them was refused. Once any was, the figure is also
    at least the worst retry sequence they have shown — the most refusals one stop met,
    each taking as long as the longest refusal-to-retry span seen — plus the 95th percentile
    of the taken calls alone. Refusals are few and each costs a whole wait, so a stop's time
    on a failing provider is a sum of a handful of large steps, and a 95th percentile of
    twenty leaves one such stop above it by definition; the sum bounds every stop with no
    more refusals than the most seen and no longer waits than the longest seen."""
    plain = percentile_95([stop.seconds for stop in stops])
    if plain is None or not any(stop.refusals for stop in stops):
        return plain
    calls = _nearest_rank([stop.call_s for stop in stops])
    most = max(stop.refusals for stop in stops)
    longest = max(stop.longest_retry_s for stop in stops)
    return max(plain, calls + most * longest)


class LatencySource(StrEnum):
    DECLARED = "declared"  # the provider's own figure: no learned one yet, or it is higher
    LEARNED = "learned"  # from the provider's latest stops (`learned_s`), above the declared


@dataclass(frozen=True)
class StopLatency:
    """A pod's stop latency: what its provider declared, what its provider's latest stops
    taught (None until MIN_STOPS), and from how many stops."""

    declared_s: float
    learned_s: float | None
    stops: int

    @property
    def in_force_s(self) -> float:
        """The figure the shutdown margin uses: the learned one, never below the declared."""
        return self.declared_s if self.learned_s is None else max(self.declared_s, self.learned_s)

    @property
    def source(self) -> LatencySource:
        if self.learned_s is not None and self.learned_s > self.declared_s:
            return LatencySource.LEARNED
        return LatencySource.DECLARED


def in_force_s(declared_s: float, learned_s: float | None) -> float:
    """StopLatency.in_force_s, for a caller holding the two figures only."""
    return StopLatency(declared_s, learned_s, 0).in_force_s
