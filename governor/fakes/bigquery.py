"""A fake BigQuery holding a fake GCP project's Cloud Billing export (the resource-level
detailed export), served by the fake GCP:

    POST /bigquery/v2/projects/{p}/queries              jobs.query
    GET  /bigquery/v2/projects/{p}/queries/{jobId}      jobs.getQueryResults (pageToken=)

The export has one row per resource and hour: each VM's rate for the seconds of the hour
it ran, and each of its persistent disks' price for the hour (disks bill whether the VM
runs or not), times `factor` (a rate wrong somewhere); a row appears once its hour has
ended and `lag_s` more have passed, as the real export lags. The query's SQL is not
parsed: it must name the export's table (rows put in `extra` by hand join the export
too, e.g. in another currency), and its named parameters (`project`, `zone`,
`resources`, `since`) select the rows, summed by currency. Answers have BigQuery's shapes:
a schema, rows of `{"f": [{"v": ...}]}` cells (TIMESTAMPs as int64 microseconds, as with
`formatOptions.useInt64Timestamp`), `jobComplete` (false for the first `pending_polls`
answers of each job) and a `pageToken` when more than `page_size` rows remain.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from types import MappingProxyType
from typing import Any
from uuid import uuid4

from governor.domain.money import HOURS_PER_MONTH, charge

# Google's list prices per GB-month of provisioned size, the fake export's price sheet.
DISK_PRICES: Mapping[str, Decimal] = MappingProxyType(
    {"pd-standard": Decimal("0.04"), "pd-balanced": Decimal("0.10"), "pd-ssd": Decimal("0.17")}
)
SCHEMA = {
    "fields": [
        {"name": "currency", "type": "STRING", "mode": "NULLABLE"},
        {"name": "cost", "type": "FLOAT", "mode": "NULLABLE"},
        {"name": "through", "type": "TIMESTAMP", "mode": "NULLABLE"},
    ]
}
HOUR = timedelta(hours=1)
# Each answer's `kind`, fixed by the discovery document (its schema's default)
QUERY_RESPONSE = "bigquery#queryResponse"  # jobs.query
RESULTS_RESPONSE = "bigquery#getQueryResultsResponse"  # jobs.getQueryResults


@dataclass(frozen=True)
class ExportRow:
    project: str
    zone: str
    resource: str  # resource.name: a VM's or a disk's name
    start: datetime
    end: datetime
    cost: Decimal
    currency: str = "USD"


@dataclass(frozen=True)
class Metered:
    """What one resource bills: `rate` per hour while one of its `runs` lasts."""

    zone: str
    resource: str
    rate: Decimal
    runs: Sequence[tuple[datetime, datetime | None]]


@dataclass
class BillingExport:
    table: str  # project.dataset.table
    factor: Decimal = Decimal(1)
    lag_s: float = 0.0
    page_size: int = 1000
    pending_polls: int = 0
    extra: list[ExportRow] = field(default_factory=list)  # rows put in by hand (a currency)
    jobs: dict[str, list[list[Any]]] = field(default_factory=dict)
    polls: dict[str, int] = field(default_factory=dict)

    def rows(self, project: str, metered: Iterable[Metered], now: datetime) -> list[ExportRow]:
        """The export as it stands at `now`: whole hours, ended `lag_s` ago or more."""
        until = now - timedelta(seconds=self.lag_s)
        found: list[ExportRow] = []
        for item in metered:
            for start, end in item.runs:
                hour = start.replace(minute=0, second=0, microsecond=0)
                while hour + HOUR <= until and (end is None or hour < end):
                    ran = min(hour + HOUR, end or until) - max(hour, start)
                    cost = charge(item.rate, max(0.0, ran.total_seconds())) * self.factor
                    row = ExportRow(project, item.zone, item.resource, hour, hour + HOUR, cost)
                    found.append(row)
                    hour += HOUR
        return found + [row for row in self.extra if row.end <= until]

    def query(self, body: Any, rows: Callable[[], list[ExportRow]]) -> tuple[int, dict[str, Any]]:
        """jobs.query: (status, answer)."""
        if not isinstance(body, dict) or f"`{self.table}`" not in str(body.get("query", "")):
            return 404, _error(404, "notFound", f"Not found: Table {self.table} was not found")
        params = {p.get("name"): p.get("parameterValue", {}) for p in body["queryParameters"]}
        since = datetime.fromisoformat(params["since"]["value"])
        wanted = {v["value"] for v in params["resources"]["arrayValues"]}
        sums: dict[str, tuple[Decimal, datetime]] = {}
        for row in rows():
            if (
                row.project == params["project"]["value"]
                and row.zone == params["zone"]["value"]
                and row.resource in wanted
                and row.start >= since
            ):
                cost, end = sums.get(row.currency, (Decimal(0), row.end))
                sums[row.currency] = (cost + row.cost, max(end, row.end))
        job = f"job_{uuid4().hex[:20]}"
        self.jobs[job] = [
            [currency, str(cost), str(int(end.timestamp() * 1_000_000))]
            for currency, (cost, end) in sorted(sums.items(), key=lambda s: s[0] != "USD")
        ]
        return self._page(job, None, QUERY_RESPONSE)

    def results(self, job: str, page_token: str | None) -> tuple[int, dict[str, Any]]:
        """jobs.getQueryResults: one page of a job's rows, once the job is complete."""
        if job not in self.jobs:
            return 404, _error(404, "notFound", f"Not found: Job {job}")
        return self._page(job, page_token, RESULTS_RESPONSE)

    def _page(self, job: str, page_token: str | None, kind: str) -> tuple[int, dict[str, Any]]:
        """A QueryResponse or a GetQueryResultsResponse (by `kind`): the job not complete
        yet, or one page of its rows."""
        reference = {"jobId": job, "location": "US"}
        self.polls[job] = self.polls.get(job, 0) + 1
        if self.polls[job] <= self.pending_polls:
            return 200, {"kind": kind, "jobReference": reference, "jobComplete": False}
        start = int(page_token or 0)
        every = self.jobs[job]
        page = every[start : start + self.page_size]
        more = start + self.page_size < len(every)
        return 200, {
            "kind": kind,
            "schema": SCHEMA,
            "jobReference": reference,
            "totalRows": str(len(every)),
            "rows": [{"f": [{"v": value} for value in row]} for row in page],
            "totalBytesProcessed": "1024",
            "jobComplete": True,
            "cacheHit": False,
            **({"pageToken": str(start + self.page_size)} if more else {}),
        }


def disk_rate(kind: str, size_gb: int) -> Decimal:
    """A disk's price per hour by the fake's price sheet (pd-balanced for other types)."""
    return DISK_PRICES.get(kind, DISK_PRICES["pd-balanced"]) * size_gb / HOURS_PER_MONTH


def _error(status: int, reason: str, message: str) -> dict[str, Any]:
    detail = {"domain": "global", "reason": reason, "message": message}
    return {"error": {"code": status, "message": message, "errors": [detail]}}
