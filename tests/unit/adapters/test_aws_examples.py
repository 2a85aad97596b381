"""AWS's own example answers replayed through the EC2 adapter: the examples that botocore
ships with EC2's service model (botocore/data/ec2/2016-11-15/examples-1.json, read from the
installed botocore: 1.44.18 when this was written), for the operations the adapter sends,
each named by its id in that file.

The examples are botocore's parsed form of each answer (the output shape as a dict), which
is exactly what the adapter receives from botocore's parser; so botocore's Stubber answers
each call with the example's output, after checking it, and the adapter's request, against
the model. Turning them back into EC2's XML first would take an XML writer of our own
(botocore serialises requests, never answers), and the replay would then test that writer
against botocore's parser rather than the adapter against AWS's answers; the fake's XML is
held to the model separately (tests/contract/aws_models.py). The file's DescribeInstances
examples carry no output, so the instance each replay starts from is the example's instance
as the model shapes it. Not replayed: TerminateInstances, which the adapter never sends, and
Cost Explorer, whose examples-1.json has no example of GetCostAndUsageWithResources.
"""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import boto3
import pytest
from botocore.loaders import Loader
from botocore.stub import Stubber

from governor.adapters.providers.aws import ONE_TIME_SPOT, Ec2Provider
from governor.domain.model import PodState
from governor.domain.ports import CallOutcome

EXAMPLES = Loader().load_service_model("ec2", "examples-1", "2016-11-15")["examples"]
CLIENT = boto3.session.Session().client(
    "ec2", region_name="us-east-1", aws_access_key_id="AKIAEXAMPLES", aws_secret_access_key="x"
)


def example(operation: str, id_: str) -> dict[str, Any]:
    """The example of `operation` with the id `id_` in the installed botocore's file."""
    [found] = [e for e in EXAMPLES[operation] if e["id"] == id_]
    return found


STOP = example("StopInstances", "to-stop-a-running-ec2-instance-1529358905540")
START = example("StartInstances", "to-start-a-stopped-ec2-instance-1529358792730")
VOLUMES = example("DescribeVolumes", "to-describe-all-volumes-1472506358883")
SPOT = example("DescribeSpotInstanceRequests", "ec2-describe-spot-instance-requests-1")
[REF] = STOP["input"]["InstanceIds"]


def instance(state: str, code: int, volumes: tuple[str, ...] = (), **more: Any) -> dict[str, Any]:
    """DescribeInstances' answer for the examples' instance, with `more` members."""
    mappings = [{"DeviceName": "/dev/sda1", "Ebs": {"VolumeId": v}} for v in volumes]
    described = {
        "InstanceId": REF,
        "InstanceType": "t2.micro",
        "State": {"Code": code, "Name": state},
        "RootDeviceType": "ebs",
        "BlockDeviceMappings": mappings,
        **more,
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


def test_the_spot_request_example_is_a_one_time_request_never_stopped(
    stub: Stubber, ec2: Ec2Provider
) -> None:
    """The example's request is one-time, for the examples' instance: EC2 refuses to stop
    such an instance, so the adapter says it cannot be stopped keeping its workspace and never
    sends StopInstances (the Stubber fails on a call it was not given an answer for)."""
    [request] = SPOT["output"]["SpotInstanceRequests"]
    assert (request["InstanceId"], request["Type"]) == (REF, "one-time")
    spot = {"InstanceLifecycle": "spot", "SpotInstanceRequestId": request["SpotInstanceRequestId"]}

    def described() -> None:
        stub.add_response(
            "describe_instances", instance("running", 16, **spot), {"InstanceIds": [REF]}
        )
        stub.add_response("describe_spot_instance_requests", SPOT["output"], SPOT["input"])

    described()
    # not an example: the examples' type, t2.micro, has no instance store (its whole answer
    # is checked against the model by the Stubber)
    stub.add_response(
        "describe_instance_types",
        {"InstanceTypes": [{"InstanceType": "t2.micro", "InstanceStorageSupported": False}]},
        {"InstanceTypes": ["t2.micro"]},
    )
    described()  # asked to stop: read again
    assert ec2.describe(REF).cannot_preserve == ONE_TIME_SPOT
    refused = ec2.stop(REF)
    assert refused.outcome is CallOutcome.PERMANENT and ONE_TIME_SPOT in refused.detail
