"""The AWS adapters and fakes held to botocore's service models (tests/contract/aws_models.py
watches every exchange of the contract suite's AWS harness): a request outside its model,
or a fake's answer outside its model, fails the test that made it; every operation the
adapters send is checked; and Cost Explorer's rules that its model states only in words
are the model's words, enforced by the fake with Cost Explorer's own error code."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import boto3
import botocore.session
import pytest
from botocore.client import BaseClient
from botocore.exceptions import ClientError

from governor.adapters.providers.aws_billing import BilledEc2Provider
from governor.domain.ports import CallOutcome
from governor.fakes.aws import FAKE_ACCESS_KEY_ID, CloudInstance, FakeEc2
from governor.fakes.cost_explorer import RESOURCE_RULE, RULES, WINDOW_RULE, broken_rule
from governor.fakes.http_cloud import running
from tests.clock import FrozenClock
from tests.contract.aws_models import CHECKED, answer_problems, watch

SECRET = "conformance-secret-access-key"
RUNNING = "i-0123456789abcdef0"
ONE_TIME = "i-0aaaaaaaaaaaaaaa1"
PERSISTENT = "i-0bbbbbbbbbbbbbbb2"
KEPT = f"vol-{ONE_TIME[2:]}"  # its root volume, not deleted on termination
MODELS = botocore.session.get_session()
CE = MODELS.get_service_model("ce")
COSTS = CE.operation_model("GetCostAndUsageWithResources")


@dataclass
class Cloud:
    fake: FakeEc2
    url: str
    clock: FrozenClock

    def client(self, service: str) -> BaseClient:
        """A watched boto3 client of the fake."""
        return watch(boto3.session.Session()).client(
            service,
            region_name="us-east-1",
            endpoint_url=self.url,
            aws_access_key_id=FAKE_ACCESS_KEY_ID,
            aws_secret_access_key=SECRET,
        )


@pytest.fixture
def cloud(tmp_path: Path) -> Iterator[Cloud]:
    clock = FrozenClock()
    fake = FakeEc2(tmp_path / "ec2.json", SECRET)
    fake.clock = clock.now
    fake.explore_costs()
    fake.add_instance(RUNNING, "1.006")
    fake.add_instance(ONE_TIME, "0.40", lifecycle="spot", spot_type="one-time", kept=[KEPT])
    fake.add_instance(PERSISTENT, "0.40", lifecycle="spot", spot_type="persistent")
    with running(fake) as server:
        yield Cloud(fake, server.url, clock)


def test_a_request_outside_the_model_fails_the_test_that_sent_it(cloud: Cloud) -> None:
    ec2 = cloud.client("ec2")
    with pytest.raises(AssertionError, match="StopInstances sent outside its model"):
        ec2.stop_instances(InstanceIds=RUNNING)  # a string where the model has a list
    with pytest.raises(AssertionError, match='Unknown parameter in input: "Preserve"'):
        ec2.stop_instances(InstanceIds=[RUNNING], Preserve=True)
    ce = cloud.client("ce")
    period = {"Start": "2026-01-01", "End": "2026-01-02"}
    with pytest.raises(AssertionError, match='Missing required parameter in input: "Filter"'):
        ce.get_cost_and_usage_with_resources(TimePeriod=period, Granularity="DAILY")
    assert cloud.fake.state.action_names() == []  # none of them went out


def with_instance(monkeypatch: pytest.MonkeyPatch, **changes: Any) -> None:
    """The fake's instances answered with `changes` to their XML."""
    xml = CloudInstance.xml
    monkeypatch.setattr(CloudInstance, "xml", lambda self: {**xml(self), **changes})


@pytest.mark.parametrize(
    ("changes", "caught"),
    [
        ({"instanceState": {"code": "96", "name": "hibernating"}}, "'hibernating' is not one"),
        ({"instanceState": {"code": "sixteen", "name": "running"}}, "'sixteen' is no integer"),
        ({"gpuCount": "1"}, "gpuCount is no member of Instance"),
        ({"ebsOptimized": "yes"}, "'yes' is no boolean"),
        ({"blockDeviceMapping": {"entry": {"deviceName": "/dev/sda1"}}}, "<entry> where a list"),
        ({"instanceType": {"size": "xlarge"}}, "elements where InstanceType is a string"),
    ],
)
def test_a_fake_answer_outside_the_model_fails_the_test_that_received_it(
    cloud: Cloud, monkeypatch: pytest.MonkeyPatch, changes: dict[str, Any], caught: str
) -> None:
    with_instance(monkeypatch, **changes)
    with pytest.raises(
        AssertionError, match=f"DescribeInstances answered outside its model.*{caught}"
    ):
        cloud.client("ec2").describe_instances(InstanceIds=[RUNNING])


def test_a_cost_explorer_answer_outside_the_model_is_caught() -> None:
    day = {"TimePeriod": {"Start": "2026-01-01", "End": "2026-01-02"}, "Estimated": True}
    good = {
        "ResultsByTime": [{**day, "Total": {"UnblendedCost": {"Amount": "1.5", "Unit": "USD"}}}]
    }
    assert answer_problems(COSTS, json.dumps(good).encode()) == []
    number = {"ResultsByTime": [{**day, "Total": {"UnblendedCost": {"Amount": 1.5}}}]}
    assert answer_problems(COSTS, json.dumps(number).encode()) == [
        "GetCostAndUsageWithResources.ResultsByTime[0].Total[UnblendedCost].Amount: "
        "1.5 is no string (MetricAmount)"
    ]
    unknown = {"ResultsByTime": [], "Currency": "USD"}
    assert answer_problems(COSTS, json.dumps(unknown).encode()) == [
        "GetCostAndUsageWithResources: Currency is no member of "
        "GetCostAndUsageWithResourcesResponse"
    ]


def test_every_operation_the_adapters_send_is_checked_and_conforms(cloud: Cloud) -> None:
    registered = cloud.clock.now() - timedelta(days=30)  # beyond Cost Explorer's 14 days
    before = CHECKED.copy()
    adapter = BilledEc2Provider.connect(
        "us-east-1",
        endpoint_url=cloud.url,
        cost_explorer_url=cloud.url,
        access_key_id=FAKE_ACCESS_KEY_ID,
        secret_access_key=SECRET,
        session=watch(boto3.session.Session()),
        rates={"g5.xlarge": Decimal("1.006")},
    )
    assert adapter.describe(ONE_TIME).cannot_preserve is not None
    assert {pod.ref for pod in adapter.pods()} == {RUNNING, ONE_TIME, PERSISTENT}
    assert adapter.stop(RUNNING).outcome is CallOutcome.DONE
    assert adapter.resume(RUNNING).outcome is CallOutcome.DONE
    assert adapter.terminate(ONE_TIME, keep=KEPT).outcome is CallOutcome.DONE
    assert isinstance(adapter, BilledEc2Provider)
    billed = adapter.billed_since(PERSISTENT, registered, cloud.clock.now(), None)
    assert billed is not None and billed.since is not None
    assert cloud.clock.now() - billed.since < timedelta(days=14)
    assert set((CHECKED - before).keys()) == {
        "DescribeInstances",
        "DescribeVolumes",
        "DescribeSpotInstanceRequests",
        "DescribeInstanceTypes",
        "StopInstances",
        "StartInstances",
        "TerminateInstances",
        "GetCostAndUsageWithResources",
    }


@pytest.mark.parametrize("member", sorted(RULES))
def test_the_rules_the_fake_enforces_are_the_models_words(member: str) -> None:
    assert RULES[member] in COSTS.input_shape.members[member].documentation


def resource_request(start: str, **rest: Any) -> dict[str, Any]:
    return {
        "TimePeriod": {"Start": start, "End": "2026-01-01"},
        "Granularity": "DAILY",
        "Metrics": ["UnblendedCost"],
        **rest,
    }


BY_RESOURCE = {"Dimensions": {"Key": "RESOURCE_ID", "Values": [RUNNING]}}
BY_SERVICE = {
    "Dimensions": {"Key": "SERVICE", "Values": ["Amazon Elastic Compute Cloud - Compute"]}
}


@pytest.mark.parametrize(
    ("request_", "broken"),
    [
        (resource_request("2025-12-18", Filter=BY_RESOURCE), None),  # 14 days before
        (resource_request("2025-12-17", Filter=BY_RESOURCE), WINDOW_RULE),
        (resource_request("2025-12-25", Filter=BY_SERVICE), RESOURCE_RULE),
        (resource_request("2025-12-25", Filter={"And": [BY_SERVICE, BY_RESOURCE]}), None),
        (
            resource_request(
                "2025-12-25",
                Filter=BY_SERVICE,
                GroupBy=[{"Type": "DIMENSION", "Key": "RESOURCE_ID"}],
            ),
            None,
        ),
    ],
)
def test_the_rules_in_words_are_checked(request_: dict[str, Any], broken: str | None) -> None:
    assert broken_rule(request_, FrozenClock().now().date()) == broken


@pytest.mark.parametrize(
    ("start", "filter_", "says"),
    [("2025-12-17", BY_RESOURCE, WINDOW_RULE), ("2025-12-25", BY_SERVICE, RESOURCE_RULE)],
)
def test_the_fake_refuses_what_the_model_says_cost_explorer_refuses(
    cloud: Cloud, start: str, filter_: dict[str, Any], says: str
) -> None:
    with pytest.raises(ClientError) as refused:
        cloud.client("ce").get_cost_and_usage_with_resources(
            **resource_request(start, Filter=filter_)
        )
    assert refused.value.response["Error"]["Code"] == "ValidationException"
    assert refused.value.response["Error"]["Message"] == says
