"""The stop latency in force: the 95th percentile of the latest stops by nearest rank, from
five stops on, never below the declared figure."""

from __future__ import annotations

import pytest

from governor.domain.stop_latency import LatencySource, StopLatency, percentile_95


def test_fewer_than_five_stops_teach_nothing() -> None:
    assert percentile_95([]) is None
    assert percentile_95([90.0, 91.0, 92.0, 93.0]) is None


@pytest.mark.parametrize(
    ("seconds", "expected"),
    [
        ([12.0, 3.0, 7.0, 9.0, 5.0], 12.0),  # five: the slowest (rank ceil(4.75) = 5)
        ([float(n) for n in range(1, 21)], 19.0),  # twenty: the 19th, one slower stop left out
        ([float(n) for n in range(1, 11)], 10.0),  # ten: rank ceil(9.5) = 10
        ([10.0] * 19 + [500.0], 10.0),  # one outlier in twenty does not set the margin
        ([10.0] * 18 + [400.0, 500.0], 400.0),  # two do
    ],
)
def test_the_95th_percentile_is_one_of_the_stops_by_nearest_rank(
    seconds: list[float], expected: float
) -> None:
    assert percentile_95(seconds) == expected


def test_the_figure_in_force_is_never_below_the_declared_one() -> None:
    faster = StopLatency(declared_s=30.0, learned_s=12.0, stops=8)
    assert (faster.in_force_s, faster.source) == (30.0, LatencySource.DECLARED)
    slower = StopLatency(declared_s=30.0, learned_s=45.5, stops=8)
    assert (slower.in_force_s, slower.source) == (45.5, LatencySource.LEARNED)
    unknown = StopLatency(declared_s=30.0, learned_s=None, stops=3)
    assert (unknown.in_force_s, unknown.source) == (30.0, LatencySource.DECLARED)
