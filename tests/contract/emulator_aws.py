"""EC2 as moto emulates it, served over real HTTP: moto's ThreadedMotoServer on a free
loopback port, one server per test module. The contract tests that need only a world to act
on (conftest's `subject` and `resumer`) run the EC2 adapter against it beside the project's
own fake, every request the adapter sends and every answer moto gives held to botocore's
models (harness_aws.SESSION).

moto is kept by many hands against EC2's real behaviour, which the project's fake is not; it
cannot do everything a contract test needs, though. CANNOT_EMULATE names what it cannot and
why the project's fake is kept for it (docs/providers.md says the same), and
test_emulator_aws.py proves each claim of the installed moto, so that a claim that stops
holding fails there and its test joins the shared suite.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from decimal import Decimal
from typing import Any

import boto3
from botocore.client import BaseClient
from moto.server import ThreadedMotoServer

from governor.adapters.providers.aws import Ec2Provider
from tests.contract.harness_aws import SESSION

NAME = "aws-moto"
REGION = "us-east-1"
KEY_ID, SECRET = "AKIAMOTOEMULATOR0001", "moto-emulator-secret"
# An Ubuntu image in moto's catalogue: its Windows images answer `platform` as "windows",
# outside the EC2 model's enum ("Windows"), which the watched session would refuse.
IMAGE = "ami-1e749f67"
INSTANCE_TYPE = "g5.xlarge"
RATES = {INSTANCE_TYPE: Decimal("1.006")}
MISSING = "i-0000000000000404f"

# What a contract test needs that moto does not emulate, and so what the project's fake
# (governor.fakes.aws) is kept for.
CANNOT_EMULATE = {
    "failures on demand": (
        "moto cannot be made to answer a chosen request with EC2's throttling (503 "
        "RequestLimitExceeded), a 5xx, an answer held past the client's timeout or a body "
        "that is not XML, nor with a documented error code such as UnsupportedOperation: "
        "the retry classification is proven against the fake, which can"
    ),
    "a refused key": (
        "moto answers requests signed with any key (it checks no signature unless its IAM "
        "emulation is switched on), so a wrong secret is never refused with AuthFailure"
    ),
    "a refusal for want of capacity": (
        "moto starts every stopped instance; it never answers InsufficientInstanceCapacity"
    ),
    "a one-time Spot Instance's stop refused": (
        "moto stops a one-time Spot request's instance, which EC2 refuses with "
        "UnsupportedOperation (only a persistent request's instance stops)"
    ),
    "a Spot Instance's request named": (
        "moto's DescribeInstances leaves out the SpotInstanceRequestId of a Spot Instance, so "
        "the adapter takes every moto Spot Instance for one-time (its safe default) and never "
        "needs DescribeSpotInstanceRequests"
    ),
    "instance store": (
        "moto keeps no instance-store volumes: a block device mapping naming an ephemeral "
        "volume is refused for want of an Ebs member, so an instance whose data is lost on "
        "a stop cannot be made"
    ),
    "a stop of a terminated instance refused": (
        "moto stops and starts a terminated instance again; EC2 refuses both with "
        "IncorrectInstanceState"
    ),
    "the bill": (
        "moto does not answer Cost Explorer's GetCostAndUsageWithResources, let alone from "
        "the instances' usage and with Cost Explorer's lag"
    ),
}


class Moto:
    """A moto server's EC2 in REGION, reached at `url`."""

    def __init__(self, url: str) -> None:
        self.url = url
        # the setup's own client, unwatched: it may send what the adapter never does
        self.ec2: BaseClient = boto3.session.Session().client(
            "ec2",
            region_name=REGION,
            endpoint_url=url,
            aws_access_key_id=KEY_ID,
            aws_secret_access_key=SECRET,
        )

    def launch(self, **options: Any) -> str:
        """A running on-demand instance of INSTANCE_TYPE on an EBS root, with `options` for
        RunInstances; its id."""
        answer = self.ec2.run_instances(
            ImageId=IMAGE, InstanceType=INSTANCE_TYPE, MinCount=1, MaxCount=1, **options
        )
        ref = str(answer["Instances"][0]["InstanceId"])
        assert self.state(ref) == "running"
        return ref

    def launch_spot(self, kind: str) -> str:
        """A running Spot Instance of a `kind` ("one-time" or "persistent") Spot request."""
        answer = self.ec2.request_spot_instances(
            SpotPrice="1.00",
            Type=kind,
            LaunchSpecification={"ImageId": IMAGE, "InstanceType": INSTANCE_TYPE},
        )
        return str(answer["SpotInstanceRequests"][0]["InstanceId"])

    def instance(self, ref: str) -> dict[str, Any]:
        answer = self.ec2.describe_instances(InstanceIds=[ref])
        return dict(answer["Reservations"][0]["Instances"][0])

    def state(self, ref: str) -> str:
        return str(self.instance(ref)["State"]["Name"])

    def adapter(self, secret: str = SECRET) -> Ec2Provider:
        """The EC2 adapter, as the contract suite configures it for the project's fake."""
        return Ec2Provider.connect(
            REGION,
            endpoint_url=self.url,
            access_key_id=KEY_ID,
            secret_access_key=secret,
            timeout_s=30.0,
            session=SESSION,
            rates=RATES,
            stop_latency_s=0.0,
        )


@contextmanager
def serving() -> Iterator[Moto]:
    """moto served on a free loopback port for the block."""
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # its server's request lines
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield Moto(f"http://{host}:{port}")
    finally:
        server.stop()
