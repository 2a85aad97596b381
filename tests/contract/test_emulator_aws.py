"""moto's EC2 beside the project's fake: the adapter's requests to moto and moto's answers
held to botocore's models, and each of emulator_aws.CANNOT_EMULATE's claims about moto's
behaviour proven of the installed moto. Should a newer moto emulate one of them, its probe
here fails: the contract test that needs it then runs against moto too, and the claim goes
(with its line in docs/providers.md). The claims that moto lacks a feature altogether
(failures on demand, a refusal for want of capacity) have nothing to probe."""

from __future__ import annotations

from collections.abc import Callable

import boto3
import pytest
from botocore.exceptions import ClientError

from governor.adapters.providers.aws import ONE_TIME_SPOT
from governor.domain.model import PodState
from governor.domain.ports import CallOutcome
from tests.contract.aws_models import CHECKED
from tests.contract.emulator_aws import CANNOT_EMULATE, KEY_ID, REGION, SECRET, Moto


def test_the_adapters_requests_and_motos_answers_conform_to_ec2s_model(moto_ec2: Moto) -> None:
    moto = moto_ec2
    ref = moto.launch()
    before = CHECKED.copy()
    adapter = moto.adapter()
    assert adapter.describe(ref).state is PodState.RUNNING
    assert ref in {pod.ref for pod in adapter.pods()}
    assert adapter.stop(ref).outcome in (CallOutcome.DONE, CallOutcome.PENDING)
    assert adapter.resume(ref).outcome is CallOutcome.DONE
    assert set((CHECKED - before).keys()) == {
        "DescribeInstances",
        "DescribeInstanceTypes",
        "DescribeVolumes",
        "StopInstances",
        "StartInstances",
    }


def a_wrong_key_is_answered(moto: Moto) -> None:
    ref = moto.launch()
    assert moto.adapter(secret="not-the-secret").describe(ref).state is PodState.RUNNING


def a_one_time_spot_instance_stops(moto: Moto) -> None:
    ref = moto.launch_spot("one-time")
    stopping = moto.ec2.stop_instances(InstanceIds=[ref])["StoppingInstances"]
    assert stopping[0]["CurrentState"]["Name"] in ("stopping", "stopped")


def a_spot_instance_names_no_request(moto: Moto) -> None:
    ref = moto.launch_spot("persistent")
    instance = moto.instance(ref)
    assert instance["InstanceLifecycle"] == "spot" and "SpotInstanceRequestId" not in instance
    assert moto.adapter().describe(ref).cannot_preserve == ONE_TIME_SPOT  # the safe default


def instance_store_is_refused(moto: Moto) -> None:
    ephemeral = [{"DeviceName": "/dev/sdb", "VirtualName": "ephemeral0"}]
    with pytest.raises(ClientError, match="MissingParameter"):
        moto.launch(BlockDeviceMappings=ephemeral)


def a_terminated_instance_stops_and_starts(moto: Moto) -> None:
    ref = moto.launch()
    moto.ec2.terminate_instances(InstanceIds=[ref])
    moto.ec2.stop_instances(InstanceIds=[ref])
    started = moto.ec2.start_instances(InstanceIds=[ref])["StartingInstances"]
    assert started[0]["CurrentState"]["Name"] == "pending"


def the_bill_is_not_answered(moto: Moto) -> None:
    ce = boto3.session.Session().client(
        "ce",
        region_name=REGION,
        endpoint_url=moto.url,
        aws_access_key_id=KEY_ID,
        aws_secret_access_key=SECRET,
    )
    with pytest.raises(ClientError) as refused:
        ce.get_cost_and_usage_with_resources(
            TimePeriod={"Start": "2026-01-01", "End": "2026-01-02"},
            Granularity="DAILY",
            Metrics=["UnblendedCost"],
            Filter={"Dimensions": {"Key": "RESOURCE_ID", "Values": ["i-0123456789abcdef0"]}},
        )
    assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 500


PROBES: dict[str, Callable[[Moto], None]] = {
    "a refused key": a_wrong_key_is_answered,
    "a one-time Spot Instance's stop refused": a_one_time_spot_instance_stops,
    "a Spot Instance's request named": a_spot_instance_names_no_request,
    "instance store": instance_store_is_refused,
    "a stop of a terminated instance refused": a_terminated_instance_stops_and_starts,
    "the bill": the_bill_is_not_answered,
}
UNPROBED = {"failures on demand", "a refusal for want of capacity"}  # features moto lacks


def test_every_claim_is_probed_or_names_a_missing_feature() -> None:
    assert PROBES.keys() | UNPROBED == CANNOT_EMULATE.keys()
    assert not PROBES.keys() & UNPROBED


@pytest.mark.parametrize("claim", sorted(PROBES))
def test_moto_still_cannot_emulate(moto_ec2: Moto, claim: str) -> None:
    PROBES[claim](moto_ec2)
