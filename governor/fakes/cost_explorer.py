"""A fake AWS Cost Explorer, served by the fake EC2: `GetCostAndUsageWithResources` over the
JSON 1.1 protocol (POST / with `X-Amz-Target: AWSInsightsIndexService.<Operation>`),
signed with the same keys.

Each day of the asked period (Start inclusive, End exclusive) is one ResultsByTime entry
whose UnblendedCost is what the resources named by the RESOURCE_ID filter billed that day:
an instance its rate for every second it ran, an EBS volume its GB-month price for every
hour since its instance was created, times `factor` (a rate wrong somewhere) and only for
usage `lag_s` old or older, as Cost Explorer lags, in the account's `unit` (USD unless a
test bills it in another currency). It refuses, with Cost Explorer's ValidationException,
what the operation's model says it refuses in words (RULES, quoted from botocore's ce
2017-10-25 model, which its own validator cannot check): a Start more than 14 days ago, or
neither a filter nor a grouping by RESOURCE_ID; besides, the fake answers DAILY
UnblendedCost filtered by RESOURCE_ID only.
Days come `page_size` to a page, each page but the last with a NextPageToken; every call
is counted, since every real one costs $0.01.

Its failures are Cost Explorer's, in the JSON protocol's `{"__type", "Message"}` (the fake EC2
answers Cost Explorer's requests with these, its canned answers included): too many requests
is the operation's LimitExceededException (HTTP 400, no Retry-After), other errors AWS's
common ones (InvalidClientTokenId, InternalFailure, ServiceUnavailable, ValidationError), and
the canned "ce:<Code>" or "ce:<Code>:<message>" answers with one of the operation's own
errors (its model's `errors`: DataUnavailableException, BillExpirationException...).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from typing import Any

from governor.domain.money import HOURS_PER_MONTH
from governor.fakes.http_cloud import Reply, bill, bill_runs

OPERATION = "AWSInsightsIndexService.GetCostAndUsageWithResources"
JSON = "application/x-amz-json-1.1"
EBS_PRICE = Decimal("0.08")  # gp3's list price per GB-month, the fake's price sheet
RETENTION_DAYS = 14
# GetCostAndUsageWithResources' rules in its model's words: TimePeriod's and Filter's docs.
WINDOW_RULE = (
    "The range must be within the last 14 days (the start date cannot be earlier than 14 days ago)."
)
RESOURCE_RULE = (
    "The <code>GetCostAndUsageWithResources</code> operation requires that you either "
    "group by or filter by a <code>ResourceId</code>."
)
RULES = {"TimePeriod": WINDOW_RULE, "Filter": RESOURCE_RULE}
# The operation's error for too many calls, in its model's words.
TOO_MANY_CALLS = "You made too many calls in a short period of time. Try again later."
# AWS's common errors (the Cost Explorer API reference's "Common Errors") by HTTP status;
# a request refused for its key is answered InvalidClientTokenId's 403.
COMMON_ERRORS = {401: "InvalidClientTokenId", 500: "InternalFailure", 503: "ServiceUnavailable"}
STATUSES = {"InvalidClientTokenId": 403, "InternalFailure": 500, "ServiceUnavailable": 503}


def broken_rule(request: Mapping[str, Any], today: date) -> str | None:
    """The rule of RULES that `request` (GetCostAndUsageWithResources' parameters, as sent)
    breaks on `today` (UTC), if any."""
    start = date.fromisoformat(request["TimePeriod"]["Start"])
    if start < today - timedelta(days=RETENTION_DAYS):
        return WINDOW_RULE
    keys = {
        *_dimension_keys(request.get("Filter") or {}),
        *(g.get("Key") for g in request.get("GroupBy") or [] if g.get("Type") == "DIMENSION"),
    }
    return None if "RESOURCE_ID" in keys else RESOURCE_RULE


def _dimension_keys(expression: Mapping[str, Any]) -> list[str]:
    """The dimensions an Expression filters by, through its And, Or and Not."""
    keys = [expression["Dimensions"]["Key"]] if "Dimensions" in expression else []
    nested = [*expression.get("And", []), *expression.get("Or", [])]
    if "Not" in expression:
        nested.append(expression["Not"])
    return keys + [k for e in nested for k in _dimension_keys(e)]


class Refused(Exception):
    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


@dataclass
class CostExplorer:
    factor: Decimal = Decimal(1)
    lag_s: float = 0.0
    page_size: int = 31
    unit: str = "USD"  # the currency the account is billed in
    calls: int = 0

    def answer(self, target: str, body: Any, instances: Mapping[str, Any], now: datetime) -> Reply:
        """The answer to one Cost Explorer request; `instances` are the fake EC2's."""
        self.calls += 1
        try:
            if target != OPERATION:
                raise Refused("UnknownOperationException", f"{target} is not supported")
            return Reply(200, self._costs(body, instances, now), content_type=JSON)
        except (Refused, KeyError, TypeError, ValueError) as exc:
            return refusal(
                exc.kind if isinstance(exc, Refused) else "ValidationException", str(exc)
            )

    def error(self, status: int, message: str) -> Reply:
        code = COMMON_ERRORS.get(status, "InternalFailure" if status >= 500 else "ValidationError")
        return refusal(code, message, status if status != 401 else None)

    def rate_limited(self, retry_after: str) -> Reply:
        """Cost Explorer refuses too many calls with LimitExceededException, no Retry-After."""
        return refusal("LimitExceededException", TOO_MANY_CALLS)

    def canned(self, kind: str, arg: str) -> Reply | None:
        if kind != "ce":
            return None
        code, _, message = arg.partition(":")
        return refusal(code, message or f"canned {code}")

    def _costs(self, body: Any, instances: Mapping[str, Any], now: datetime) -> dict[str, Any]:
        if broken := broken_rule(body, now.astimezone(UTC).date()):
            raise Refused("ValidationException", broken)
        start = date.fromisoformat(body["TimePeriod"]["Start"])
        end = date.fromisoformat(body["TimePeriod"]["End"])
        if start >= end:
            raise Refused("ValidationException", "Start date should be before end date")
        if body.get("Granularity") != "DAILY" or body.get("Metrics") != ["UnblendedCost"]:
            raise Refused("ValidationException", "the fake answers DAILY UnblendedCost only")
        dimension = body["Filter"]["Dimensions"]
        if dimension["Key"] != "RESOURCE_ID":
            raise Refused("ValidationException", "the fake filters by RESOURCE_ID only")
        wanted = set(dimension["Values"])
        cutoff = now - timedelta(seconds=self.lag_s)
        days = [start + timedelta(days=n) for n in range((end - start).days)]
        offset = int(body.get("NextPageToken") or 0)
        page = days[offset : offset + self.page_size]
        results = [
            {
                "TimePeriod": {"Start": d.isoformat(), "End": (d + timedelta(days=1)).isoformat()},
                "Total": {
                    "UnblendedCost": {
                        "Amount": str(self._day(d, wanted, instances, cutoff)),
                        "Unit": self.unit,
                    }
                },
                "Groups": [],
                "Estimated": True,
            }
            for d in page
        ]
        more = offset + self.page_size < len(days)
        return {
            "ResultsByTime": results,
            "DimensionValueAttributes": [],
            **({"NextPageToken": str(offset + self.page_size)} if more else {}),
        }

    def _day(
        self, day: date, wanted: set[str], instances: Mapping[str, Any], cutoff: datetime
    ) -> Decimal:
        since = datetime.combine(day, time(0), UTC)
        until = min(since + timedelta(days=1), cutoff)
        if until <= since:
            return Decimal(0)
        total = Decimal(0)
        for instance in instances.values():
            runs = [*instance.earlier_runs, [instance.started_at, instance.stop_requested_at]]
            if instance.id in wanted:
                total += bill_runs(Decimal(instance.hourly_rate_usd), runs, until, since)
            for volume, gib in instance.volumes.items():
                if volume in wanted:
                    hourly = EBS_PRICE * gib / HOURS_PER_MONTH
                    total += bill(hourly, str(runs[0][0]), None, until, since)
        return total * self.factor


def refusal(code: str, message: str, status: int | None = None) -> Reply:
    """Cost Explorer's error `code` (HTTP `status`, else the code's own: 400 unless it is a
    common error of another) in the JSON protocol's shape."""
    error = {"__type": f"com.amazonaws.ce#{code}", "Message": message}
    return Reply(status or STATUSES.get(code, 400), error, content_type=JSON)
