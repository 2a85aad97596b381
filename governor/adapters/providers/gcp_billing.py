"""GCP bills from the Cloud Billing export in BigQuery: the resource-level detailed export
(`gcp_billing_export_resource_v1_<ACCOUNT>`), read with BigQuery's `jobs.query` through the
same credentials as the Compute Engine calls.

A VM's bill is every export row of the project and the VM's zone whose `resource.name` is
the VM's or one of its persistent disks' (a boot disk is named as its VM), from the first
whole hour after the pod's registration on. The rows' gross `cost` is summed (credits, such
as sustained-use discounts, are left out: the meter counts list rates) and the bill runs to
the latest `usage_end_time` among them: the export lags by hours and is backfilled for days,
so the window compared with the meter is the one the bill covers. The query is
parameterised (no ref or name is ever spliced into SQL); only the table, checked against
BigQuery's naming, is part of its text. Each query scans the export's partitions from the
window's start on, which BigQuery bills by the byte: the governor asks once per billing
interval per pod, and only while the pod's bill may still change.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from decimal import Decimal, InvalidOperation
from typing import Any

from governor.adapters.providers._http import ProviderHttp
from governor.adapters.providers.gcp import GcpProvider, _last_segment
from governor.domain.ports import Billed

DEFAULT_BIGQUERY_URL = "https://bigquery.googleapis.com/bigquery/v2"
QUERY_TIMEOUT_MS = 10_000  # how long one jobs.query (or getQueryResults) call may wait
MAX_POLLS = 6  # getQueryResults calls for a job still running before giving up (retryable)
TABLE = re.compile(r"(?:[a-z][-a-z0-9.:]{4,62}[a-z0-9]\.)?[A-Za-z0-9_]{1,1024}\.[A-Za-z0-9_-]+")
QUERY = """
SELECT currency, SUM(cost) AS cost, MAX(usage_end_time) AS through
FROM `{table}`
WHERE project.id = @project AND location.zone = @zone
  AND resource.name IN UNNEST(@resources) AND usage_start_time >= @since
GROUP BY currency
"""


def checked_table(table: str) -> str:
    """`project.dataset.table` (or `dataset.table`), as BigQuery names tables; anything else
    is refused, since the name is part of the query's text."""
    if not TABLE.fullmatch(table):
        raise ValueError(
            f"{table!r} is not a BigQuery table name: give the export's "
            "project.dataset.table, e.g. my-project.billing.gcp_billing_export_resource_v1_X"
        )
    return table


class BilledGcpProvider(GcpProvider):
    """The GCP adapter that also reads each VM's bill from the BigQuery billing export
    (ReportsWindowedBilling); `table` is the export's `project.dataset.table`, queried from
    the adapter's project."""

    def __init__(
        self,
        *args: Any,
        table: str,
        bigquery_url: str = DEFAULT_BIGQUERY_URL,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self._table = checked_table(table)
        self._bigquery_url = bigquery_url.rstrip("/")

    def billed_since(
        self, ref: str, since: datetime, now: datetime, read_through: datetime | None
    ) -> Billed:
        """The VM's and its disks' export rows from the first whole hour at or after `since`
        (asked anew every time, whatever `read_through`: the export backfills for days)."""
        url, http = self._instance_url(ref), self._http()
        zone, _, name = ref.partition("/")
        instance = http.request("GET", url)
        if not isinstance(instance, dict):
            raise http.error(f"answered {instance!r:.200}, not an instance", True)
        disks = [_last_segment(d.get("source")) for d in instance.get("disks") or []]
        resources = sorted({name, *(d for d in disks if d)})  # local SSDs have no source
        start = _hour_up(since)
        parameters = [
            _scalar("project", "STRING", self._project),
            _scalar("zone", "STRING", zone),
            _scalar("since", "TIMESTAMP", start.isoformat()),
            {
                "name": "resources",
                "parameterType": {"type": "ARRAY", "arrayType": {"type": "STRING"}},
                "parameterValue": {"arrayValues": [{"value": r} for r in resources]},
            },
        ]
        body = {
            "query": QUERY.format(table=self._table),
            "useLegacySql": False,
            "parameterMode": "NAMED",
            "queryParameters": parameters,
            "timeoutMs": QUERY_TIMEOUT_MS,
            "formatOptions": {"useInt64Timestamp": True},
        }
        jobs = f"{self._bigquery_url}/projects/{self._project}/queries"
        amount, through = Decimal(0), start
        for row in self._rows(jobs, body):
            currency, cost, end = row
            if currency != "USD":
                raise http.error(
                    f"billing export is in {currency}, not USD: the governor counts dollars",
                    False,
                )
            try:
                amount += Decimal(str(cost))
                through = max(through, datetime.fromtimestamp(int(end) / 1_000_000, UTC))
            except (InvalidOperation, TypeError, ValueError):
                raise http.error(f"answered a malformed billing row: {row!r:.200}", True) from None
        return Billed(amount, min(through, now), since=start)

    def _rows(self, jobs: str, body: dict[str, Any]) -> list[list[Any]]:
        """Every row of a query's result as a list of cell values: jobs.query, then
        getQueryResults while the job runs and for every further page."""
        http = self._http()
        answer = _answer(http, http.request("POST", jobs, json=body))
        rows: list[list[Any]] = []
        polls = 0
        while True:
            if answer.get("jobComplete") is True:
                rows += [_cells(http, r) for r in answer.get("rows") or []]
                token = answer.get("pageToken")
                if not token:
                    return rows
                params = {"pageToken": str(token)}
            else:
                polls += 1
                if polls > MAX_POLLS:
                    raise http.error("billing query is still running; asking again later", True)
                params = {}
            job = answer.get("jobReference") or {}
            if not isinstance(job, dict) or not job.get("jobId"):
                raise http.error(f"answered a query without a job: {answer!r:.200}", True)
            params |= {
                "timeoutMs": str(QUERY_TIMEOUT_MS),
                "formatOptions.useInt64Timestamp": "true",
            }
            if job.get("location"):
                params["location"] = str(job["location"])
            answer = _answer(http, http.request("GET", f"{jobs}/{job['jobId']}", params=params))


def _hour_up(instant: datetime) -> datetime:
    """The first whole hour at or after `instant`: export rows run hour by hour at most."""
    hour = instant.replace(minute=0, second=0, microsecond=0)
    return hour if hour == instant else hour + timedelta(hours=1)


def _scalar(name: str, kind: str, value: str) -> dict[str, Any]:
    return {"name": name, "parameterType": {"type": kind}, "parameterValue": {"value": value}}


def _answer(http: ProviderHttp, answer: Any) -> dict[str, Any]:
    if not isinstance(answer, dict):
        raise http.error(f"answered {answer!r:.200}, not a query response", True)
    return answer


def _cells(http: ProviderHttp, row: Any) -> list[Any]:
    """A result row's values: BigQuery's `{"f": [{"v": value}, ...]}`."""
    cells = row.get("f") if isinstance(row, dict) else None
    if not isinstance(cells, list) or not all(isinstance(c, dict) for c in cells):
        raise http.error(f"answered a malformed result row: {row!r:.200}", True)
    return [c.get("v") for c in cells]
