"""How long a provider's stop really takes, learned from the stops it has carried out.

The shutdown part of committed spend holds each pod's burn over its provider's stop latency.
The provider declares a figure; the governor measures every completed stop from its first
request to the provider confirming the pod stopped (failed calls, their retries and any
wait the provider asked for are inside it), keeps the last LEARN_FROM_LAST of each provider
and region, and once it holds MIN_STOPS takes their 95th percentile. The figure in force is
never below the declared one: a provider faster than it says keeps its declared margin.
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
    if len(seconds) < MIN_STOPS:
        return None
    ordered = sorted(seconds)
    rank = math.ceil(PERCENTILE / 100 * len(ordered))
    return ordered[rank - 1]


class LatencySource(StrEnum):
    DECLARED = "declared"  # the provider's own figure: no learned one yet, or it is higher
    LEARNED = "learned"  # the 95th percentile of the provider's latest stops, above the declared


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
