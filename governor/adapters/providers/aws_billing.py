"""AWS bills from Cost Explorer: `GetCostAndUsageWithResources`, daily, UnblendedCost, filtered
by RESOURCE_ID to the instance and its EBS volumes, through boto3 (the aws extra).

Every request costs $0.01 (each page a request). Cost Explorer refreshes a few times a day, so a
day counts only once it ended `settle_s` ago: the bill runs to that midnight (UTC), from the
first midnight after the pod's registration, but never from earlier than 13 days before today:
the operation's model says of its TimePeriod "The range must be within the last 14 days (the
start date cannot be earlier than 14 days ago)", and the day spare keeps clear of that edge
whatever clock Cost Explorer reads it by. The meter is compared over the same days. Settled days
do not change, so an instance is asked again only once its settled days reach `min_interval_s`
(and at least a whole day) past the end of the bill the governor already booked: that end is
kept with the pod in the database, so a restart or another replica does not ask again. The
filter is by RESOURCE_ID, which the model says the operation requires ("requires that you either
group by or filter by a ResourceId"). Resource-level data must be enabled in the account's Cost
Explorer preferences.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal, InvalidOperation
from typing import Any

import boto3
from botocore.client import BaseClient

from governor.adapters.providers.aws import Ec2Provider, _volume_ids, client_config
from governor.domain.ports import Billed

MIN_INTERVAL_S = 86400.0  # at most one paid request a day per instance
SETTLE_S = 24 * 3600.0  # a day's costs are complete a day after it ends
RETENTION_DAYS = 14  # how far back resource-level data reaches
DAY = timedelta(days=1)
EARLIEST_START = (RETENTION_DAYS - 1) * DAY  # before today: within the 14 days, a day spare
COST_EXPLORER_REGION = "us-east-1"  # Cost Explorer's one endpoint


class BilledEc2Provider(Ec2Provider):
    """The EC2 adapter that also reads each instance's bill from Cost Explorer
    (ReportsWindowedBilling), through `cost_explorer`, a boto3 "ce" client."""

    def __init__(
        self,
        client: BaseClient,
        *,
        cost_explorer: BaseClient,
        min_interval_s: float = MIN_INTERVAL_S,
        settle_s: float = SETTLE_S,
        **options: Any,
    ) -> None:
        super().__init__(client, **options)
        self._cost_explorer = cost_explorer
        self._min_interval_s = min_interval_s
        self._settle_s = settle_s

    @classmethod
    def connect(
        cls,
        region: str,
        *,
        endpoint_url: str | None = None,
        access_key_id: str | None = None,
        secret_access_key: str | None = None,
        timeout_s: float = 10.0,
        session: boto3.session.Session | None = None,
        cost_explorer_url: str | None = None,
        **options: Any,
    ) -> Ec2Provider:
        """As Ec2Provider.connect, with a Cost Explorer client from the same session (its
        endpoint is AWS's us-east-1 one unless `cost_explorer_url` says otherwise)."""
        session = session or boto3.session.Session()
        cost_explorer = session.client(
            "ce",
            region_name=COST_EXPLORER_REGION,
            endpoint_url=cost_explorer_url,
            aws_access_key_id=access_key_id,
            aws_secret_access_key=secret_access_key,
            config=client_config(timeout_s),
        )
        return super().connect(
            region,
            endpoint_url=endpoint_url,
            access_key_id=access_key_id,
            secret_access_key=secret_access_key,
            timeout_s=timeout_s,
            session=session,
            cost_explorer=cost_explorer,
            **options,
        )

    def billed_since(
        self, ref: str, since: datetime, now: datetime, read_through: datetime | None
    ) -> Billed | None:
        end = _midnight(now - timedelta(seconds=self._settle_s))
        interval = max(DAY, timedelta(seconds=self._min_interval_s))
        if read_through is not None and end - read_through < interval:
            return None  # too few days settled since the bill already booked
        start = _midnight(since)
        if start < since:  # the day of registration was partly someone else's spend
            start += DAY
        start = max(start, _midnight(now) - EARLIEST_START)
        if start >= end:  # no settled day since registration yet: nothing worth paying for
            return None
        resources = [ref, *_volume_ids(self._instance(ref))]
        params: dict[str, Any] = {
            "TimePeriod": {"Start": start.date().isoformat(), "End": end.date().isoformat()},
            "Granularity": "DAILY",
            "Filter": {"Dimensions": {"Key": "RESOURCE_ID", "Values": resources}},
            "Metrics": ["UnblendedCost"],
        }
        amount = Decimal(0)
        while True:
            answer = self._call(
                "GetCostAndUsageWithResources", via=self._cost_explorer, ref=ref, **params
            )
            for day in answer.get("ResultsByTime") or []:
                amount += self._cost(day)
            if not answer.get("NextPageToken"):
                break
            params["NextPageToken"] = answer["NextPageToken"]
        return Billed(amount, end, since=start)

    def _cost(self, day: Any) -> Decimal:
        """A day's UnblendedCost in dollars; another unit is refused."""
        try:
            cost = day["Total"]["UnblendedCost"]
            if cost.get("Unit", "USD") != "USD":
                raise self._error(f"bills in {cost['Unit']}, not USD", False)
            return Decimal(str(cost["Amount"]))
        except (KeyError, TypeError, AttributeError, InvalidOperation):
            raise self._unreadable("GetCostAndUsageWithResources", repr(day)) from None


def _midnight(instant: datetime) -> datetime:
    """The start of `instant`'s day, UTC."""
    day: date = instant.astimezone(UTC).date()
    return datetime.combine(day, time(0), UTC)
