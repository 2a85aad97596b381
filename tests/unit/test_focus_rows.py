"""A cost line in FOCUS 1.0 columns: usage and adjustment rows, storage in GB-hours, the
billing month (December's runs into January), and the CSV's text and batches."""

from __future__ import annotations

import csv
import io
import json
from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal

import pytest

from governor.domain.errors import Invalid
from governor.domain.model import ChargeKind, EntryKind
from governor.render import focus
from governor.services.view.costs import CostLine, CostQuery

D = Decimal
HOUR = datetime(2026, 12, 31, 23, tzinfo=UTC)


def line(**changes: object) -> CostLine:
    fields: dict[str, object] = {
        "hour": HOUR,
        "team_id": "team_default",
        "team_name": "default",
        "budget_id": "bud_1",
        "budget_name": "pilot",
        "pod_id": "pod_1",
        "pod_name": "trainer",
        "provider": "runpod",
        "provider_ref": "x7k2",
        "region": None,
        "gpu_type": "H100",
        "gpu_count": 2,
        "storage_gb": 200.0,
        "charge": ChargeKind.COMPUTE,
        "kind": EntryKind.ACCRUAL,
        "amount": D("3.600000"),
        "seconds": D(1800),
        "note": None,
    }
    return CostLine(**{**fields, **changes})  # type: ignore[arg-type]


def test_a_usage_row_prices_its_hours_at_the_rate_it_was_metered_at() -> None:
    row = focus.row(line())
    assert (row["PricingQuantity"], row["PricingUnit"]) == (D("0.500000"), "Hours")
    assert row["ListUnitPrice"] == row["ContractedUnitPrice"] == D("7.200000")
    assert row["BilledCost"] == row["EffectiveCost"] == row["ListCost"] == D("3.600000")
    assert row["ChargeCategory"] == "Usage" and row["ServiceCategory"] == "Compute"
    assert row["SkuPriceId"] == "runpod/H100/compute@7.200000"
    assert row["ChargeDescription"] == "GPU compute of pod 'trainer' (H100 x2) at $7.20/h"
    assert (row["BillingPeriodStart"], row["BillingPeriodEnd"]) == (
        datetime(2026, 12, 1, tzinfo=UTC),
        datetime(2027, 1, 1, tzinfo=UTC),
    )
    assert (row["ChargePeriodStart"], row["ChargePeriodEnd"]) == (
        HOUR,
        datetime(2027, 1, 1, tzinfo=UTC),
    )
    assert json.loads(row["Tags"]) == {
        "team": "default",
        "team_id": "team_default",
        "budget": "pilot",
        "budget_id": "bud_1",
        "pod_id": "pod_1",
    }


def test_storage_is_consumed_in_gigabyte_hours() -> None:
    row = focus.row(line(charge=ChargeKind.STORAGE, amount=D("0.013699"), seconds=D(3600)))
    assert (row["ConsumedQuantity"], row["ConsumedUnit"]) == (D("200.000000"), "GB-Hours")
    assert row["ServiceCategory"] == "Storage"
    assert row["ChargeDescription"].startswith("Storage of pod 'trainer'")


def test_a_true_up_is_an_adjustment_without_quantities_or_sku() -> None:
    note = "billed 4.00 vs metered 3.63"
    row = focus.row(line(kind=EntryKind.TRUE_UP, amount=D("0.370000"), seconds=D(0), note=note))
    assert row["ChargeCategory"] == "Adjustment" and row["BilledCost"] == D("0.370000")
    empty = ("ConsumedQuantity", "PricingQuantity", "ListUnitPrice", "SkuId", "SkuPriceId")
    assert all(row[name] is None for name in empty)
    assert row["ChargeDescription"] == (
        f"Billing true-up of the GPU compute of pod 'trainer' (H100 x2): {note}"
    )


def test_the_csv_has_six_decimals_utc_instants_and_empty_fields(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(focus, "BATCH", 2)
    chunks = list(focus.csv_chunks([line(), line(), line(amount=D("1.5"))]))
    assert len(chunks) == 2  # a chunk a batch, the rest after
    rows = list(csv.DictReader(io.StringIO("".join(chunks))))
    assert [r["BilledCost"] for r in rows] == ["3.600000", "3.600000", "1.500000"]
    assert rows[0]["ChargePeriodStart"] == "2026-12-31T23:00:00Z"
    assert rows[0]["RegionId"] == "" and rows[0]["AvailabilityZone"] == ""


@pytest.mark.parametrize(
    ("start", "end", "said"),
    [
        (datetime(2026, 1, 1, tzinfo=timezone(timedelta(hours=1))), HOUR, "in UTC"),
        (datetime(2026, 1, 1, 0, 0, 1, tzinfo=UTC), HOUR, "whole UTC hour"),
        (HOUR, HOUR, "later than `from`"),
        (datetime(2025, 1, 1, tzinfo=UTC), datetime(2026, 1, 3, tzinfo=UTC), "366 days"),
    ],
)
def test_a_stretch_is_whole_utc_hours_in_order_within_a_year(
    start: datetime, end: datetime, said: str
) -> None:
    with pytest.raises(Invalid, match=said):
        CostQuery(start, end)


def test_by_default_the_month_so_far_with_the_current_hour_whole() -> None:
    query = CostQuery.of(None, None, datetime(2026, 3, 14, 15, 9, 26, tzinfo=UTC))
    assert (query.start, query.end) == (
        datetime(2026, 3, 1, tzinfo=UTC),
        datetime(2026, 3, 14, 16, tzinfo=UTC),
    )
