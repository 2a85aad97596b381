"""Cost lines in FOCUS, the FinOps Open Cost and Usage Specification, version 1.0: every column
the specification defines, in its order of names, as CSV or as Parquet (docs/costs.md says
what each column holds and why).

CSV is written a batch of lines at a time; Parquet a row group at a time into a temporary
file (its footer follows the last row group), then read back in chunks: neither holds the
whole export in memory. Parquet needs pyarrow, the optional extra `focus`.
"""

from __future__ import annotations

import csv
import io
import json
import tempfile
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from governor.domain.errors import Invalid
from governor.domain.model import ChargeKind, EntryKind
from governor.domain.money import MICRO, dollars_per_hour
from governor.services.view.costs import CostLine

FOCUS_VERSION = "1.0"
EXTRA = "focus"  # the optional extra that brings pyarrow
BATCH = 2000  # lines per CSV chunk and per Parquet row group
COSTS = ("BilledCost", "EffectiveCost", "ListCost", "ContractedCost")
QUANTITIES = ("ConsumedQuantity", "PricingQuantity", "ListUnitPrice", "ContractedUnitPrice")
TIMES = ("BillingPeriodStart", "BillingPeriodEnd", "ChargePeriodStart", "ChargePeriodEnd")
COLUMNS = (
    "AvailabilityZone",
    "BilledCost",
    "BillingAccountId",
    "BillingAccountName",
    "BillingCurrency",
    "BillingPeriodEnd",
    "BillingPeriodStart",
    "ChargeCategory",
    "ChargeClass",
    "ChargeDescription",
    "ChargeFrequency",
    "ChargePeriodEnd",
    "ChargePeriodStart",
    "CommitmentDiscountCategory",
    "CommitmentDiscountId",
    "CommitmentDiscountName",
    "CommitmentDiscountStatus",
    "CommitmentDiscountType",
    "ConsumedQuantity",
    "ConsumedUnit",
    "ContractedCost",
    "ContractedUnitPrice",
    "EffectiveCost",
    "InvoiceIssuerName",
    "ListCost",
    "ListUnitPrice",
    "PricingCategory",
    "PricingQuantity",
    "PricingUnit",
    "ProviderName",
    "PublisherName",
    "RegionId",
    "RegionName",
    "ResourceId",
    "ResourceName",
    "ResourceType",
    "ServiceCategory",
    "ServiceName",
    "SkuId",
    "SkuPriceId",
    "SubAccountId",
    "SubAccountName",
    "Tags",
)
_CHARGED = {ChargeKind.COMPUTE: "GPU compute", ChargeKind.STORAGE: "storage"}
_OTHER = {EntryKind.TRUE_UP: "Billing true-up", EntryKind.ADJUSTMENT: "Operator adjustment"}


def row(line: CostLine) -> dict[str, Any]:
    """One cost line's FOCUS columns: amounts as Decimals to the micro-dollar, instants aware
    UTC, None where a column is empty."""
    usage = line.kind is EntryKind.ACCRUAL
    hours = line.hours.quantize(MICRO)
    unit_price = (line.amount / line.hours).quantize(MICRO) if usage and hours > 0 else None
    sku = f"{line.provider}/{line.gpu_type or 'pod'}/{line.charge.value}"
    consumed, consumed_unit = hours, "Hours"
    if line.charge is ChargeKind.STORAGE:
        consumed = (hours * Decimal(str(line.storage_gb))).quantize(MICRO)
        consumed_unit = "GB-Hours"
    month = line.hour.replace(day=1, hour=0)
    return {
        "AvailabilityZone": None,
        "BilledCost": line.amount,
        "BillingAccountId": line.provider,
        "BillingAccountName": line.provider,
        "BillingCurrency": "USD",
        "BillingPeriodEnd": _next_month(month),
        "BillingPeriodStart": month,
        "ChargeCategory": "Usage" if usage else "Adjustment",
        "ChargeClass": None,
        "ChargeDescription": _description(line, unit_price),
        "ChargeFrequency": "Usage-Based",
        "ChargePeriodEnd": line.period_end,
        "ChargePeriodStart": line.hour,
        "CommitmentDiscountCategory": None,
        "CommitmentDiscountId": None,
        "CommitmentDiscountName": None,
        "CommitmentDiscountStatus": None,
        "CommitmentDiscountType": None,
        "ConsumedQuantity": consumed if usage else None,
        "ConsumedUnit": consumed_unit if usage else None,
        "ContractedCost": line.amount,
        "ContractedUnitPrice": unit_price,
        "EffectiveCost": line.amount,
        "InvoiceIssuerName": line.provider,
        "ListCost": line.amount,
        "ListUnitPrice": unit_price,
        "PricingCategory": "Standard" if usage else None,
        "PricingQuantity": hours if usage else None,
        "PricingUnit": "Hours" if usage else None,
        "ProviderName": line.provider,
        "PublisherName": line.provider,
        "RegionId": line.region,
        "RegionName": line.region,
        "ResourceId": line.provider_ref,
        "ResourceName": line.pod_name,
        "ResourceType": "GPU pod",
        "ServiceCategory": "Compute" if line.charge is ChargeKind.COMPUTE else "Storage",
        "ServiceName": f"{line.provider} GPU pods",
        "SkuId": sku if usage else None,
        "SkuPriceId": f"{sku}@{unit_price}" if unit_price is not None else None,
        "SubAccountId": line.budget_id,
        "SubAccountName": line.budget_name,
        "Tags": json.dumps(_tags(line), sort_keys=True, separators=(",", ":")),
    }


def _tags(line: CostLine) -> dict[str, str]:
    return {
        "team": line.team_name,
        "team_id": line.team_id,
        "budget": line.budget_name,
        "budget_id": line.budget_id,
        "pod_id": line.pod_id,
    }


def _description(line: CostLine, unit_price: Decimal | None) -> str:
    what = f"{_CHARGED[line.charge]} of pod {line.pod_name!r}"
    if line.gpu_type:
        what += f" ({line.gpu_type} x{line.gpu_count or 1})"
    if line.kind is EntryKind.ACCRUAL:
        what = what[0].upper() + what[1:]
        return f"{what} at {dollars_per_hour(unit_price)}" if unit_price is not None else what
    note = f": {line.note}" if line.note else ""
    return f"{_OTHER[line.kind]} of the {what}{note}"


def _next_month(month: datetime) -> datetime:
    if month.month == 12:
        return month.replace(year=month.year + 1, month=1)
    return month.replace(month=month.month + 1)


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, Decimal):
        return f"{value.quantize(MICRO):f}"
    if isinstance(value, datetime):
        return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return str(value)


def csv_chunks(lines: Iterable[CostLine]) -> Iterator[str]:
    """The export as CSV (RFC 4180, a header line first): amounts with six decimals, instants
    as `2026-01-01T13:00:00Z`, an empty field where a column is empty."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\r\n")
    writer.writerow(COLUMNS)
    for count, line in enumerate(lines, start=1):
        columns = row(line)
        writer.writerow([_text(columns[name]) for name in COLUMNS])
        if count % BATCH == 0:
            yield buffer.getvalue()
            buffer.seek(0)
            buffer.truncate()
    yield buffer.getvalue()


def parquet_ready() -> None:
    """Refuse Parquet where pyarrow is not installed, naming the extra that brings it."""
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        raise Invalid(
            "Parquet needs pyarrow, which this server does not have: install the governor "
            f"with its `{EXTRA}` extra (pip install 'gpu-governor[{EXTRA}]'), or ask for CSV"
        ) from None


def parquet_chunks(lines: Iterable[CostLine], chunk_bytes: int = 1 << 20) -> Iterator[bytes]:
    """The export as one Parquet file: amounts and quantities as doubles (what the FinOps
    Foundation's validator reads a decimal column as; six decimals survive up to a billion
    dollars), instants as UTC timestamps, text as strings."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pa.schema(
        [
            (
                name,
                pa.float64()
                if name in COSTS or name in QUANTITIES
                else pa.timestamp("us", tz="UTC")
                if name in TIMES
                else pa.string(),
            )
            for name in COLUMNS
        ]
    )
    with tempfile.TemporaryFile() as spool:
        with pq.ParquetWriter(spool, schema) as writer:
            batch: list[dict[str, Any]] = []
            for line in lines:
                batch.append(row(line))
                if len(batch) == BATCH:
                    writer.write_table(_table(pa, schema, batch))
                    batch = []
            writer.write_table(_table(pa, schema, batch))
        spool.seek(0)
        while chunk := spool.read(chunk_bytes):
            yield chunk


def _table(pa: Any, schema: Any, batch: list[dict[str, Any]]) -> Any:
    def value(v: Any) -> Any:
        return float(v) if isinstance(v, Decimal) else v

    return pa.table({name: [value(r[name]) for r in batch] for name in COLUMNS}, schema=schema)
