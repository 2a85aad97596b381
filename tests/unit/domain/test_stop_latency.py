"""The stop latency in force: the 95th percentile of the latest stops by nearest rank, from
five stops on, or, once any of them was refused, the worst retry sequence they have shown;
never below the declared figure."""

from __future__ import annotations

import pytest

from governor.domain.stop_latency import (
    LatencySource,
    StopLatency,
    StopTime,
    learned_s,
    percentile_95,
)


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


def test_stops_never_refused_teach_their_95th_percentile() -> None:
    stops = [StopTime(float(n)) for n in range(1, 21)]
    assert learned_s(stops) == percentile_95([float(n) for n in range(1, 21)]) == 19.0
    assert learned_s(stops[:4]) is None


def test_a_refused_stop_makes_the_worst_retry_sequence_shown_the_figure() -> None:
    stops = [
        StopTime(10.0),
        StopTime(12.0),
        StopTime(11.0),
        StopTime(20.0, refusals=2, retrying_s=10.0, longest_retry_s=5.0),  # called 10 s
        StopTime(44.0, refusals=1, retrying_s=30.0, longest_retry_s=30.0),  # called 14 s
    ]
    assert percentile_95([stop.seconds for stop in stops]) == 44.0
    # the most refusals seen (2), each as long as the longest span seen (30 s), on top of the
    # 95th percentile of the calls taken (14 s): a stop refused twice for 30 s each fits
    assert learned_s(stops) == 14.0 + 2 * 30.0
    assert [stop.call_s for stop in stops] == [10.0, 12.0, 11.0, 10.0, 14.0]


def test_the_figure_with_refusals_is_never_below_the_plain_95th_percentile() -> None:
    # accepted, still stopping after 85 s, then refused once for 5 s: most of its retrying
    # time lies outside the refusal's span, and the slowest stop still stands
    odd = StopTime(100.0, refusals=1, retrying_s=90.0, longest_retry_s=5.0)
    assert learned_s([StopTime(10.0)] * 4 + [odd]) == 100.0
