"""The RunPod adapter against the fake RunPod cloud, over real HTTP on a thread.

Every answer the real API can give the adapter: a pod and its rate, no such pod, a pod
already stopped or already running, a host without the GPUs to resume a pod, 429 with and
without Retry-After, 5xx, a timeout, a body that is not JSON and GraphQL errors inside a 200.
Whatever happens, podTerminate is never sent and the key never appears in an error or a log
line.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import httpx
import pytest

from governor.adapters.providers.runpod import RESUME_MUTATION, STOP_LATENCY_S, RunPodProvider
from governor.domain.model import PodState
from governor.domain.ports import CallOutcome, ProviderError, Resumes
from governor.fakes.http_cloud import HOLD, running
from governor.fakes.runpod import BUCKETS, SPOT, FakeRunPod
from tests.fake_clouds import Served

KEY = "rpa_UNIT_TEST_SECRET_0123456789"
SINCE = datetime(2020, 1, 1, tzinfo=UTC)  # when the tests' pods were registered: before any bill


class Cloud(Served[FakeRunPod]):
    def mutations(self) -> list[str]:
        return self.fake.state.mutation_names()


@pytest.fixture
def cloud(tmp_path: Path) -> Iterator[Cloud]:
    fake = FakeRunPod(tmp_path / "runpod.json", KEY)
    fake.add_pod("pod-1", "0.44")
    fake.add_pod("pod-2", "3600")
    with running(fake) as server:
        yield Cloud(fake, server.url)
    assert "podTerminate" not in fake.state.mutation_names()


@pytest.fixture
def runpod(cloud: Cloud) -> Iterator[RunPodProvider]:
    with cloud.client() as client:
        yield RunPodProvider(client, KEY, f"{cloud.url}/graphql")


def test_describe_reads_the_rate_from_cost_per_hr(runpod: RunPodProvider) -> None:
    pod = runpod.describe("pod-1")
    assert pod.state is PodState.RUNNING
    assert pod.hourly_rate_usd == Decimal("0.44")
    assert pod.storage is not None and pod.storage.gb == Decimal(20)
    assert runpod.stop_latency_s == STOP_LATENCY_S == 30.0


def test_describe_of_an_unknown_pod_is_a_permanent_error(runpod: RunPodProvider) -> None:
    with pytest.raises(ProviderError, match="no pod 'nope'") as caught:
        runpod.describe("nope")
    assert caught.value.retryable is False


def test_stop_sends_pod_stop_and_is_idempotent(runpod: RunPodProvider, cloud: Cloud) -> None:
    first = runpod.stop("pod-1")
    assert first.outcome is CallOutcome.DONE, first
    assert runpod.describe("pod-1").state is PodState.STOPPED
    again = runpod.stop("pod-1")
    assert again.outcome is CallOutcome.DONE and "already stopped" in again.detail
    assert cloud.mutations() == ["podStop"]  # the second stop saw EXITED and sent nothing
    pod = cloud.fake.state.pods["pod-1"]
    assert pod.desired_status == "EXITED" and pod.stopped_at is not None


def test_the_bill_stops_when_the_pod_stops(runpod: RunPodProvider, cloud: Cloud) -> None:
    runpod.stop("pod-2")
    pod = cloud.fake.state.pods["pod-2"]
    assert pod.stopped_at is not None
    stopped_at = datetime.fromisoformat(pod.stopped_at)
    assert pod.bill_usd(stopped_at + timedelta(hours=1)) == pod.bill_usd(stopped_at) > 0


def test_stopping_an_unknown_pod_is_done(runpod: RunPodProvider, cloud: Cloud) -> None:
    result = runpod.stop("nope")
    assert result.outcome is CallOutcome.DONE and "gone" in result.detail
    assert cloud.mutations() == []


def test_pod_stop_answering_not_found_is_done(runpod: RunPodProvider, cloud: Cloud) -> None:
    cloud.answer_next("", "graphql:pod not found to stop")
    assert runpod.stop("pod-1").outcome is CallOutcome.DONE


@pytest.mark.parametrize(
    ("answer", "outcome", "says"),
    [
        ("429", CallOutcome.RETRYABLE, "rate limited"),
        ("429:9", CallOutcome.RETRYABLE, "retry after 9 s"),
        ("500", CallOutcome.RETRYABLE, "HTTP 500"),
        (HOLD, CallOutcome.RETRYABLE, "timed out"),
        ("malformed", CallOutcome.RETRYABLE, "not JSON"),
        ("graphql:Rate limit exceeded", CallOutcome.RETRYABLE, "Rate limit exceeded"),
        ("transient", CallOutcome.RETRYABLE, "Something went wrong. Please try again later"),
        ("graphql:Something went wrong. Please try again later.", CallOutcome.RETRYABLE, "wrong"),
        ("graphql:This pod is locked", CallOutcome.PERMANENT, "locked"),
        ("status:401", CallOutcome.PERMANENT, "HTTP 401"),
    ],
)
def test_failed_stops_are_classified(
    runpod: RunPodProvider, cloud: Cloud, answer: str, outcome: CallOutcome, says: str
) -> None:
    cloud.answer_next(answer)
    result = runpod.stop("pod-1")
    assert result.outcome is outcome, result
    assert says in result.detail
    assert KEY not in result.detail
    assert runpod.stop("pod-1").outcome is CallOutcome.DONE  # the next try goes through


def test_429_on_describe_carries_the_delay(runpod: RunPodProvider, cloud: Cloud) -> None:
    cloud.answer_next("429:4")
    with pytest.raises(ProviderError) as caught:
        runpod.describe("pod-1")
    assert caught.value.retryable and caught.value.retry_after_s == 4.0


def test_a_wrong_key_is_permanent_and_never_echoed(cloud: Cloud) -> None:
    wrong = "rpa_WRONG_KEY_987"
    with cloud.client() as client:
        result = RunPodProvider(client, wrong, f"{cloud.url}/graphql").stop("pod-1")
    assert result.outcome is CallOutcome.PERMANENT and "HTTP 401" in result.detail
    assert wrong not in result.detail


def test_the_legacy_api_key_parameter_is_accepted_by_the_fake(cloud: Cloud) -> None:
    body = {"query": 'query { pod(input: {podId: "pod-1"}) { id costPerHr } }'}
    answer = cloud.post(f"{cloud.url}/graphql", params={"api_key": KEY}, json=body).json()
    assert answer["data"]["pod"]["costPerHr"] == 0.44


def test_no_log_line_carries_the_key(
    runpod: RunPodProvider, cloud: Cloud, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    cloud.answer_next("429", "500", "malformed", "graphql:bad", HOLD)
    for _ in range(6):
        runpod.stop("pod-1")
    runpod.describe("pod-1")
    assert caplog.records, "expected the HTTP client to log its requests"
    assert KEY not in caplog.text


def test_billed_sums_the_pods_daily_records(runpod: RunPodProvider, cloud: Cloud) -> None:
    pod = cloud.fake.state.pods["pod-2"]  # $3600/h: a dollar a second
    pod.started_at = (datetime.fromisoformat(pod.started_at) - timedelta(hours=2)).isoformat()
    billed = runpod.billed(dict.fromkeys(["pod-2"], SINCE))["pod-2"]
    expected = pod.bill_usd(billed.through)
    assert abs(billed.amount_usd - expected) <= Decimal(2)  # the fake answered a moment later
    assert billed.amount_usd >= Decimal(7200)
    records = cloud.fake.state.pods["pod-2"].billing_records(billed.through, BUCKETS["day"])
    assert len(records) in (1, 2)  # the day in progress, and yesterday if it began then


def test_billed_reads_the_accounts_bill_once_for_many_pods(cloud: Cloud) -> None:
    sent: list[httpx.Request] = []
    with cloud.client(event_hooks={"request": [sent.append]}) as client:
        runpod = RunPodProvider(client, KEY, f"{cloud.url}/graphql")
        bills = runpod.billed(dict.fromkeys(["pod-1", "pod-2", "nope"], SINCE))
        [read] = sent
        assert read.url.path == "/v2/billing/pods" and read.url.params["bucketSize"] == "day"
        assert "podId" not in read.url.params  # the whole account, in one call
        one = runpod.billed(dict.fromkeys(["pod-2"], SINCE))
        assert sent[-1].url.params["podId"] == "pod-2"  # one pod alone: its records only
    assert set(bills) == {"pod-1", "pod-2", "nope"} and bills["nope"].amount_usd == 0
    for ref, within in (("pod-1", Decimal("0.01")), ("pod-2", Decimal(2))):  # answered a moment on
        expected = cloud.fake.state.pods[ref].bill_usd(bills[ref].through)
        assert abs(bills[ref].amount_usd - expected) <= within
    assert bills["pod-2"].amount_usd > bills["pod-1"].amount_usd
    assert one["pod-2"].amount_usd >= bills["pod-2"].amount_usd


def test_billed_counts_an_old_pods_whole_bill_not_only_the_last_30_days(
    runpod: RunPodProvider, cloud: Cloud
) -> None:
    pod = cloud.fake.state.pods["pod-1"]
    began = datetime.fromisoformat(pod.started_at) - timedelta(days=40)
    pod.started_at = began.isoformat()
    billed = runpod.billed({"pod-1": began})["pod-1"]
    # unasked, RunPod answers the last 30 days: the first ten would be missing
    assert abs(billed.amount_usd - pod.bill_usd(billed.through)) <= Decimal("0.01")


def test_billed_counts_each_pod_from_its_own_registration(cloud: Cloud) -> None:
    pod = cloud.fake.state.pods["pod-2"]  # $3600/h: a dollar a second
    began = datetime.fromisoformat(pod.started_at) - timedelta(hours=5)
    pod.started_at = began.isoformat()
    registered = began + timedelta(hours=3, minutes=30)
    sent: list[httpx.Request] = []
    with cloud.client(event_hooks={"request": [sent.append]}) as client:
        runpod = RunPodProvider(client, KEY, f"{cloud.url}/graphql")
        alone = runpod.billed({"pod-2": registered})["pod-2"]
        beside = runpod.billed({"pod-2": registered, "pod-1": SINCE})["pod-2"]
    assert sent[0].url.params["startTime"] == f"{registered:%Y-%m-%dT%H:%M:%S}Z"
    assert sent[1].url.params["startTime"] == "2020-01-01T00:00:00Z"  # the earliest asked
    # from the start of the (UTC) day it was registered in: RunPod bills in the daily buckets
    # asked for; the same whatever else is asked about with it (the baseline read at
    # registration takes out what came before it)
    bucket = registered.replace(hour=0, minute=0, second=0, microsecond=0)
    for billed in (alone, beside):
        assert abs(billed.amount_usd - pod.bill_usd(billed.through, bucket)) <= Decimal(2)


def test_billed_of_a_pod_with_no_records_is_zero(runpod: RunPodProvider) -> None:
    assert runpod.billed(dict.fromkeys(["nope"], SINCE))["nope"].amount_usd == 0


def test_malformed_billing_is_retryable(runpod: RunPodProvider, cloud: Cloud) -> None:
    cloud.answer_next("malformed")
    with pytest.raises(ProviderError) as caught:
        runpod.billed(dict.fromkeys(["pod-1"], SINCE))
    assert caught.value.retryable and KEY not in str(caught.value)


def test_pods_lists_every_pod_of_the_account(runpod: RunPodProvider) -> None:
    runpod.stop("pod-1")
    listed = {pod.ref: pod.description for pod in runpod.pods()}
    assert set(listed) == {"pod-1", "pod-2"}
    assert listed["pod-1"].state is PodState.STOPPED
    assert listed["pod-2"].hourly_rate_usd == Decimal(3600)


def test_resume_sends_pod_resume_with_the_pods_gpu_count(cloud: Cloud) -> None:
    cloud.fake.state.pods["pod-1"].gpu_count = 2
    sent: list[httpx.Request] = []
    with cloud.client(event_hooks={"request": [sent.append]}) as client:
        runpod = RunPodProvider(client, KEY, f"{cloud.url}/graphql")
        assert isinstance(runpod, Resumes)
        runpod.stop("pod-1")
        result = runpod.resume("pod-1")
    assert result.outcome is CallOutcome.DONE and "2 GPUs" in result.detail, result
    body = json.loads(sent[-1].content)
    assert "podResume(input: {podId: $podId, gpuCount: $gpuCount})" in body["query"]
    assert body["variables"] == {"podId": "pod-1", "gpuCount": 2}
    assert cloud.mutations() == ["podStop", "podResume"]
    pod = cloud.fake.state.pods["pod-1"]
    assert pod.desired_status == "RUNNING" and pod.gpu_count == 2


def test_a_resumed_pod_runs_and_bills_again(runpod: RunPodProvider, cloud: Cloud) -> None:
    runpod.stop("pod-2")
    assert runpod.resume("pod-2").outcome is CallOutcome.DONE
    assert runpod.describe("pod-2").state is PodState.RUNNING
    pod = cloud.fake.state.pods["pod-2"]
    assert pod.stopped_at is None and len(pod.earlier_runs) == 1
    resumed_at = datetime.fromisoformat(pod.started_at)
    assert pod.bill_usd(resumed_at + timedelta(seconds=10)) > pod.bill_usd(resumed_at)


def test_resuming_a_running_pod_is_done_and_sends_nothing(
    runpod: RunPodProvider, cloud: Cloud
) -> None:
    result = runpod.resume("pod-1")
    assert result.outcome is CallOutcome.DONE and "already running" in result.detail
    assert cloud.mutations() == []


def test_resuming_a_pod_that_is_gone_is_permanent(runpod: RunPodProvider, cloud: Cloud) -> None:
    missing = runpod.resume("nope")
    assert missing.outcome is CallOutcome.PERMANENT and "no pod 'nope'" in missing.detail
    cloud.fake.state.pods["pod-1"].desired_status = "TERMINATED"
    terminated = runpod.resume("pod-1")
    assert terminated.outcome is CallOutcome.PERMANENT and "terminated" in terminated.detail
    assert cloud.mutations() == []


@pytest.mark.parametrize(
    ("answer", "outcome", "says"),
    [
        ("no-capacity", CallOutcome.PERMANENT, "not enough free GPUs on the host machine"),
        ("graphql:pod not found to resume", CallOutcome.PERMANENT, "no pod 'pod-1'"),
        ("graphql:Rate limit exceeded", CallOutcome.RETRYABLE, "Rate limit exceeded"),
        ("transient", CallOutcome.RETRYABLE, "Something went wrong. Please try again later"),
        ("429:9", CallOutcome.RETRYABLE, "retry after 9 s"),
        ("429", CallOutcome.RETRYABLE, "rate limited"),
        ("500", CallOutcome.RETRYABLE, "HTTP 500"),
        ("malformed", CallOutcome.RETRYABLE, "not JSON"),
        ("status:401", CallOutcome.PERMANENT, "HTTP 401"),
    ],
)
def test_failed_resumes_are_classified(
    runpod: RunPodProvider, cloud: Cloud, answer: str, outcome: CallOutcome, says: str
) -> None:
    runpod.stop("pod-1")
    cloud.answer_next("", answer)  # the pod is read, podResume fails
    result = runpod.resume("pod-1")
    assert result.outcome is outcome, result
    assert says in result.detail and KEY not in result.detail
    assert cloud.fake.state.pods["pod-1"].desired_status == "EXITED"
    assert runpod.resume("pod-1").outcome is CallOutcome.DONE  # the next try goes through


def test_a_pod_without_a_gpu_count_is_a_retryable_malformed_answer(
    runpod: RunPodProvider, cloud: Cloud
) -> None:
    runpod.stop("pod-1")
    cloud.fake.state.pods["pod-1"].gpu_count = "two"  # type: ignore[assignment]
    result = runpod.resume("pod-1")
    assert result.outcome is CallOutcome.RETRYABLE and "gpuCount" in result.detail
    assert cloud.mutations() == ["podStop"]


def test_a_stop_survives_runpods_transient_failure(runpod: RunPodProvider, cloud: Cloud) -> None:
    cloud.answer_next("", "transient", "transient")  # the read, then podStop twice
    first, second = runpod.stop("pod-1"), runpod.stop("pod-1")
    assert first.outcome is second.outcome is CallOutcome.RETRYABLE, (first, second)
    assert runpod.stop("pod-1").outcome is CallOutcome.DONE
    assert cloud.fake.state.pods["pod-1"].desired_status == "EXITED"


def test_an_undocumented_status_is_never_read_as_running_or_stopped(
    runpod: RunPodProvider, cloud: Cloud
) -> None:
    cloud.fake.state.pods["pod-1"].desired_status = "HIBERNATING"
    described = runpod.describe("pod-1")
    assert (described.state, described.provider_state) == (PodState.RUNNING, "HIBERNATING")
    assert described.state_known is False
    assert runpod.pods()[0].description.state_known is False
    stopped, resumed = runpod.stop("pod-1"), runpod.resume("pod-1")
    assert stopped.outcome is CallOutcome.PENDING and resumed.outcome is CallOutcome.RETRYABLE
    assert stopped.provider_state == resumed.provider_state == "HIBERNATING"
    assert not stopped.state_known and not resumed.state_known
    assert cloud.mutations() == []  # neither podStop nor a resume is sent
    cloud.fake.state.pods["pod-1"].desired_status = "RUNNING"
    assert runpod.describe("pod-1").state_known
    assert runpod.stop("pod-1").outcome is CallOutcome.DONE


def test_a_pod_with_only_a_container_disk_cannot_be_preserved(
    runpod: RunPodProvider, cloud: Cloud
) -> None:
    assert runpod.describe("pod-1").cannot_preserve is None  # a 20 GB volume disk survives
    cloud.fake.state.pods["pod-1"].volume_in_gb = 0
    said = runpod.describe("pod-1").cannot_preserve
    assert said is not None and "erases its container disk" in said


def test_a_spot_pod_resumes_with_a_bid_per_gpu(cloud: Cloud) -> None:
    pod = cloud.fake.state.pods["pod-1"]
    pod.pod_type, pod.gpu_count = SPOT, 2
    sent: list[httpx.Request] = []
    with cloud.client(event_hooks={"request": [sent.append]}) as client:
        runpod = RunPodProvider(client, KEY, f"{cloud.url}/graphql")
        runpod.stop("pod-1")
        result = runpod.resume("pod-1")
    assert result.outcome is CallOutcome.DONE and "podBidResume" in result.detail, result
    assert json.loads(sent[-1].content)["variables"] == {
        "podId": "pod-1",
        "bidPerGpu": 0.22,
        "gpuCount": 2,
    }
    assert cloud.mutations() == ["podStop", "podBidResume"]
    assert pod.desired_status == "RUNNING" and pod.bid_per_gpu == 0.22


def test_a_spot_pod_with_no_rate_to_bid_is_permanent(runpod: RunPodProvider, cloud: Cloud) -> None:
    pod = cloud.fake.state.pods["pod-1"]
    runpod.stop("pod-1")
    pod.pod_type, pod.cost_per_hr = SPOT, "0"
    result = runpod.resume("pod-1")
    assert result.outcome is CallOutcome.PERMANENT and "no rate to bid on" in result.detail
    assert cloud.mutations() == ["podStop"]


def test_an_on_demand_resume_is_refused_for_a_spot_pod_by_the_fake(cloud: Cloud) -> None:
    cloud.fake.state.pods["pod-1"].pod_type = SPOT
    body = {"query": RESUME_MUTATION, "variables": {"podId": "pod-1", "gpuCount": 1}}
    answer = cloud.post(f"{cloud.url}/graphql", params={"api_key": KEY}, json=body).json()
    assert "podResume cannot resume a INTERRUPTABLE pod" in answer["errors"][0]["message"]
