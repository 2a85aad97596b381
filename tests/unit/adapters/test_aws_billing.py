"""The AWS adapter's bill from Cost Explorer, against the fake Cost Explorer over real HTTP:
every request costs money, so an instance is asked again only once a day (or
GOVERNOR_AWS_BILLING_MIN_INTERVAL_S) more has settled past the bill already booked, which
the governor keeps with the pod, so a restart does not ask again; a bill in another
currency is refused."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path

import boto3
import pytest
from botocore.exceptions import ClientError

from governor.adapters.providers.aws_billing import BilledEc2Provider
from governor.domain.ports import Billed, ProviderError
from governor.fakes.aws import FakeEc2
from governor.fakes.cost_explorer import CostExplorer
from governor.fakes.http_cloud import running
from tests.clock import FrozenClock
from tests.fake_clouds import Served

KEY_ID = "AKIAUNITTESTKEYID0001"
SECRET = "wJalrUNITTEST/SECRET+ACCESSKEY0123456789"
INSTANCE = "i-0123456789abcdef0"
DAY = 86400.0
SESSION = boto3.session.Session()  # shared, so the API models are loaded once

Adapter = Callable[..., BilledEc2Provider]


@pytest.fixture
def clock() -> FrozenClock:
    return FrozenClock()  # noon: the day of registration is never billed, only whole days


@pytest.fixture
def cloud(tmp_path: Path, clock: FrozenClock) -> Iterator[Served[FakeEc2]]:
    fake = FakeEc2(tmp_path / "ec2.json", SECRET, access_key_id=KEY_ID)
    fake.clock = clock.now
    fake.explore_costs()
    fake.add_instance(INSTANCE, "1.006", volumes={})  # the day billed: 24 h at its rate
    with running(fake) as server:
        yield Served(fake, server.url)


@pytest.fixture
def costs(cloud: Served[FakeEc2]) -> tuple[CostExplorer, Adapter]:
    def adapter(**options: float) -> BilledEc2Provider:
        made = BilledEc2Provider.connect(
            "us-east-1",
            endpoint_url=cloud.url,
            cost_explorer_url=cloud.url,
            access_key_id=KEY_ID,
            secret_access_key=SECRET,
            timeout_s=10.0,
            session=SESSION,
            **options,
        )
        assert isinstance(made, BilledEc2Provider)
        return made

    assert cloud.fake.costs is not None
    return cloud.fake.costs, adapter


def read(
    adapter: BilledEc2Provider, clock: FrozenClock, registered: datetime, booked: Billed | None
) -> Billed | None:
    """What the adapter answers, given the bill the governor booked before (if any)."""
    return adapter.billed_since(INSTANCE, registered, clock.now(), booked and booked.through)


def test_an_instance_is_asked_once_a_day_even_across_a_restart(
    costs: tuple[CostExplorer, Adapter], clock: FrozenClock
) -> None:
    explorer, adapter = costs
    ce, registered = adapter(), clock.now()
    clock.advance(2 * DAY)  # the first whole day has ended, but not settled for a day yet
    assert read(ce, clock, registered, None) is None
    assert explorer.calls == 0
    clock.advance(DAY)
    booked = read(ce, clock, registered, None)
    assert booked is not None and booked.amount_usd == Decimal("1.006") * 24
    assert explorer.calls == 1
    for _ in range(2):  # six hours later, and again: no other day has settled
        clock.advance(DAY / 4 - 30)
        assert read(ce, clock, registered, booked) is None
    assert read(adapter(), clock, registered, booked) is None  # a restarted governor
    assert explorer.calls == 1
    clock.advance(60)  # another day has settled
    again = read(adapter(), clock, registered, booked)
    assert again is not None and again.through == booked.through + timedelta(days=1)
    assert explorer.calls == 2


def test_a_longer_interval_asks_less_often(
    costs: tuple[CostExplorer, Adapter], clock: FrozenClock
) -> None:
    explorer, adapter = costs
    ce, registered = adapter(min_interval_s=2 * DAY), clock.now()
    clock.advance(3 * DAY)
    booked = read(ce, clock, registered, None)
    assert booked is not None and explorer.calls == 1
    clock.advance(DAY)
    assert read(ce, clock, registered, booked) is None
    clock.advance(DAY)
    assert read(ce, clock, registered, booked) is not None
    assert explorer.calls == 2


def test_a_bill_in_another_currency_is_refused(
    costs: tuple[CostExplorer, Adapter], clock: FrozenClock
) -> None:
    explorer, adapter = costs
    explorer.unit = "EUR"
    registered = clock.now()
    clock.advance(3 * DAY)
    with pytest.raises(ProviderError, match="bills in EUR, not USD") as caught:
        read(adapter(), clock, registered, None)
    assert not caught.value.retryable


def test_an_old_registration_is_read_from_within_cost_explorers_14_days(
    costs: tuple[CostExplorer, Adapter], clock: FrozenClock
) -> None:
    """The model: "The range must be within the last 14 days (the start date cannot be
    earlier than 14 days ago)"; the adapter keeps a day clear of that edge."""
    explorer, adapter = costs
    registered = clock.now() - timedelta(days=30)
    booked = read(adapter(), clock, registered, None)
    today = clock.now().replace(hour=0, minute=0, second=0, microsecond=0)
    assert booked is not None and booked.since == today - timedelta(days=13)
    assert booked.through == today - timedelta(days=1)  # yesterday has not settled yet
    assert booked.amount_usd == Decimal(0)  # the fake's instance was created at noon today
    assert explorer.calls == 1


@pytest.mark.parametrize(
    ("answer", "code", "retryable"),
    [
        ("429", "LimitExceededException", True),  # the operation's own "too many calls"
        ("500", "InternalFailure", True),
        ("status:503", "ServiceUnavailable", True),
        ("ce:DataUnavailableException", "DataUnavailableException", False),
        ("ce:BillExpirationException", "BillExpirationException", False),
    ],
)
def test_cost_explorers_failures_come_in_its_own_shape_and_are_classed(
    cloud: Served[FakeEc2],
    costs: tuple[CostExplorer, Adapter],
    clock: FrozenClock,
    answer: str,
    code: str,
    retryable: bool,
) -> None:
    """The fake EC2 answers Cost Explorer's requests, canned failures included, in Cost
    Explorer's JSON error shape, which botocore reads to the error code."""
    _, adapter = costs
    registered = clock.now()
    clock.advance(3 * DAY)
    cloud.answer_next("", answer)  # the instance is read from EC2, then the bill fails
    with pytest.raises(ProviderError, match=code) as caught:
        read(adapter(), clock, registered, None)
    assert caught.value.retryable is retryable
    assert read(adapter(), clock, registered, None) is not None  # the next read goes through


def test_a_refused_key_is_refused_in_cost_explorers_words(
    cloud: Served[FakeEc2], clock: FrozenClock
) -> None:
    ce = SESSION.client(
        "ce",
        region_name="us-east-1",
        endpoint_url=cloud.url,
        aws_access_key_id=KEY_ID,
        aws_secret_access_key="not-the-secret",
    )
    period = {"Start": clock.now().date().isoformat(), "End": "2099-01-01"}
    dimension = {"Key": "RESOURCE_ID", "Values": [INSTANCE]}
    with pytest.raises(ClientError) as refused:
        ce.get_cost_and_usage_with_resources(
            TimePeriod=period, Granularity="DAILY", Filter={"Dimensions": dimension}
        )
    assert refused.value.response["Error"]["Code"] == "InvalidClientTokenId"
    assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403
