from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from decimal import Decimal
from pathlib import Path

import boto3
import httpx

from governor.adapters.providers.aws import Ec2Provider
from governor.adapters.providers.aws_billing import BilledEc2Provider
from governor.fakes.aws import FAKE_ACCESS_KEY_ID, FakeEc2
from governor.fakes.http_cloud import FakeCloud
from tests.contract.aws_models import watch
from tests.contract.harness import BillingHarness
from tests.fake_clouds import Served

# shared, so EC2's API model is loaded once; every exchange held to AWS's service models
SESSION = watch(boto3.session.Session())


class AwsHarness(BillingHarness):
    name = "aws"
    running = "i-0123456789abcdef0"
    missing = "i-0000000000000404f"
    retry_after_honoured = False  # EC2 throttles with 503 RequestLimitExceeded, no Retry-After
    no_capacity_says = "InsufficientInstanceCapacity"
    # EC2 API reference, "Error codes": RequestLimitExceeded (retry with exponential
    # backoff), the server errors InternalError and Unavailable; UnsupportedOperation (its
    # words for a one-time Spot request's instance) and UnauthorizedOperation are final.
    transient_stop_failures = (
        "ec2:RequestLimitExceeded",
        "ec2:InternalError",
        "ec2:Unavailable",
        "status:503",
    )
    stop_refusals = (
        "ec2:UnsupportedOperation:You can't stop the Spot Instance 'i-0123456789abcdef0' "
        "because it is associated with a one-time Spot Instance request.",
        "ec2:UnauthorizedOperation:You are not authorized to perform this operation.",
    )

    def cloud(self, state_file: Path, secret: str) -> FakeEc2:
        fake = FakeEc2(state_file, secret)
        fake.add_instance(self.running, "3.06", instance_type="p3.2xlarge")  # EBS only
        return fake

    def labelled(self, cloud: FakeCloud, labels: dict[str, str]) -> str:
        assert isinstance(cloud, FakeEc2)
        cloud.add_instance("i-0abc0000000000777", "3.06", instance_type="p3.2xlarge", tags=labels)
        return "i-0abc0000000000777"

    def adapter(self, cloud: Served[FakeCloud], secret: str, client: httpx.Client) -> Ec2Provider:
        """boto3 brings its own HTTP client: only the suite's timeout is taken from `client`,
        and `cloud` shortens it for the requests the fake holds, as for `client`."""
        adapter = Ec2Provider.connect(
            "us-east-1",
            endpoint_url=cloud.url,
            access_key_id=FAKE_ACCESS_KEY_ID,
            secret_access_key=secret,
            timeout_s=client.timeout.read or 10.0,
            session=SESSION,
            rates={"p3.2xlarge": Decimal("3.06")},
            stop_latency_s=0.0,
        )
        return cloud.ec2(adapter)

    tick_s = 3600.0  # Cost Explorer bills day by day
    settled_after_s = 3 * 86400.0  # a whole day after registration, settled a day later

    def billed_cloud(
        self,
        state_file: Path,
        secret: str,
        clock: Callable[[], datetime],
        factor: str,
        lag_s: float,
    ) -> FakeEc2:
        fake = FakeEc2(state_file, secret)
        fake.clock = clock
        fake.explore_costs(factor, lag_s)
        fake.add_instance(self.running, "3.06", instance_type="p3.2xlarge")  # EBS only
        return fake

    def billed_adapter(self, url: str, secret: str, client: httpx.Client) -> Ec2Provider:
        return BilledEc2Provider.connect(
            "us-east-1",
            endpoint_url=url,
            cost_explorer_url=url,
            access_key_id=FAKE_ACCESS_KEY_ID,
            secret_access_key=secret,
            timeout_s=client.timeout.read or 10.0,
            session=SESSION,
            rates={"p3.2xlarge": Decimal("3.06")},
            stop_latency_s=0.0,
        )

    def stopped(self, cloud: FakeCloud, ref: str) -> bool:
        assert isinstance(cloud, FakeEc2)
        return cloud.state.instances[ref].state == "stopped"

    def billing(self, cloud: FakeCloud, ref: str) -> bool:
        assert isinstance(cloud, FakeEc2)
        return cloud.state.instances[ref].state in ("pending", "running")

    def destructive_calls(self, cloud: FakeCloud) -> list[str]:
        assert isinstance(cloud, FakeEc2)
        return [a for a in cloud.state.action_names() if a == "TerminateInstances"]


HARNESS = AwsHarness()
