"""The EC2 adapter against the fake EC2, over real HTTP on a thread, signed by boto3.

Every answer the real API can give the adapter: an instance with its type, lifecycle and
EBS volumes; every live instance listed page by page; an instance-store root that must
never be stopped; no such instance; an instance already stopping or stopped, started again
or already running; IncorrectInstanceState; no capacity to start an instance; throttling,
5xx, a timeout, bodies that are not EC2's XML and EC2's own error codes; a wrong secret.
TerminateInstances is sent only by `terminate`, only while the volume to keep survives it;
neither key reaches an error text.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path

import boto3
import botocore.session
import pytest
from botocore.exceptions import ClientError

from governor.adapters.providers.aws import (
    CANNOT_PRESERVE,
    ONE_TIME_SPOT,
    STATES,
    STOP_LATENCY_S,
    Ec2Provider,
)
from governor.domain.model import PodState
from governor.domain.ports import CallOutcome, ProviderError, Resumes, StopsPreserving
from governor.fakes.aws import STATE_CODES, FakeEc2
from governor.fakes.http_cloud import HOLD, FakeRequest, Reply, running
from tests.clock import FrozenClock
from tests.fake_clouds import TIMEOUT_S, Served

KEY_ID = "AKIAUNITTESTKEYID0001"
SECRET = "wJalrUNITTEST/SECRET+ACCESSKEY0123456789"
ON_DEMAND = "i-0123456789abcdef0"
SPOT = "i-0aaaaaaaaaaaaaaa1"
STORE_ROOT = "i-0bbbbbbbbbbbbbbb2"
ONE_TIME = "i-0eeeeeeeeeeeeeee5"
STORE_ONLY = "i-0ccccccccccccccc3"
SPOT_ROOT = "vol-0spotroot00000001"
RATES = {"g5.xlarge": Decimal("1.006"), "g5.xlarge:spot": Decimal("0.4024")}
SESSION = boto3.session.Session()  # shared, so EC2's API model is loaded once


class Cloud(Served[FakeEc2]):
    def actions(self) -> list[str]:
        return self.fake.state.action_names()

    def state(self, ref: str) -> str:
        return self.fake.state.instances[ref].state

    def adapter(
        self,
        secret: str | None = SECRET,
        key_id: str | None = KEY_ID,
        rates: dict[str, Decimal] = RATES,
        session: boto3.session.Session | None = SESSION,
    ) -> Ec2Provider:
        adapter = Ec2Provider.connect(
            "us-east-1",
            endpoint_url=self.url,
            access_key_id=key_id,
            secret_access_key=secret,
            timeout_s=TIMEOUT_S,
            session=session,
            rates=rates,
        )
        return self.ec2(adapter)


def start(
    tmp_path: Path, stop_delay_s: float = 0.0, clock: FrozenClock | None = None
) -> Iterator[Cloud]:
    fake = FakeEc2(tmp_path / "ec2.json", SECRET, access_key_id=KEY_ID, stop_delay_s=stop_delay_s)
    if clock is not None:
        fake.clock = clock.now
    fake.add_instance(
        ON_DEMAND, "1.006", volumes={"vol-0root000000000001": 100, "vol-0data000000000001": 400}
    )
    fake.add_instance(  # a persistent request's, its workspace on an EBS data volume
        SPOT, "0.4024", lifecycle="spot", volumes={SPOT_ROOT: 100, "vol-0spotdata00000001": 200}
    )
    fake.add_instance(
        STORE_ROOT, "0.69", instance_type="d2.xlarge", root_device_type="instance-store"
    )
    with running(fake) as server:
        yield Cloud(fake, server.url)
    assert "TerminateInstances" not in fake.state.action_names()


@pytest.fixture
def cloud(tmp_path: Path) -> Iterator[Cloud]:
    yield from start(tmp_path)


@pytest.fixture
def slow_cloud(tmp_path: Path, near_now: FrozenClock) -> Iterator[Cloud]:
    """Instances take 0.3 s of the cloud's clock (`near_now`) to go from stopping to stopped."""
    yield from start(tmp_path, stop_delay_s=0.3, clock=near_now)


@pytest.fixture
def ec2(cloud: Cloud) -> Ec2Provider:
    return cloud.adapter()


def test_describe_reads_the_rate_table_and_the_ebs_volumes(ec2: Ec2Provider) -> None:
    pod = ec2.describe(ON_DEMAND)
    assert pod.state is PodState.RUNNING
    assert pod.hourly_rate_usd == Decimal("1.006")
    assert pod.storage is not None and pod.storage.gb == Decimal(500)
    assert pod.storage.usd_per_gb_month == pod.storage.stopped_usd_per_gb_month == Decimal("0.08")
    assert pod.cannot_preserve is None
    assert ec2.stop_latency_s == STOP_LATENCY_S
    assert isinstance(ec2, StopsPreserving)


def test_a_spot_instance_prefers_the_spot_rate(cloud: Cloud) -> None:
    assert cloud.adapter().describe(SPOT).hourly_rate_usd == Decimal("0.4024")
    on_demand_only = cloud.adapter(rates={"g5.xlarge": Decimal("1.006")})
    assert on_demand_only.describe(SPOT).hourly_rate_usd == Decimal("1.006")


def test_an_instance_type_missing_from_the_table_has_no_rate(cloud: Cloud) -> None:
    assert cloud.adapter().describe(STORE_ROOT).hourly_rate_usd is None


def test_an_instance_store_root_cannot_be_preserved(ec2: Ec2Provider, cloud: Cloud) -> None:
    pod = ec2.describe(STORE_ROOT)
    assert pod.cannot_preserve == CANNOT_PRESERVE and "instance store" in pod.cannot_preserve
    assert pod.storage is None
    result = ec2.stop(STORE_ROOT)
    assert result.outcome is CallOutcome.PERMANENT and "instance store" in result.detail
    assert "StopInstances" not in cloud.actions()
    assert cloud.state(STORE_ROOT) == "running"


def test_a_one_time_spot_instance_cannot_be_preserved(ec2: Ec2Provider, cloud: Cloud) -> None:
    cloud.fake.add_instance(ONE_TIME, "0.4024", lifecycle="spot", spot_type="one-time")
    pod = ec2.describe(ONE_TIME)
    assert pod.cannot_preserve == ONE_TIME_SPOT and pod.state is PodState.RUNNING
    assert ec2.describe(SPOT).cannot_preserve is None  # a persistent request's instance stops
    result = ec2.stop(ONE_TIME)
    assert result.outcome is CallOutcome.PERMANENT and "one-time Spot request" in result.detail
    assert "StopInstances" not in cloud.actions()
    assert cloud.state(ONE_TIME) == "running"
    assert ec2.stop(SPOT).outcome is CallOutcome.DONE


def test_an_ebs_root_with_nothing_but_instance_store_besides_loses_it_on_a_stop(
    ec2: Ec2Provider, cloud: Cloud
) -> None:
    cloud.fake.add_instance(STORE_ONLY, "1.006")  # a g5.xlarge: 1 x 250 GB NVMe SSD
    cloud.fake.add_instance("i-0ddddddddddddddd4", "3.06", instance_type="p3.2xlarge")
    pod = ec2.describe(STORE_ONLY)
    assert pod.cannot_preserve is not None and not pod.terminate_only
    assert "1 x 250 GB NVMe SSD of instance store" in pod.cannot_preserve
    assert "erases when the instance stops" in pod.cannot_preserve
    assert "Attach an EBS volume" in pod.cannot_preserve  # how to keep it instead
    assert ec2.describe("i-0ddddddddddddddd4").cannot_preserve is None  # EBS only: all kept
    assert ec2.describe(ON_DEMAND).cannot_preserve is None  # its workspace on an EBS volume
    assert ec2.describe(SPOT).cannot_preserve is None
    # a stop works (it loses the instance store, as acknowledged at registration)
    assert ec2.stop(STORE_ONLY).outcome is CallOutcome.DONE
    assert cloud.state(STORE_ONLY) == "stopped"


def test_no_stop_works_for_a_one_time_spot_instance_or_an_instance_store_root(
    ec2: Ec2Provider, cloud: Cloud
) -> None:
    cloud.fake.add_instance(ONE_TIME, "0.4024", lifecycle="spot", spot_type="one-time")
    assert ec2.describe(ONE_TIME).terminate_only and ec2.describe(STORE_ROOT).terminate_only
    assert not ec2.describe(SPOT).terminate_only
    one_time = ec2.describe(ONE_TIME).cannot_preserve
    assert one_time is not None and "persistent Spot request" in one_time  # the fix


def test_terminate_keeps_a_volume_not_deleted_on_termination_or_refuses(
    ec2: Ec2Provider, cloud: Cloud
) -> None:
    root, data = "vol-0eeeeeeeeeeeeeee5", "vol-0ffffffffffffff06"
    cloud.fake.add_instance(
        ONE_TIME,
        "0.4024",
        lifecycle="spot",
        spot_type="one-time",
        volumes={root: 100, data: 500},
        kept=[data],
    )
    assert ec2.describe(ONE_TIME).filesystems == {data: None}  # EC2 does not know the mount
    refused = ec2.terminate(ONE_TIME, keep=root)  # deleted on termination: the checkpoint too
    assert (
        refused.outcome is CallOutcome.PERMANENT and "DeleteOnTermination false" in refused.detail
    )
    assert data in refused.detail and "TerminateInstances" not in cloud.actions()
    done = ec2.terminate(ONE_TIME, keep=data)
    assert done.outcome is CallOutcome.DONE and data in done.detail
    assert cloud.state(ONE_TIME) == "terminated"
    assert cloud.fake.state.available == {data: 500}  # the checkpoint's volume survives
    assert ec2.terminate(ONE_TIME, keep=data).outcome is CallOutcome.DONE  # already terminated
    [sent] = [a["params"] for a in cloud.fake.state.actions if a["action"] == "TerminateInstances"]
    assert sent["InstanceId.1"] == ONE_TIME and "InstanceId.2" not in sent
    cloud.fake.state.actions.clear()  # let the fixture's own check pass


def test_the_fake_refuses_to_stop_a_one_time_spot_instance_as_ec2_does(cloud: Cloud) -> None:
    cloud.fake.add_instance(ONE_TIME, "0.4024", lifecycle="spot", spot_type="one-time")
    with pytest.raises(ClientError) as caught:
        cloud.adapter()._client.stop_instances(InstanceIds=[ONE_TIME])
    error = caught.value.response["Error"]
    assert error["Code"] == "UnsupportedOperation"
    assert "associated with a one-time Spot Instance request" in error["Message"]


def test_ec2_refusing_a_stop_as_unsupported_is_permanent_in_its_words(
    ec2: Ec2Provider, cloud: Cloud
) -> None:
    said = (
        f"You can't stop the Spot Instance '{ON_DEMAND}' because it is associated with a "
        "one-time Spot Instance request."
    )
    cloud.answer_next("", f"ec2:UnsupportedOperation:{said}")  # the instance read, then the stop
    result = ec2.stop(ON_DEMAND)
    assert result.outcome is CallOutcome.PERMANENT
    assert "cannot StopInstances at all" in result.detail and said in result.detail


def test_every_documented_instance_state_is_mapped() -> None:
    """The map covers InstanceStateName as botocore's EC2 model lists it: a value the model
    gains fails here until it is mapped."""
    model = botocore.session.get_session().get_service_model("ec2")
    assert set(STATES) == set(model.shape_for("InstanceStateName").enum)


def test_an_unknown_state_is_recorded_never_running_or_stopped(
    ec2: Ec2Provider, cloud: Cloud, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(STATE_CODES, "hibernating", 96)  # a state the model does not know
    cloud.fake.state.instances[ON_DEMAND].state = "hibernating"
    described = ec2.describe(ON_DEMAND)
    assert (described.state, described.provider_state) == (PodState.RUNNING, "hibernating")
    assert described.state_known is False
    stopped, resumed = ec2.stop(ON_DEMAND), ec2.resume(ON_DEMAND)
    assert stopped.outcome is CallOutcome.PENDING and resumed.outcome is CallOutcome.RETRYABLE
    assert stopped.provider_state == resumed.provider_state == "hibernating"
    assert not stopped.state_known and not resumed.state_known
    assert "StopInstances" not in cloud.actions() and "StartInstances" not in cloud.actions()
    cloud.fake.state.instances[ON_DEMAND].state = "running"  # a documented state again
    assert ec2.describe(ON_DEMAND).state_known and ec2.stop(ON_DEMAND).state_known


@pytest.mark.parametrize("ref", ["i-00000000000000404", "pod-1"])
def test_describe_of_an_unknown_instance_is_a_permanent_error(ec2: Ec2Provider, ref: str) -> None:
    with pytest.raises(ProviderError, match="no such instance") as caught:
        ec2.describe(ref)
    assert caught.value.retryable is False


def test_stop_sends_stop_instances_and_is_idempotent(ec2: Ec2Provider, cloud: Cloud) -> None:
    first = ec2.stop(ON_DEMAND)
    assert first.outcome is CallOutcome.DONE and "EBS volumes kept" in first.detail
    assert ec2.describe(ON_DEMAND).state is PodState.STOPPED
    again = ec2.stop(ON_DEMAND)
    assert again.outcome is CallOutcome.DONE and "already stopped" in again.detail
    assert cloud.actions().count("StopInstances") == 1
    stop = next(a for a in cloud.fake.state.actions if a["action"] == "StopInstances")
    assert stop["params"] == {
        "Action": "StopInstances",
        "Version": "2016-11-15",
        "InstanceId.1": ON_DEMAND,
    }  # never Hibernate, never Force
    assert cloud.fake.state.instances[ON_DEMAND].volumes  # the EBS volumes are still there


def test_a_stop_in_progress_is_pending_until_stopped(
    slow_cloud: Cloud, near_now: FrozenClock
) -> None:
    ec2 = slow_cloud.adapter()
    first = ec2.stop(ON_DEMAND)
    assert first.outcome is CallOutcome.PENDING and "stopping" in first.detail
    assert ec2.describe(ON_DEMAND).state is PodState.STOPPING
    assert ec2.stop(ON_DEMAND).outcome is CallOutcome.PENDING
    near_now.advance(0.35)
    assert ec2.stop(ON_DEMAND).outcome is CallOutcome.DONE
    assert slow_cloud.actions().count("StopInstances") == 1


def test_the_bill_stops_when_the_instance_stops(ec2: Ec2Provider, cloud: Cloud) -> None:
    ec2.stop(ON_DEMAND)
    instance = cloud.fake.state.instances[ON_DEMAND]
    assert instance.stop_requested_at is not None
    stopped_at = datetime.fromisoformat(instance.stop_requested_at)
    later = stopped_at + timedelta(hours=1)
    assert instance.bill_usd(later) == instance.bill_usd(stopped_at) > 0


@pytest.mark.parametrize(
    ("state", "outcome"),
    [
        ("stopped", CallOutcome.DONE),
        ("terminated", CallOutcome.DONE),
        ("stopping", CallOutcome.PENDING),
        ("shutting-down", CallOutcome.PENDING),
    ],
)
def test_an_instance_on_its_way_down_is_not_stopped_again(
    ec2: Ec2Provider, cloud: Cloud, state: str, outcome: CallOutcome
) -> None:
    cloud.fake.state.instances[ON_DEMAND].state = state
    result = ec2.stop(ON_DEMAND)
    assert result.outcome is outcome and state in result.detail
    assert "StopInstances" not in cloud.actions()


def test_stopping_an_unknown_instance_is_done(ec2: Ec2Provider, cloud: Cloud) -> None:
    result = ec2.stop("i-00000000000000404")
    assert result.outcome is CallOutcome.DONE and "gone" in result.detail
    assert cloud.actions() == ["DescribeInstances"]


def test_stop_instances_answering_not_found_is_done(ec2: Ec2Provider, cloud: Cloud) -> None:
    cloud.answer_next("", "ec2:InvalidInstanceID.NotFound")
    assert ec2.stop(ON_DEMAND).outcome is CallOutcome.DONE


def test_incorrect_instance_state_rereads_and_retries_while_pending(
    ec2: Ec2Provider, cloud: Cloud
) -> None:
    cloud.fake.state.instances[ON_DEMAND].state = "pending"
    result = ec2.stop(ON_DEMAND)
    assert result.outcome is CallOutcome.RETRYABLE, result
    assert "IncorrectInstanceState" in result.detail and "it is pending" in result.detail
    assert cloud.actions() == ["DescribeInstances", "StopInstances", "DescribeInstances"]


@pytest.mark.parametrize(
    ("meanwhile", "outcome"),
    [("terminated", CallOutcome.DONE), ("shutting-down", CallOutcome.PENDING)],
)
def test_incorrect_instance_state_after_a_race_rereads_the_state(
    ec2: Ec2Provider,
    cloud: Cloud,
    monkeypatch: pytest.MonkeyPatch,
    meanwhile: str,
    outcome: CallOutcome,
) -> None:
    handle = cloud.fake.handle

    def ended_by_someone_else_first(request: FakeRequest) -> Reply:
        if "Action=StopInstances" in str(request.body):
            cloud.fake.state.instances[ON_DEMAND].state = meanwhile
        return handle(request)

    monkeypatch.setattr(cloud.fake, "handle", ended_by_someone_else_first)
    assert ec2.stop(ON_DEMAND).outcome is outcome
    assert cloud.actions() == ["DescribeInstances", "StopInstances", "DescribeInstances"]


@pytest.mark.parametrize(
    ("answer", "outcome", "says"),
    [
        ("429", CallOutcome.RETRYABLE, "rate limited DescribeInstances (HTTP 503"),
        ("429:9", CallOutcome.RETRYABLE, "RequestLimitExceeded"),
        ("ec2:Throttling", CallOutcome.RETRYABLE, "rate limited"),
        ("ec2:ThrottlingException", CallOutcome.RETRYABLE, "rate limited"),
        ("ec2:ServiceUnavailable", CallOutcome.RETRYABLE, "on its side"),
        ("ec2:Blocked", CallOutcome.PERMANENT, "refused the credentials"),
        ("ec2:OptInRequired", CallOutcome.PERMANENT, "refused the credentials"),
        ("ec2:UnsupportedOperation", CallOutcome.PERMANENT, "cannot DescribeInstances at all"),
        ("500", CallOutcome.RETRYABLE, "HTTP 500 InternalError"),
        ("status:502", CallOutcome.RETRYABLE, "HTTP 502"),
        ("ec2:Unavailable", CallOutcome.RETRYABLE, "on its side"),
        (HOLD, CallOutcome.RETRYABLE, "timed out"),
        ("malformed", CallOutcome.RETRYABLE, "not EC2's XML"),
        ("truncated", CallOutcome.RETRYABLE, "not EC2's XML"),
        ("ec2:UnauthorizedOperation", CallOutcome.PERMANENT, "HTTP 403 UnauthorizedOperation"),
        ("ec2:InvalidParameterValue", CallOutcome.PERMANENT, "HTTP 400"),
    ],
)
def test_failed_stops_are_classified(
    ec2: Ec2Provider, cloud: Cloud, answer: str, outcome: CallOutcome, says: str
) -> None:
    cloud.answer_next(answer)
    result = ec2.stop(ON_DEMAND)
    assert result.outcome is outcome, result
    assert says in result.detail and result.detail.startswith("aws ")
    assert result.retry_after_s is None  # EC2 says nothing about when to come back
    assert len(cloud.fake.calls()) <= 1  # one attempt: boto3 does not retry
    assert ec2.stop(ON_DEMAND).outcome is CallOutcome.DONE  # the next try goes through


def test_a_failed_stop_instances_is_classified_too(ec2: Ec2Provider, cloud: Cloud) -> None:
    cloud.answer_next("", "429")
    result = ec2.stop(ON_DEMAND)
    assert result.outcome is CallOutcome.RETRYABLE and "rate limited StopInstances" in result.detail
    assert cloud.state(ON_DEMAND) == "running"


def test_throttled_describe_is_a_retryable_error(ec2: Ec2Provider, cloud: Cloud) -> None:
    cloud.answer_next("429")
    with pytest.raises(ProviderError) as caught:
        ec2.describe(ON_DEMAND)
    assert caught.value.retryable and caught.value.status == 503
    assert caught.value.retry_after_s is None


def test_resume_sends_start_instances_and_is_idempotent(ec2: Ec2Provider, cloud: Cloud) -> None:
    assert isinstance(ec2, Resumes)
    ec2.stop(ON_DEMAND)
    result = ec2.resume(ON_DEMAND)
    assert result.outcome is CallOutcome.DONE and "pending" in result.detail, result
    start = next(a for a in cloud.fake.state.actions if a["action"] == "StartInstances")
    assert start["params"] == {
        "Action": "StartInstances",
        "Version": "2016-11-15",
        "InstanceId.1": ON_DEMAND,
    }
    assert ec2.describe(ON_DEMAND).state is PodState.RUNNING
    again = ec2.resume(ON_DEMAND)
    assert again.outcome is CallOutcome.DONE and "already running" in again.detail
    assert cloud.actions().count("StartInstances") == 1


def test_a_started_instance_bills_again(ec2: Ec2Provider, cloud: Cloud) -> None:
    ec2.stop(ON_DEMAND)
    ec2.resume(ON_DEMAND)
    instance = cloud.fake.state.instances[ON_DEMAND]
    assert instance.stop_requested_at is None and len(instance.earlier_runs) == 1
    started_at = datetime.fromisoformat(instance.started_at)
    assert instance.bill_usd(started_at + timedelta(hours=1)) > instance.bill_usd(started_at)


@pytest.mark.parametrize(
    ("state", "outcome"),
    [
        ("running", CallOutcome.DONE),
        ("pending", CallOutcome.DONE),
        ("stopping", CallOutcome.RETRYABLE),
        ("shutting-down", CallOutcome.PERMANENT),
        ("terminated", CallOutcome.PERMANENT),
    ],
)
def test_an_instance_that_is_not_stopped_is_not_started(
    ec2: Ec2Provider, cloud: Cloud, state: str, outcome: CallOutcome
) -> None:
    cloud.fake.state.instances[ON_DEMAND].state = state
    result = ec2.resume(ON_DEMAND)
    assert result.outcome is outcome, result
    assert "StartInstances" not in cloud.actions()


def test_resuming_an_unknown_instance_is_permanent(ec2: Ec2Provider, cloud: Cloud) -> None:
    result = ec2.resume("i-00000000000000404")
    assert result.outcome is CallOutcome.PERMANENT and "no such instance" in result.detail
    assert cloud.actions() == ["DescribeInstances"]


@pytest.mark.parametrize(
    ("answer", "outcome", "says"),
    [
        ("no-capacity", CallOutcome.PERMANENT, "HTTP 500 InsufficientInstanceCapacity: We"),
        ("ec2:InsufficientHostCapacity", CallOutcome.PERMANENT, "has no capacity"),
        ("ec2:IncorrectInstanceState", CallOutcome.RETRYABLE, "(it is stopped)"),
        ("429", CallOutcome.RETRYABLE, "rate limited StartInstances"),
        ("500", CallOutcome.RETRYABLE, "HTTP 500 InternalError"),
        ("truncated", CallOutcome.RETRYABLE, "not EC2's XML"),
        ("ec2:UnauthorizedOperation", CallOutcome.PERMANENT, "HTTP 403 UnauthorizedOperation"),
    ],
)
def test_failed_starts_are_classified(
    ec2: Ec2Provider, cloud: Cloud, answer: str, outcome: CallOutcome, says: str
) -> None:
    ec2.stop(ON_DEMAND)
    cloud.answer_next("", answer)  # the instance is read, StartInstances fails
    result = ec2.resume(ON_DEMAND)
    assert result.outcome is outcome, result
    assert says in result.detail and SECRET not in result.detail
    assert cloud.state(ON_DEMAND) == "stopped"
    assert ec2.resume(ON_DEMAND).outcome is CallOutcome.DONE  # the next try goes through


STOPPED = "i-0ccccccccccccccc3"
TERMINATED = "i-0ddddddddddddddd4"


def add_stopped_and_terminated(cloud: Cloud) -> None:
    for ref, state in [(STOPPED, "stopped"), (TERMINATED, "terminated")]:
        cloud.fake.add_instance(ref, "1.006")
        cloud.fake.state.instances[ref].state = state


def test_pods_lists_every_live_instance_as_describe_does(ec2: Ec2Provider, cloud: Cloud) -> None:
    add_stopped_and_terminated(cloud)
    listed = {pod.ref: pod.description for pod in ec2.pods()}
    assert listed.keys() == {ON_DEMAND, SPOT, STORE_ROOT, STOPPED}  # terminated is gone
    assert listed[STOPPED].state is PodState.STOPPED  # its EBS volume still bills
    assert listed[STOPPED].storage is not None and listed[STOPPED].storage.gb == Decimal(100)
    # one page of instances, then every volume at once, then every Spot request at once, then
    # the instance store of the types of those with nothing but an EBS root (STOPPED's)
    assert cloud.actions() == [
        "DescribeInstances",
        "DescribeVolumes",
        "DescribeSpotInstanceRequests",
        "DescribeInstanceTypes",
    ]
    types = cloud.fake.state.actions[3]["params"]
    assert [v for k, v in types.items() if k.startswith("InstanceType.")] == ["g5.xlarge"]
    assert listed[STOPPED].cannot_preserve is not None  # a g5.xlarge's NVMe instance store
    volumes = cloud.fake.state.actions[1]["params"]
    assert sorted(v for k, v in volumes.items() if k.startswith("VolumeId.")) == sorted(
        v for i in (ON_DEMAND, SPOT, STOPPED) for v in cloud.fake.state.instances[i].volumes
    )
    assert listed == {ref: ec2.describe(ref) for ref in listed}


def test_pods_follows_next_token(ec2: Ec2Provider, cloud: Cloud) -> None:
    add_stopped_and_terminated(cloud)
    everything = {pod.ref: pod.description for pod in ec2.pods()}
    cloud.fake.state.actions.clear()
    cloud.fake.page_size = 2
    assert {pod.ref: pod.description for pod in ec2.pods()} == everything
    pages = [a["params"] for a in cloud.fake.state.actions if a["action"] == "DescribeInstances"]
    assert [page.get("NextToken") for page in pages] == [None, "2", "4"]
    assert cloud.actions().count("DescribeVolumes") == 1


def test_the_fake_pages_by_max_results(cloud: Cloud) -> None:
    add_stopped_and_terminated(cloud)
    cloud.fake.add_instance("i-0eeeeeeeeeeeeeee5", "1.006")
    client = SESSION.client(
        "ec2",
        region_name="us-east-1",
        endpoint_url=cloud.url,
        aws_access_key_id=KEY_ID,
        aws_secret_access_key=SECRET,
    )
    pages = client.get_paginator("describe_instances").paginate(PaginationConfig={"PageSize": 5})
    sizes = [sum(len(r["Instances"]) for r in page["Reservations"]) for page in pages]
    assert sizes == [5, 1]


@pytest.mark.parametrize(
    ("answers", "says"),
    [
        (["429"], "rate limited DescribeInstances"),
        (["", "ec2:Throttling"], "rate limited DescribeInstances"),
        (["", "", "429"], "rate limited DescribeVolumes"),
        (["", "truncated"], "not EC2's XML"),
    ],
)
def test_a_failed_listing_is_retryable(
    ec2: Ec2Provider, cloud: Cloud, answers: list[str], says: str
) -> None:
    cloud.fake.page_size = 2  # two pages of instances
    cloud.answer_next(*answers)
    with pytest.raises(ProviderError, match=says) as caught:
        ec2.pods()
    assert caught.value.retryable


def test_listing_with_wrong_credentials_is_permanent_and_never_echoed(cloud: Cloud) -> None:
    with pytest.raises(ProviderError, match="HTTP 401 AuthFailure") as caught:
        cloud.adapter("wrong/SECRET+KEY").pods()
    assert caught.value.retryable is False
    assert "wrong/SECRET+KEY" not in str(caught.value) and KEY_ID not in str(caught.value)


@pytest.mark.parametrize(
    ("secret", "key_id"), [("wrong/SECRET+KEY", KEY_ID), (SECRET, "AKIAWRONG")]
)
def test_wrong_credentials_are_permanent_and_never_echoed(
    cloud: Cloud, secret: str, key_id: str
) -> None:
    result = cloud.adapter(secret, key_id).stop(ON_DEMAND)
    assert result.outcome is CallOutcome.PERMANENT, result
    assert "refused the credentials" in result.detail and "HTTP 401 AuthFailure" in result.detail
    assert secret not in result.detail and key_id not in result.detail
    assert cloud.state(ON_DEMAND) == "running" and cloud.actions() == []


def test_keys_echoed_by_ec2_are_masked(ec2: Ec2Provider, cloud: Cloud) -> None:
    cloud.answer_next(f"ec2:AuthFailure:key {KEY_ID} with secret {SECRET} refused")
    result = ec2.stop(ON_DEMAND)
    assert result.outcome is CallOutcome.PERMANENT
    assert KEY_ID not in result.detail and SECRET not in result.detail
    assert "key *** with secret ***" in result.detail


def test_the_credential_chain_is_used_and_masked(
    cloud: Cloud, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", KEY_ID)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "absent-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "absent-credentials"))
    ec2 = cloud.adapter(secret=None, key_id=None, session=None)  # a fresh session reads them
    cloud.answer_next(f"ec2:InvalidParameterValue:echoing {SECRET}")
    refused = ec2.stop(ON_DEMAND)
    assert refused.outcome is CallOutcome.PERMANENT and SECRET not in refused.detail
    assert ec2.stop(ON_DEMAND).outcome is CallOutcome.DONE


def test_the_fake_honours_and_records_terminate_instances(cloud: Cloud) -> None:
    """So the check that it never came proves something."""
    client = SESSION.client(
        "ec2",
        region_name="us-east-1",
        endpoint_url=cloud.url,
        aws_access_key_id=KEY_ID,
        aws_secret_access_key=SECRET,
    )
    client.terminate_instances(InstanceIds=[SPOT])
    assert cloud.state(SPOT) == "terminated" and cloud.fake.state.instances[SPOT].volumes == {}
    assert cloud.actions() == ["TerminateInstances"]
    cloud.fake.state.actions.clear()  # let the fixture's own check pass


def test_no_log_line_or_error_carries_a_key(
    ec2: Ec2Provider, cloud: Cloud, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    cloud.answer_next("429", "500", "malformed", "truncated", HOLD)
    details = [ec2.stop(ON_DEMAND).detail for _ in range(6)]
    details.append(cloud.adapter("wrong/SECRET+KEY").stop(ON_DEMAND).detail)
    ec2.describe(ON_DEMAND)
    assert caplog.records, "expected botocore to log its requests"
    assert SECRET not in caplog.text and "wrong/SECRET+KEY" not in caplog.text
    assert all(SECRET not in d and KEY_ID not in d for d in details)
    # botocore's DEBUG log of each request prints its Authorization header, which names the
    # access key id (never the secret); no other line does.
    with_key_id = [r for r in caplog.records if KEY_ID in r.getMessage()]
    assert with_key_id
    assert all(
        r.name == "botocore.endpoint" and r.getMessage().startswith("Sending http request")
        for r in with_key_id
    )
