"""The GCP adapter against the fake Compute Engine project, over real HTTP on a thread.

Every answer the real API can give the adapter: a VM, its machine type priced from the
table (Spot too), its persistent disks, every VM of the project listed page by page, no
such VM, a VM stopping or already stopped, a stop that is accepted but not finished, a
start that is accepted, a zone without the capacity to start a VM, a failed Operation (at
once, or read later with zoneOperations.get), a status Compute Engine does not document, a
state conflict, 403 rateLimitExceeded, 429 with and without Retry-After, 5xx, a timeout and
a body that is not JSON, with a static token (google-auth's credentials: test_gcp_auth.py).
Whatever happens, no DELETE is ever sent and no token appears in
an error or a log line.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path

import httpx
import pytest

from governor.adapters.providers.gcp import (
    STATES,
    STOP_LATENCY_S,
    GcpProvider,
    StaticToken,
)
from governor.domain.model import PodState
from governor.domain.ports import CallOutcome, Locates, ProviderError, Resumes
from governor.fakes.gcp import TOKEN_PATH, FakeGcp
from governor.fakes.http_cloud import HOLD, FakeRequest, now, running
from tests.contract.conformance import SPECS
from tests.fake_clouds import TIMEOUT_S, Served

TOKEN = "ya29.UNIT_TEST_SECRET_0123456789"
PROJECT = "unit-project"
RATES = {
    "a2-highgpu-1g": Decimal("3.67"),
    "a2-highgpu-1g:spot": Decimal("1.47"),
    "n1-standard-8": Decimal("0.38"),
    "nvidia-tesla-t4": Decimal("0.35"),
}
POD = "us-central1-a/pod-1"
CENT = Decimal("0.01")


class Cloud(Served[FakeGcp]):
    def stops(self) -> list[str]:
        return [call for call in self.fake.calls("POST") if call.endswith("/stop")]

    def starts(self) -> list[str]:
        return [call for call in self.fake.calls("POST") if call.endswith("/start")]

    def status(self, ref: str = POD) -> str:
        return self.fake.state.instances[ref].status(now())


@pytest.fixture
def cloud(tmp_path: Path) -> Iterator[Cloud]:
    fake = FakeGcp(tmp_path / "gcp.json", TOKEN, project=PROJECT)
    fake.add_pod(POD, "3.67", disks=[("pd-balanced", 100), ("pd-ssd", 300)], local_ssds=1)
    fake.add_pod("us-central1-a/spot-1", "1.47", spot=True)
    fake.add_pod(
        "us-east1-b/n1-gpu",
        "1.08",
        machine_type="n1-standard-8",
        accelerators={"nvidia-tesla-t4": 2},
    )
    fake.add_pod(
        "us-central1-a/unpriced",
        "9",
        machine_type="a3-highgpu-8g",
        disks=[("hyperdisk-balanced", 500)],
    )
    with running(fake) as server:
        yield Cloud(fake, server.url)
    assert fake.calls("DELETE") == []


@pytest.fixture
def client(cloud: Cloud) -> Iterator[httpx.Client]:
    with cloud.client() as client:
        yield client


@pytest.fixture
def gcp(cloud: Cloud, client: httpx.Client) -> GcpProvider:
    return GcpProvider(client, StaticToken(TOKEN), PROJECT, f"{cloud.url}/compute/v1", rates=RATES)


# describe --------------------------------------------------------------------------------


def test_describe_prices_the_machine_type_and_its_disks(gcp: GcpProvider) -> None:
    pod = gcp.describe(POD)
    assert pod.state is PodState.RUNNING
    assert pod.hourly_rate_usd == Decimal("3.67")
    # 100 GiB pd-balanced at 0.10, 300 GiB pd-ssd at 0.17 and the 375 GiB local SSD the stop
    # keeps at 0.08
    assert pod.storage is not None and pod.storage.gb == Decimal(775)
    assert (pod.storage.usd_per_gb_month * pod.storage.gb).quantize(CENT) == Decimal("91.00")
    assert pod.storage.stopped_usd_per_gb_month == pod.storage.usd_per_gb_month
    assert gcp.stop_latency_s == STOP_LATENCY_S == 90.0


def test_a_spot_vm_gets_its_spot_rate(gcp: GcpProvider) -> None:
    assert gcp.describe("us-central1-a/spot-1").hourly_rate_usd == Decimal("1.47")


def test_a_preemptible_vm_without_a_spot_entry_gets_the_on_demand_rate(
    cloud: Cloud, client: httpx.Client
) -> None:
    on_demand_only = {"a2-highgpu-1g": Decimal("3.67")}
    gcp = GcpProvider(
        client, StaticToken(TOKEN), PROJECT, f"{cloud.url}/compute/v1", rates=on_demand_only
    )
    assert gcp.describe("us-central1-a/spot-1").hourly_rate_usd == Decimal("3.67")


def test_gpus_attached_to_a_general_purpose_vm_are_added(gcp: GcpProvider) -> None:
    assert gcp.describe("us-east1-b/n1-gpu").hourly_rate_usd == Decimal("0.38") + 2 * Decimal(
        "0.35"
    )


def test_a_machine_type_not_in_the_table_has_no_rate(gcp: GcpProvider) -> None:
    pod = gcp.describe("us-central1-a/unpriced")
    assert pod.hourly_rate_usd is None
    # an unknown disk type is priced as pd-balanced
    assert pod.storage is not None and pod.storage.usd_per_gb_month == Decimal("0.10")


def test_disk_rates_can_be_overridden(cloud: Cloud, client: httpx.Client) -> None:
    rates = {"pd-balanced": Decimal("0.12"), "hyperdisk-balanced": Decimal("0.08")}
    gcp = GcpProvider(
        client, StaticToken(TOKEN), PROJECT, f"{cloud.url}/compute/v1", disk_rates=rates
    )
    storage = gcp.describe("us-central1-a/unpriced").storage
    assert storage is not None and storage.usd_per_gb_month == Decimal("0.08")
    storage = gcp.describe(POD).storage
    assert storage is not None
    assert (storage.usd_per_gb_month * storage.gb).quantize(CENT) == Decimal("93.00")


def test_describe_of_an_unknown_instance_is_a_permanent_error(gcp: GcpProvider) -> None:
    with pytest.raises(ProviderError, match="no such instance") as caught:
        gcp.describe("us-central1-a/nope")
    assert caught.value.retryable is False and caught.value.status == 404


@pytest.mark.parametrize("ref", ["pod-1", "us-central1-a/", "/pod-1", "a/b/c", "us/Pod_1?x"])
def test_a_malformed_ref_says_the_expected_form(gcp: GcpProvider, cloud: Cloud, ref: str) -> None:
    with pytest.raises(ProviderError, match="'<zone>/<instance-name>'") as caught:
        gcp.describe(ref)
    assert caught.value.retryable is False
    result = gcp.stop(ref)
    assert result.outcome is CallOutcome.PERMANENT and "<zone>/<instance-name>" in result.detail
    assert cloud.fake.calls() == []


# stop ------------------------------------------------------------------------------------


def test_stop_is_pending_until_the_vm_is_terminated(gcp: GcpProvider, cloud: Cloud) -> None:
    cloud.fake.stop_delay_s = 3600
    first = gcp.stop(POD)
    assert first.outcome is CallOutcome.PENDING and "not TERMINATED yet" in first.detail
    assert cloud.status() == "STOPPING"
    assert gcp.describe(POD).state is PodState.STOPPING
    again = gcp.stop(POD)
    assert again.outcome is CallOutcome.PENDING
    assert len(cloud.stops()) == 1  # STOPPING: nothing sent again
    cloud.fake.state.instances[POD].stopped_at = now().isoformat()  # it finishes stopping
    done = gcp.stop(POD)
    assert done.outcome is CallOutcome.DONE and "already stopped" in done.detail
    assert gcp.describe(POD).state is PodState.STOPPED
    assert len(cloud.stops()) == 1


def test_stop_keeps_local_ssds_and_sends_a_request_id(gcp: GcpProvider, cloud: Cloud) -> None:
    assert gcp.stop(POD).outcome is CallOutcome.PENDING
    (operation,) = cloud.fake.state.operations.values()
    assert operation.type == "stop" and operation.discard_local_ssd == "false"
    assert operation.request_id and len(operation.request_id) == 36
    assert gcp.stop(POD).outcome is CallOutcome.DONE
    assert len(cloud.stops()) == 1


def test_the_operation_is_done_once_the_vm_is_terminated(cloud: Cloud) -> None:
    cloud.fake.stop_delay_s = 3600
    headers = {"Authorization": f"Bearer {TOKEN}"}
    url = f"{cloud.url}/compute/v1/projects/{PROJECT}/zones/us-central1-a/instances/pod-1/stop"
    operation = cloud.post(url, params={"discardLocalSsd": "false"}, headers=headers).json()
    assert operation["kind"] == "compute#operation" and operation["status"] == "RUNNING"
    cloud.fake.state.instances[POD].stopped_at = now().isoformat()
    read = httpx.get(
        operation["selfLink"].replace("https://www.googleapis.com", cloud.url),
        headers=headers,
        timeout=TIMEOUT_S,
    ).json()
    assert read["status"] == "DONE" and read["name"] == operation["name"]


def test_the_fake_refuses_a_stop_that_does_not_say_what_to_do_with_local_ssds(
    cloud: Cloud,
) -> None:
    url = f"{cloud.url}/compute/v1/projects/{PROJECT}/zones/us-central1-a/instances/pod-1/stop"
    answer = cloud.post(url, headers={"Authorization": f"Bearer {TOKEN}"})
    assert answer.status_code == 400 and answer.json()["error"]["errors"][0]["reason"]
    assert cloud.status() == "RUNNING"


def test_the_fake_records_a_delete_so_its_absence_means_something(tmp_path: Path) -> None:
    fake = FakeGcp(tmp_path / "gcp.json", TOKEN, project=PROJECT)
    fake.add_pod(POD, "3.67")
    path = f"/compute/v1/projects/{PROJECT}/zones/us-central1-a/instances/pod-1"
    auth = {"authorization": f"Bearer {TOKEN}"}
    reply = fake.serve_request(FakeRequest("DELETE", path, {}, auth, None))
    assert reply.status == 200 and reply.body["operationType"] == "delete"
    assert fake.calls("DELETE") == [f"DELETE {path}"]
    assert fake.state.instances == {} and fake.state.disks == {}  # the boot disk went too


def test_the_bill_stops_when_the_vm_is_terminated(gcp: GcpProvider, cloud: Cloud) -> None:
    gcp.stop(POD)
    instance = cloud.fake.state.instances[POD]
    assert instance.stopped_at is not None
    stopped_at = datetime.fromisoformat(instance.stopped_at)
    assert instance.bill_usd(stopped_at + timedelta(hours=1)) == instance.bill_usd(stopped_at)
    assert instance.bill_usd(stopped_at) > 0


def test_stopping_an_unknown_instance_is_done(gcp: GcpProvider, cloud: Cloud) -> None:
    result = gcp.stop("us-central1-a/nope")
    assert result.outcome is CallOutcome.DONE and "gone" in result.detail
    assert cloud.stops() == []


def test_an_instance_deleted_before_the_stop_arrives_is_done(cloud: Cloud, tmp_path: Path) -> None:
    def delete_on_stop(request: httpx.Request) -> None:
        if request.url.path.endswith("/stop"):
            del cloud.fake.state.instances[POD]

    with cloud.client(event_hooks={"request": [delete_on_stop]}) as client:
        gcp = GcpProvider(client, StaticToken(TOKEN), PROJECT, f"{cloud.url}/compute/v1")
        result = gcp.stop(POD)
    assert result.outcome is CallOutcome.DONE and "gone" in result.detail


def test_a_404_that_does_not_name_the_instance_is_not_done(
    cloud: Cloud, client: httpx.Client
) -> None:
    """A wrong project or zone is a mistake to report, not a VM that is gone."""
    gcp = GcpProvider(client, StaticToken(TOKEN), "other-project", f"{cloud.url}/compute/v1")
    result = gcp.stop(POD)
    assert result.outcome is CallOutcome.PERMANENT
    assert "projects/other-project' was not found" in result.detail


def test_a_conflict_after_the_vm_stopped_meanwhile_is_done(cloud: Cloud) -> None:
    def stopped_meanwhile(request: httpx.Request) -> None:
        if request.url.path.endswith("/stop"):
            cloud.fake.state.instances[POD].stopped_at = now().isoformat()

    cloud.answer_next("", "status:409")
    with cloud.client(event_hooks={"request": [stopped_meanwhile]}) as client:
        gcp = GcpProvider(client, StaticToken(TOKEN), PROJECT, f"{cloud.url}/compute/v1")
        result = gcp.stop(POD)
    assert result.outcome is CallOutcome.DONE and "already stopped" in result.detail


def test_a_vm_not_ready_to_stop_is_retryable(gcp: GcpProvider, cloud: Cloud) -> None:
    cloud.answer_next("", "reason:400:resourceNotReady")
    result = gcp.stop(POD)
    assert result.outcome is CallOutcome.RETRYABLE and "wrong state" in result.detail
    assert cloud.fake.calls("GET")[-1].endswith("/instances/pod-1")  # it re-read the VM
    assert gcp.stop(POD).outcome is CallOutcome.PENDING


@pytest.mark.parametrize(
    ("code", "outcome"),
    [
        ("RESOURCE_OPERATION_RATE_EXCEEDED", CallOutcome.RETRYABLE),
        ("RESOURCE_NOT_READY", CallOutcome.RETRYABLE),
        ("UNSUPPORTED_OPERATION", CallOutcome.PERMANENT),
        ("RESOURCE_NOT_FOUND", CallOutcome.DONE),
    ],
)
def test_a_failed_operation_is_classified(
    gcp: GcpProvider, cloud: Cloud, code: str, outcome: CallOutcome
) -> None:
    cloud.answer_next("", f"operation-error:{code}")
    result = gcp.stop(POD)
    assert result.outcome is outcome, result
    if outcome is not CallOutcome.DONE:
        assert f"stop operation failed: {code}" in result.detail


@pytest.mark.parametrize(
    ("answer", "outcome", "says"),
    [
        ("429", CallOutcome.RETRYABLE, "rate limited"),
        ("429:9", CallOutcome.RETRYABLE, "retry after 9 s"),
        ("reason:403:rateLimitExceeded", CallOutcome.RETRYABLE, "rate limited"),
        ("reason:403:userRateLimitExceeded", CallOutcome.RETRYABLE, "userRateLimitExceeded"),
        ("reason:403:forbidden", CallOutcome.PERMANENT, "HTTP 403 forbidden"),
        ("status:401", CallOutcome.PERMANENT, "invalid authentication credentials"),
        ("500", CallOutcome.RETRYABLE, "HTTP 500"),
        ("status:503", CallOutcome.RETRYABLE, "HTTP 503"),
        (HOLD, CallOutcome.RETRYABLE, "timed out"),
        ("malformed", CallOutcome.RETRYABLE, "not JSON"),
    ],
)
def test_failed_stops_are_classified(
    gcp: GcpProvider, cloud: Cloud, answer: str, outcome: CallOutcome, says: str
) -> None:
    cloud.answer_next(answer)
    result = gcp.stop(POD)
    assert result.outcome is outcome, result
    assert says in result.detail and result.detail.startswith("gcp ")
    assert TOKEN not in result.detail
    assert cloud.stops() == []
    assert gcp.stop(POD).outcome is CallOutcome.PENDING  # the next try goes through


def test_a_failed_stop_request_is_classified_too(gcp: GcpProvider, cloud: Cloud) -> None:
    cloud.answer_next("", "reason:403:rateLimitExceeded")
    result = gcp.stop(POD)
    assert result.outcome is CallOutcome.RETRYABLE and "rate limited" in result.detail
    assert cloud.status() == "RUNNING"


def test_429_on_describe_carries_the_delay(gcp: GcpProvider, cloud: Cloud) -> None:
    cloud.answer_next("429:4")
    with pytest.raises(ProviderError) as caught:
        gcp.describe(POD)
    assert caught.value.retryable and caught.value.retry_after_s == 4.0


def test_a_wrong_token_is_permanent_and_never_echoed(cloud: Cloud, client: httpx.Client) -> None:
    wrong = "ya29.WRONG_TOKEN_987"
    gcp = GcpProvider(client, StaticToken(wrong), PROJECT, f"{cloud.url}/compute/v1")
    result = gcp.stop(POD)
    assert result.outcome is CallOutcome.PERMANENT and "HTTP 401 authError" in result.detail
    assert wrong not in result.detail
    assert cloud.status() == "RUNNING"


# resume ----------------------------------------------------------------------------------


def test_resume_starts_a_terminated_vm_and_is_idempotent(gcp: GcpProvider, cloud: Cloud) -> None:
    assert isinstance(gcp, Resumes)
    gcp.stop(POD)
    assert cloud.status() == "TERMINATED"
    result = gcp.resume(POD)
    assert result.outcome is CallOutcome.DONE and "start accepted" in result.detail, result
    assert cloud.status() == "RUNNING" and gcp.describe(POD).state is PodState.RUNNING
    start = next(o for o in cloud.fake.state.operations.values() if o.type == "start")
    assert start.request_id and len(start.request_id) == 36
    again = gcp.resume(POD)
    assert again.outcome is CallOutcome.DONE and "already running" in again.detail
    assert cloud.starts() == [
        f"POST /compute/v1/projects/{PROJECT}/zones/us-central1-a/instances/pod-1/start"
    ]


def test_a_started_vm_bills_again(gcp: GcpProvider, cloud: Cloud) -> None:
    gcp.stop(POD)
    gcp.resume(POD)
    instance = cloud.fake.state.instances[POD]
    assert instance.stopped_at is None and len(instance.earlier_runs) == 1
    started_at = datetime.fromisoformat(instance.started_at)
    assert instance.bill_usd(started_at + timedelta(hours=1)) > instance.bill_usd(started_at)


def test_a_vm_still_stopping_is_not_ready_to_start(gcp: GcpProvider, cloud: Cloud) -> None:
    cloud.fake.stop_delay_s = 3600
    gcp.stop(POD)
    result = gcp.resume(POD)
    assert result.outcome is CallOutcome.RETRYABLE and "wrong state" in result.detail
    assert cloud.fake.calls("GET")[-1].endswith("/instances/pod-1")  # it re-read the VM
    assert cloud.status() == "STOPPING"


def test_resuming_an_unknown_instance_is_permanent(gcp: GcpProvider, cloud: Cloud) -> None:
    result = gcp.resume("us-central1-a/nope")
    assert result.outcome is CallOutcome.PERMANENT and "no such instance" in result.detail
    assert cloud.starts() == []


@pytest.mark.parametrize(
    ("answer", "outcome", "says"),
    [
        ("no-capacity", CallOutcome.PERMANENT, "ZONE_RESOURCE_POOL_EXHAUSTED: The zone"),
        (
            "reason:503:ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS",
            CallOutcome.PERMANENT,
            "has no capacity to start it (HTTP 503",
        ),
        ("operation-error:RESOURCE_NOT_FOUND", CallOutcome.PERMANENT, "start operation failed"),
        ("operation-error:RESOURCE_OPERATION_RATE_EXCEEDED", CallOutcome.RETRYABLE, "RATE"),
        ("reason:403:rateLimitExceeded", CallOutcome.RETRYABLE, "rate limited"),
        ("reason:403:forbidden", CallOutcome.PERMANENT, "HTTP 403 forbidden"),
        ("500", CallOutcome.RETRYABLE, "HTTP 500"),
        ("malformed", CallOutcome.RETRYABLE, "not JSON"),
    ],
)
def test_failed_starts_are_classified(
    gcp: GcpProvider, cloud: Cloud, answer: str, outcome: CallOutcome, says: str
) -> None:
    gcp.stop(POD)
    cloud.answer_next("", answer)  # the VM is read, the start fails
    result = gcp.resume(POD)
    assert result.outcome is outcome, result
    assert says in result.detail and result.detail.startswith("gcp ")
    assert TOKEN not in result.detail
    assert cloud.status() == "TERMINATED"
    assert gcp.resume(POD).outcome is CallOutcome.DONE  # the next try goes through


# pods ------------------------------------------------------------------------------------

REFS = {POD, "us-central1-a/spot-1", "us-east1-b/n1-gpu", "us-central1-a/unpriced"}
AGGREGATED = f"GET /compute/v1/projects/{PROJECT}/aggregated"


def test_pods_lists_every_vm_of_every_zone_as_describe_does(gcp: GcpProvider, cloud: Cloud) -> None:
    cloud.fake.state.instances["us-east1-b/n1-gpu"].stopped_at = now().isoformat()
    listed = {pod.ref: pod.description for pod in gcp.pods()}
    assert listed.keys() == REFS
    assert listed["us-east1-b/n1-gpu"].state is PodState.STOPPED  # its disks still bill
    assert listed[POD].hourly_rate_usd == Decimal("3.67")
    assert listed[POD].storage is not None and listed[POD].storage.gb == Decimal(775)
    # one list of the disks and one of the VMs, not a read per disk
    assert cloud.fake.calls() == [f"{AGGREGATED}/disks", f"{AGGREGATED}/instances"]
    assert listed == {ref: gcp.describe(ref) for ref in REFS}


def test_pods_follows_every_page(gcp: GcpProvider, cloud: Cloud) -> None:
    everything = {pod.ref: pod.description for pod in gcp.pods()}
    cloud.fake.requests.clear()
    cloud.fake.page_size = 1  # one item a page; the other zone answers NO_RESULTS_ON_PAGE
    assert {pod.ref: pod.description for pod in gcp.pods()} == everything
    assert cloud.fake.calls() == [f"{AGGREGATED}/disks"] * 5 + [f"{AGGREGATED}/instances"] * 4


@pytest.mark.parametrize(
    ("answers", "says"),
    [
        (["429:3"], "retry after 3 s"),
        (["", "reason:403:rateLimitExceeded"], "rate limited"),
        (["malformed"], "not JSON"),
        (["", "", "500"], "HTTP 500"),
    ],
)
def test_a_failed_listing_is_retryable(
    gcp: GcpProvider, cloud: Cloud, answers: list[str], says: str
) -> None:
    cloud.fake.page_size = 3  # the disks come in two pages
    cloud.answer_next(*answers)
    with pytest.raises(ProviderError, match=says) as caught:
        gcp.pods()
    assert caught.value.retryable
    assert TOKEN not in str(caught.value)


def test_listing_with_a_wrong_token_is_permanent_and_never_echoed(
    cloud: Cloud, client: httpx.Client
) -> None:
    wrong = "ya29.WRONG_TOKEN_987"
    gcp = GcpProvider(client, StaticToken(wrong), PROJECT, f"{cloud.url}/compute/v1")
    with pytest.raises(ProviderError, match="HTTP 401 authError") as caught:
        gcp.pods()
    assert caught.value.retryable is False and wrong not in str(caught.value)


# the fake's metadata server ---------------------------------------------------------------


def test_the_metadata_server_wants_its_header(cloud: Cloud) -> None:
    answer = httpx.get(f"{cloud.url}{TOKEN_PATH}", timeout=TIMEOUT_S)
    assert answer.status_code == 403 and "Metadata-Flavor" in answer.text


# secrets ---------------------------------------------------------------------------------


def test_no_log_line_carries_the_token(
    gcp: GcpProvider, cloud: Cloud, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    cloud.answer_next("429", "500", "malformed", "reason:403:forbidden", HOLD, "status:401")
    for _ in range(7):
        gcp.stop(POD)
    gcp.describe(POD)
    with pytest.raises(ProviderError):
        gcp.describe("us-central1-a/nope")
    assert caplog.records, "expected the HTTP client to log its requests"
    assert TOKEN not in caplog.text


# a stop's Operation, followed -------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "outcome"),
    [
        ("QUOTA_EXCEEDED", CallOutcome.RETRYABLE),
        ("RESOURCE_OPERATION_RATE_EXCEEDED", CallOutcome.RETRYABLE),
        ("UNSUPPORTED_OPERATION", CallOutcome.PERMANENT),
        ("PERMISSION_DENIED", CallOutcome.PERMANENT),
        ("RESOURCE_NOT_FOUND", CallOutcome.DONE),
    ],
)
def test_a_stop_whose_operation_fails_later_is_classified_when_asked_again(
    gcp: GcpProvider, cloud: Cloud, code: str, outcome: CallOutcome
) -> None:
    cloud.fake.fail_next_operations(code)
    first = gcp.stop(POD)
    assert first.outcome is CallOutcome.PENDING and "PENDING" in first.detail
    operation = cloud.fake.calls("POST")[-1]
    result = gcp.stop(POD)
    assert result.outcome is outcome, result
    read = cloud.fake.calls("GET")
    assert any("/zones/us-central1-a/operations/operation-" in call for call in read)
    assert cloud.stops() == [operation] and cloud.status() == "RUNNING"
    if outcome is not CallOutcome.DONE:
        assert f"stop operation failed: {code}" in result.detail
    if outcome is CallOutcome.RETRYABLE:  # the next try sends the stop again
        assert gcp.stop(POD).outcome is CallOutcome.PENDING and len(cloud.stops()) == 2


def test_a_stop_whose_operation_still_runs_stays_pending_without_a_second_stop(
    gcp: GcpProvider, cloud: Cloud
) -> None:
    cloud.fake.fail_next_operations("QUOTA_EXCEEDED")
    gcp.stop(POD)
    cloud.fake.state.operations[next(iter(cloud.fake.state.operations))].error = None  # running
    result = gcp.stop(POD)
    assert result.outcome is CallOutcome.PENDING and "not DONE yet" in result.detail
    assert len(cloud.stops()) == 1


def test_an_operation_google_no_longer_has_is_forgotten(gcp: GcpProvider, cloud: Cloud) -> None:
    cloud.fake.fail_next_operations("QUOTA_EXCEEDED")
    gcp.stop(POD)
    cloud.fake.state.operations.clear()  # completed operations are kept for a while only
    assert gcp.stop(POD).outcome is CallOutcome.PENDING  # the VM still runs: stopped again
    assert len(cloud.stops()) == 2
    assert gcp.stop(POD).outcome is CallOutcome.DONE


# statuses --------------------------------------------------------------------------------


def test_every_status_compute_engine_documents_is_mapped() -> None:
    discovery = json.loads((SPECS / "gcp" / "compute.v1.json").read_text())
    documented = discovery["schemas"]["Instance"]["properties"]["status"]["enum"]
    assert sorted(STATES) == sorted(documented)


@pytest.mark.parametrize(
    ("status", "said"), [("HIBERNATING", "HIBERNATING"), (None, "None"), (3, "3")]
)
def test_an_undocumented_status_is_neither_running_nor_stopped(status: object, said: str) -> None:
    instance = {"name": "pod-1", "status": status, "machineType": "zones/z/machineTypes/x"}
    sent: list[str] = []

    def google(request: httpx.Request) -> httpx.Response:
        sent.append(request.method)
        return httpx.Response(200, json=instance)

    with httpx.Client(transport=httpx.MockTransport(google)) as client:
        gcp = GcpProvider(client, StaticToken(TOKEN), PROJECT)
        described = gcp.describe(POD)
        assert (described.state, described.provider_state) == (PodState.RUNNING, said)
        assert described.state_known is False
        stopped, resumed = gcp.stop(POD), gcp.resume(POD)
        assert stopped.outcome is CallOutcome.PENDING and resumed.outcome is CallOutcome.RETRYABLE
        assert stopped.provider_state == resumed.provider_state == said
        assert not stopped.state_known and not resumed.state_known
        assert set(sent) == {"GET"}  # neither a stop nor a start was sent
        instance["status"] = "RUNNING"
        assert gcp.describe(POD).state_known


@pytest.mark.parametrize(
    ("ref", "region"),
    [
        ("us-central1-a/train-1", "us-central1"),
        ("europe-west4-b/train-1", "europe-west4"),
        ("train-1", None),  # not '<zone>/<name>': no region said
    ],
)
def test_a_vm_is_located_in_its_zones_region(
    gcp: GcpProvider, ref: str, region: str | None
) -> None:
    assert isinstance(gcp, Locates)
    assert gcp.region_of(ref) == region
