"""The Lambda Cloud adapter against the fake Lambda cloud, over real HTTP on a thread.

Lambda can only terminate, so the adapter must read the price in whole cents exactly, say
which filesystems are attached and where, refuse to terminate unless the named filesystem
is attached (sending nothing), never send a second terminate, and classify Lambda's errors
by their code; listing reads the filesystems once for every instance. The key never appears
in an error or a log line.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path

import httpx
import pytest

from governor.adapters.providers.lambda_cloud import STOP_LATENCY_S, LambdaProvider
from governor.domain.model import PodState
from governor.domain.ports import (
    CallOutcome,
    ListsPods,
    ProviderError,
    StopsPreserving,
    TerminateOnly,
)
from governor.fakes.http_cloud import HOLD, FakeRequest, Reply, now, running
from governor.fakes.lambda_cloud import FakeLambda
from tests.fake_clouds import TIMEOUT_S, Served

KEY = "secret_UNIT_TEST_LAMBDA_KEY_0123456789"
TERMINATE = "POST /api/v1/instance-operations/terminate"


class Cloud(Served[FakeLambda]):
    def terminates_sent(self) -> list[str]:
        """Terminate requests that reached the cloud, canned answers included."""
        return [call for call in self.fake.calls() if call == TERMINATE]

    def status(self, ref: str) -> str:
        return self.fake.state.instances[ref].status

    def adapter(self, client: httpx.Client, key: str = KEY) -> LambdaProvider:
        return LambdaProvider(client, key, f"{self.url}/api/v1")


@contextmanager
def served(fake: FakeLambda) -> Iterator[Cloud]:
    fake.add_pod("inst-1", "0.44")  # "ckpts" attached at Lambda's default mount point
    fake.add_instance("inst-2", 1592, filesystems={"ckpts": None, "data": "/data/set"})
    fake.add_instance("bare", 329)
    with running(fake) as server:
        yield Cloud(fake, server.url)


@pytest.fixture
def cloud(tmp_path: Path) -> Iterator[Cloud]:
    with served(FakeLambda(tmp_path / "lambda.json", KEY)) as cloud:
        yield cloud


@pytest.fixture
def lam(cloud: Cloud) -> Iterator[LambdaProvider]:
    with cloud.client() as client:
        yield cloud.adapter(client)


def terminate_until_done(lam: LambdaProvider, ref: str) -> None:
    for _ in range(5):
        result = lam.terminate(ref, keep="ckpts")
        assert result.outcome in (CallOutcome.DONE, CallOutcome.PENDING), result
        if result.outcome is CallOutcome.DONE:
            return
    raise AssertionError(f"{ref} never finished terminating")


def test_it_can_only_terminate(lam: LambdaProvider) -> None:
    assert isinstance(lam, TerminateOnly) and not isinstance(lam, StopsPreserving)
    assert isinstance(lam, ListsPods)
    assert not hasattr(lam, "stop")
    assert lam.stop_latency_s == STOP_LATENCY_S


def test_describe_turns_whole_cents_into_exact_dollars(lam: LambdaProvider) -> None:
    rates = {ref: lam.describe(ref).hourly_rate_usd for ref in ("inst-1", "inst-2", "bare")}
    assert rates == {"inst-1": Decimal("0.44"), "inst-2": Decimal("15.92"), "bare": Decimal("3.29")}
    assert all(isinstance(rate, Decimal) for rate in rates.values())
    assert str(rates["inst-2"]) == "15.92"  # not 15.9199999... as a float would give


def test_describe_maps_filesystems_to_their_mounts_and_sizes(cloud: Cloud) -> None:
    cloud.fake.state.filesystems["data"].bytes_used = 3 * 2**29  # 1.5 GiB
    with cloud.client() as client:
        lam = LambdaProvider(
            client, KEY, f"{cloud.url}/api/v1", filesystem_usd_per_gib_month=Decimal("0.07")
        )
        described = lam.describe("inst-2")
    assert described.state is PodState.RUNNING
    assert described.filesystems == {"ckpts": "/lambda/nfs/ckpts", "data": "/data/set"}
    assert described.storage is not None
    assert described.storage.gb == Decimal("41.5")  # GiB, Lambda's unit: 40 + 1.5
    assert described.storage.usd_per_gb_month == Decimal("0.07")
    assert described.storage.stopped_usd_per_gb_month == Decimal("0.07")  # bills on after
    assert described.cannot_preserve is None


def test_the_filesystem_rate_defaults_to_lambdas_example_price(lam: LambdaProvider) -> None:
    storage = lam.describe("inst-1").storage
    assert storage is not None and storage.gb == Decimal(40)
    assert storage.usd_per_gb_month == storage.stopped_usd_per_gb_month == Decimal("0.20")


def test_a_mount_lambda_leaves_out_is_at_its_default_path(
    lam: LambdaProvider, cloud: Cloud
) -> None:
    cloud.fake.state.instances["inst-2"].file_system_mounts = []
    assert lam.describe("inst-2").filesystems == {
        "ckpts": "/lambda/nfs/ckpts",
        "data": "/lambda/nfs/data",
    }


def test_an_instance_without_filesystems_keeps_nothing(lam: LambdaProvider, cloud: Cloud) -> None:
    described = lam.describe("bare")
    assert described.filesystems == {}
    assert described.storage is not None and described.storage.gb == 0
    assert described.cannot_preserve is not None and "no filesystem" in described.cannot_preserve
    assert "GET /api/v1/file-systems" not in cloud.fake.calls()


def test_a_filesystem_lambda_has_not_sized_leaves_storage_unsaid(
    lam: LambdaProvider, cloud: Cloud
) -> None:
    cloud.fake.state.filesystems["data"].bytes_used = None
    described = lam.describe("inst-2")
    assert described.storage is None
    assert set(described.filesystems) == {"ckpts", "data"}


@pytest.mark.parametrize(
    ("status", "state"),
    [
        ("booting", PodState.RUNNING),
        ("active", PodState.RUNNING),
        ("unhealthy", PodState.RUNNING),
        ("terminating", PodState.STOPPING),
        ("terminated", PodState.GONE),
        ("preempted", PodState.GONE),
    ],
)
def test_lambda_statuses_map_to_pod_states(
    lam: LambdaProvider, cloud: Cloud, status: str, state: PodState
) -> None:
    cloud.fake.add_instance("x", 100, status=status)
    assert lam.describe("x").state is state


def test_an_undocumented_status_is_neither_running_nor_terminated(
    lam: LambdaProvider, cloud: Cloud
) -> None:
    cloud.fake.add_instance("x", 100, filesystems={"ckpts": None}, status="hibernating")
    described = lam.describe("x")
    assert (described.state, described.provider_state) == (PodState.RUNNING, "hibernating")
    assert described.state_known is False
    result = lam.terminate("x", keep="ckpts")
    assert result.outcome is CallOutcome.PENDING and not result.state_known
    assert result.provider_state == "hibernating"
    assert cloud.terminates_sent() == []
    cloud.fake.state.instances["x"].status = "active"
    assert lam.describe("x").state_known


def test_describe_of_an_unknown_instance_is_a_permanent_error(lam: LambdaProvider) -> None:
    with pytest.raises(ProviderError, match="no instance 'nope'") as caught:
        lam.describe("nope")
    assert caught.value.retryable is False


def test_describe_fails_retryably_when_the_filesystems_do_not_answer(
    lam: LambdaProvider, cloud: Cloud
) -> None:
    cloud.answer_next("", "500")
    with pytest.raises(ProviderError, match="HTTP 500") as caught:
        lam.describe("inst-2")
    assert caught.value.retryable


def test_terminate_sends_one_terminate_and_keeps_the_filesystem(
    lam: LambdaProvider, cloud: Cloud
) -> None:
    first = lam.terminate("inst-1", keep="ckpts")
    assert first.outcome is CallOutcome.PENDING and "'ckpts' kept" in first.detail
    assert cloud.fake.state.terminate_calls[0]["instance_ids"] == ["inst-1"]
    again = lam.terminate("inst-1", keep="ckpts")
    assert again.outcome is CallOutcome.DONE and "already terminated" in again.detail
    assert cloud.terminates_sent() == [TERMINATE]  # the second call read the state and stopped
    assert lam.describe("inst-1").state is PodState.GONE
    assert "ckpts" in cloud.fake.state.filesystems


def test_the_bill_stops_when_the_instance_is_terminated(lam: LambdaProvider, cloud: Cloud) -> None:
    lam.terminate("inst-2", keep="ckpts")
    instance = cloud.fake.state.instances["inst-2"]
    assert instance.terminated_at is not None
    ended = datetime.fromisoformat(instance.terminated_at)
    assert instance.bill_usd(ended + timedelta(hours=1)) == instance.bill_usd(ended) > 0


@pytest.mark.parametrize(
    ("ref", "keep", "attached"),
    [
        ("inst-2", "scratch", "'ckpts', 'data'"),
        ("bare", "ckpts", "none"),
        ("inst-1", "", "'ckpts'"),
    ],
)
def test_terminate_refuses_unless_the_named_filesystem_is_attached(
    lam: LambdaProvider, cloud: Cloud, ref: str, keep: str, attached: str
) -> None:
    result = lam.terminate(ref, keep=keep)
    assert result.outcome is CallOutcome.PERMANENT, result
    assert f"filesystem {keep!r} is not attached" in result.detail
    assert f"(attached: {attached})" in result.detail
    assert cloud.terminates_sent() == []
    assert cloud.status(ref) == "active"


def test_a_terminating_instance_is_pending_without_a_second_terminate(tmp_path: Path) -> None:
    with (
        served(FakeLambda(tmp_path / "lambda.json", KEY, terminate_delay_s=3600)) as cloud,
        cloud.client() as client,
    ):
        lam = cloud.adapter(client)
        assert lam.terminate("inst-1", keep="ckpts").outcome is CallOutcome.PENDING
        again = lam.terminate("inst-1", keep="ckpts")
        assert again.outcome is CallOutcome.PENDING and "already terminating" in again.detail
        assert lam.describe("inst-1").state is PodState.STOPPING
        assert cloud.terminates_sent() == [TERMINATE]


@pytest.mark.parametrize("status", ["terminated", "preempted"])
def test_an_instance_already_gone_is_done_without_a_terminate(
    lam: LambdaProvider, cloud: Cloud, status: str
) -> None:
    cloud.fake.add_instance("x", 100, filesystems={"ckpts": None}, status=status)
    result = lam.terminate("x", keep="ckpts")
    assert result.outcome is CallOutcome.DONE and status in result.detail
    assert cloud.terminates_sent() == []


def test_an_unknown_instance_is_done_without_a_terminate(lam: LambdaProvider, cloud: Cloud) -> None:
    result = lam.terminate("nope", keep="ckpts")
    assert result.outcome is CallOutcome.DONE and "gone" in result.detail
    assert cloud.terminates_sent() == []


def test_terminate_answering_no_such_instance_is_done(lam: LambdaProvider, cloud: Cloud) -> None:
    cloud.answer_next("", "code:404:global/object-does-not-exist")
    assert lam.terminate("inst-1", keep="ckpts").outcome is CallOutcome.DONE


class Racing(FakeLambda):
    """Someone else terminates inst-1 between the adapter's read and its terminate."""

    def handle(self, request: FakeRequest) -> Reply:
        instance = self.state.instances["inst-1"]
        if request.path.endswith("/terminate") and instance.status == "active":
            instance.status = "terminating"
            instance.terminated_at = (now() + timedelta(seconds=self.terminate_delay_s)).isoformat()
        return super().handle(request)


@pytest.mark.parametrize(("delay_s", "outcome"), [(0, CallOutcome.DONE), (60, CallOutcome.PENDING)])
def test_a_terminate_racing_another_is_read_from_its_answer(
    tmp_path: Path, delay_s: float, outcome: CallOutcome
) -> None:
    """Lambda documents no conflict for a terminate: one that comes after another answers
    the instance terminating, or that it does not exist once terminated."""
    with (
        served(Racing(tmp_path / "lambda.json", KEY, terminate_delay_s=delay_s)) as cloud,
        cloud.client() as client,
    ):
        result = cloud.adapter(client).terminate("inst-1", keep="ckpts")
        assert result.outcome is outcome, result
        assert cloud.fake.calls() == ["GET /api/v1/instances/inst-1", TERMINATE]


def test_a_conflict_on_a_running_instance_is_retryable(lam: LambdaProvider, cloud: Cloud) -> None:
    cloud.answer_next("", "code:409:global/conflict")
    result = lam.terminate("inst-1", keep="ckpts")
    assert result.outcome is CallOutcome.RETRYABLE and "global/conflict" in result.detail
    assert cloud.status("inst-1") == "active"
    terminate_until_done(lam, "inst-1")


@pytest.mark.parametrize("on_terminate", [False, True], ids=["on-read", "on-terminate"])
@pytest.mark.parametrize(
    ("answer", "outcome", "says"),
    [
        ("429", CallOutcome.RETRYABLE, "rate limited"),
        ("429:9", CallOutcome.RETRYABLE, "retry after 9 s"),
        ("500", CallOutcome.RETRYABLE, "HTTP 500"),
        (HOLD, CallOutcome.RETRYABLE, "timed out"),
        ("malformed", CallOutcome.RETRYABLE, "not JSON"),
        # Lambda's code decides, whatever the status says:
        ("code:500:global/internal-error", CallOutcome.RETRYABLE, "global/internal-error"),
        ("code:400:provider/internal-unavailable", CallOutcome.RETRYABLE, "provider/internal"),
        ("code:429:global/quota-exceeded", CallOutcome.RETRYABLE, "rate limited"),
        ("code:400:global/quota-exceeded", CallOutcome.PERMANENT, "global/quota-exceeded"),
        ("code:403:global/forbidden", CallOutcome.PERMANENT, "global/forbidden"),
        ("code:403:global/account-inactive", CallOutcome.PERMANENT, "global/account-inactive"),
        ("code:503:global/invalid-api-key", CallOutcome.PERMANENT, "global/invalid-api-key"),
        ("code:400:global/invalid-parameters", CallOutcome.PERMANENT, "invalid-parameters"),
        # the generic not-found is what a wrong path answers: never read as "already gone"
        ("code:404:global/not-found", CallOutcome.PERMANENT, "global/not-found"),
    ],
)
def test_failures_are_classified(
    lam: LambdaProvider,
    cloud: Cloud,
    on_terminate: bool,
    answer: str,
    outcome: CallOutcome,
    says: str,
) -> None:
    cloud.answer_next(*([""] if on_terminate else []), answer)
    result = lam.terminate("inst-1", keep="ckpts")
    assert result.outcome is outcome, result
    assert says in result.detail
    assert KEY not in result.detail
    if on_terminate and answer == HOLD:
        cloud.release()  # the late answer lands before the next try
    terminate_until_done(lam, "inst-1")  # the next tries go through
    assert len(cloud.fake.state.terminate_calls) == 1  # one terminate reached the instance


def test_429_on_describe_carries_the_delay(lam: LambdaProvider, cloud: Cloud) -> None:
    cloud.answer_next("429:4")
    with pytest.raises(ProviderError) as caught:
        lam.describe("inst-1")
    assert caught.value.retryable and caught.value.retry_after_s == 4.0


def test_a_wrong_path_is_not_a_gone_instance(cloud: Cloud) -> None:
    with cloud.client() as client:
        lam = LambdaProvider(client, KEY, f"{cloud.url}/api/v2")
        result = lam.terminate("inst-1", keep="ckpts")
    assert result.outcome is CallOutcome.PERMANENT and "global/not-found" in result.detail


def test_a_wrong_key_is_permanent_and_never_echoed(cloud: Cloud) -> None:
    wrong = "secret_WRONG_LAMBDA_KEY_987"
    with cloud.client() as client:
        result = cloud.adapter(client, wrong).terminate("inst-1", keep="ckpts")
    assert result.outcome is CallOutcome.PERMANENT and "global/invalid-api-key" in result.detail
    assert wrong not in result.detail
    assert cloud.terminates_sent() == [] and cloud.status("inst-1") == "active"


def test_the_fake_takes_the_key_as_a_basic_username_too(cloud: Cloud) -> None:
    answer = httpx.get(f"{cloud.url}/api/v1/instances/inst-1", auth=(KEY, ""), timeout=TIMEOUT_S)
    assert answer.status_code == 200
    assert answer.json()["data"]["instance_type"]["price_cents_per_hour"] == 44


def test_the_fake_prices_in_whole_cents_and_keeps_its_state(tmp_path: Path) -> None:
    fake = FakeLambda(tmp_path / "lambda.json")
    with pytest.raises(ValueError, match="whole cents"):
        fake.add_pod("x", "0.445")
    fake.add_pod("y", "1.29")
    restored = FakeLambda(tmp_path / "lambda.json")
    assert restored.state.instances["y"].price_cents_per_hour == 129
    assert restored.state.instances["y"].file_system_names == ["ckpts"]


def test_no_log_line_carries_the_key(
    lam: LambdaProvider, cloud: Cloud, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    cloud.answer_next("429", "500", "malformed", "code:401:global/invalid-api-key")
    for _ in range(4):
        lam.terminate("inst-1", keep="ckpts")
    lam.describe("inst-2")
    terminate_until_done(lam, "inst-1")
    assert caplog.records, "expected the HTTP client to log its requests"
    assert KEY not in caplog.text


def test_pods_lists_every_instance_reading_the_filesystems_once(
    lam: LambdaProvider, cloud: Cloud
) -> None:
    cloud.fake.add_instance("leaving", 100, filesystems={"ckpts": None}, status="terminating")
    cloud.fake.add_instance("gone", 100, filesystems={"ckpts": None}, status="terminated")
    listed = {pod.ref: pod.description for pod in lam.pods()}
    assert cloud.fake.calls() == ["GET /api/v1/instances", "GET /api/v1/file-systems"]
    assert set(listed) == {"inst-1", "inst-2", "bare", "leaving"}  # Lambda lists no terminated
    assert listed["leaving"].state is PodState.STOPPING
    assert listed["inst-2"].hourly_rate_usd == Decimal("15.92")
    assert listed["inst-2"].filesystems == {"ckpts": "/lambda/nfs/ckpts", "data": "/data/set"}
    assert listed["bare"].cannot_preserve is not None
    assert listed == {ref: lam.describe(ref) for ref in listed}


def test_pods_without_filesystems_does_not_read_them(lam: LambdaProvider, cloud: Cloud) -> None:
    for instance in cloud.fake.state.instances.values():
        instance.file_system_names, instance.file_system_mounts = [], []
    listed = lam.pods()
    assert [pod.ref for pod in listed] == ["inst-1", "inst-2", "bare"]
    assert all(pod.description.filesystems == {} for pod in listed)
    assert cloud.fake.calls() == ["GET /api/v1/instances"]


@pytest.mark.parametrize(
    ("answers", "retryable", "says"),
    [
        (["429:3"], True, "retry after 3 s"),
        (["", "500"], True, "HTTP 500"),  # the filesystems fail
        (["code:400:global/quota-exceeded"], False, "global/quota-exceeded"),
        (["code:503:provider/internal-unavailable"], True, "provider/internal-unavailable"),
        (["code:403:global/account-inactive"], False, "global/account-inactive"),
    ],
)
def test_failed_lists_are_classified(
    lam: LambdaProvider, cloud: Cloud, answers: list[str], retryable: bool, says: str
) -> None:
    cloud.answer_next(*answers)
    with pytest.raises(ProviderError, match=says) as caught:
        lam.pods()
    assert caught.value.retryable is retryable


def test_a_malformed_list_is_retryable_and_never_echoed(lam: LambdaProvider, cloud: Cloud) -> None:
    one = json.dumps({"data": {"id": "inst-1", "jupyter_token": "jupyter-token-inst-1"}})
    cloud.answer_next(f"body:{one}")
    with pytest.raises(ProviderError, match="malformed instance list") as caught:
        lam.pods()
    assert caught.value.retryable and "jupyter-token" not in str(caught.value)


def test_listing_with_a_wrong_key_is_permanent_and_never_echoed(cloud: Cloud) -> None:
    wrong = "secret_WRONG_LAMBDA_KEY_987"
    with (
        cloud.client() as client,
        pytest.raises(ProviderError, match="global/invalid-api-key") as caught,
    ):
        cloud.adapter(client, wrong).pods()
    assert caught.value.retryable is False and caught.value.status == 401
    assert wrong not in str(caught.value)


def test_a_price_that_is_not_a_number_is_retryable(lam: LambdaProvider, cloud: Cloud) -> None:
    cloud.fake.state.instances["inst-1"].price_cents_per_hour = "lots"  # type: ignore[assignment]
    with pytest.raises(ProviderError, match="non-number") as caught:
        lam.describe("inst-1")
    assert caught.value.retryable and "lots" in str(caught.value)
    assert "jupyter-token-inst-1" not in str(caught.value)
