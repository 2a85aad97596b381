"""AWS's own example answers replayed through the EC2 adapter: the examples that botocore
ships with EC2's service model (botocore/data/ec2/2016-11-15/examples-1.json, read from the
installed botocore: 1.44.18 when this was written), for the operations the adapter sends.
botocore's Stubber answers each call with the example's output after checking it, and the
adapter's request, against the model. The file's DescribeInstances examples carry no output,
so the instance each replay starts from is the example's instance as the model shapes it.
"""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import boto3
import pytest
from botocore.loaders import Loader
from botocore.stub import Stubber

from governor.adapters.providers.aws import Ec2Provider
from governor.domain.model import PodState
from governor.domain.ports import CallOutcome

EXAMPLES = Loader().load_service_model("ec2", "examples-1", "2016-11-15")["examples"]
CLIENT = boto3.session.Session().client(
    "ec2", region_name="us-east-1", aws_access_key_id="AKIAEXAMPLES", aws_secret_access_key="x"
)


def example(operation: str, title: str) -> dict[str, Any]:
    [found] = [e for e in EXAMPLES[operation] if e["title"] == title]
    return found


STOP = example("StopInstances", "To stop a running EC2 instance")
START = example("StartInstances", "To start a stopped EC2 instance")
VOLUMES = example("DescribeVolumes", "To describe all volumes")
[REF] = STOP["input"]["InstanceIds"]


def instance(state: str, code: int, volumes: tuple[str, ...] = ()) -> dict[str, Any]:
    """DescribeInstances' answer for the examples' instance."""
    mappings = [{"DeviceName": "/dev/sda1", "Ebs": {"VolumeId": v}} for v in volumes]
    described = {
        "InstanceId": REF,
        "InstanceType": "t2.micro",
        "State": {"Code": code, "Name": state},
        "RootDeviceType": "ebs",
        "BlockDeviceMappings": mappings,
    }
    return {"Reservations": [{"Instances": [described]}]}


@pytest.fixture
def stub() -> Iterator[Stubber]:
    with Stubber(CLIENT) as stubber:
        yield stubber
        stubber.assert_no_pending_responses()


@pytest.fixture
def ec2() -> Ec2Provider:
    return Ec2Provider(CLIENT, rates={"t2.micro": Decimal("0.0116")})


def test_the_stop_example_is_a_stop_in_progress(stub: Stubber, ec2: Ec2Provider) -> None:
    stub.add_response("describe_instances", instance("running", 16), {"InstanceIds": [REF]})
    stub.add_response("stop_instances", STOP["output"], STOP["input"])
    result = ec2.stop(REF)
    assert result.outcome is CallOutcome.PENDING and result.detail.endswith("stopping")


def test_the_start_example_is_a_start_accepted(stub: Stubber, ec2: Ec2Provider) -> None:
    stub.add_response("describe_instances", instance("stopped", 80), {"InstanceIds": [REF]})
    stub.add_response("start_instances", START["output"], START["input"])
    result = ec2.resume(REF)
    assert result.outcome is CallOutcome.DONE and result.detail.endswith("pending")


def test_the_volumes_example_is_the_instances_ebs_storage(stub: Stubber, ec2: Ec2Provider) -> None:
    [volume] = VOLUMES["output"]["Volumes"]
    assert volume["Attachments"][0]["InstanceId"] == REF
    running = instance("running", 16, (volume["VolumeId"],))
    stub.add_response("describe_instances", running, {"InstanceIds": [REF]})
    stub.add_response("describe_volumes", VOLUMES["output"], {"VolumeIds": [volume["VolumeId"]]})
    pod = ec2.describe(REF)
    assert pod.state is PodState.RUNNING and pod.hourly_rate_usd == Decimal("0.0116")
    assert pod.storage is not None and pod.storage.gb == Decimal(volume["Size"])
