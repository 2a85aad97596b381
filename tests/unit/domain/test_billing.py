"""The reconciliation arithmetic: prorating the meter over a window, true-ups and drift."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal as D

import pytest

from governor.domain.billing import Slice, metered_within, reconcile

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def minute(i: int, amount: str = "0.60") -> Slice:
    return Slice(D(amount), T0 + timedelta(minutes=i), T0 + timedelta(minutes=i + 1))


def test_whole_slices_count_whole_and_edges_are_prorated() -> None:
    slices = [minute(i) for i in range(10)]
    start, end = T0 + timedelta(seconds=30), T0 + timedelta(minutes=5)
    assert metered_within(slices, start, end) == D("2.70")  # half of one, then four whole
    assert metered_within(slices, T0 - timedelta(hours=1), T0) == 0


@pytest.mark.parametrize(
    ("metered", "trued", "billed", "true_up", "drifting"),
    [
        ("100", "0", "100", "0", False),
        ("100", "0", "104", "4", False),  # 4% apart: trued up, not drift
        ("100", "0", "110", "10", True),
        ("100", "6", "110", "4", True),  # six booked already: four more
        ("100", "0", "80", "0", True),  # billed less: spend stays metered
        ("0.10", "0", "0.105", "0.005", False),  # 5% but under a cent: rounding
        ("0", "0", "0", "0", False),
    ],
)
def test_true_up_and_drift(
    metered: str, trued: str, billed: str, true_up: str, drifting: bool
) -> None:
    result = reconcile(D(metered), D(trued), D(billed))
    assert result.true_up == D(true_up)
    assert result.drifting is drifting
