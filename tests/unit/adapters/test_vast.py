"""The Vast.ai adapter against the fake Vast cloud, over real HTTP on a thread.

Every answer the real API can give the adapter: an instance and its rates, no such instance
(null, or a 404 with Vast's code), an instance already stopped or still stopping, one started
again or waiting for its GPU, a wrong state, 429 as plain text with and without Retry-After,
5xx, a timeout, a body that is not JSON, Vast's `success: false` refusals (with an error
code or without), every instance status its SDK names and one it does not, and charges and
instance lists over several pages.
Whatever happens, DELETE is never sent and the key never appears in an error, a URL or a log
line.
"""

from __future__ import annotations

import json
import logging
import ssl
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import pytest

from governor.adapters.providers.vast import STATUSES, STOP_LATENCY_S, VastProvider
from governor.domain.model import PodState
from governor.domain.money import HOURS_PER_MONTH
from governor.domain.ports import (
    CallOutcome,
    ListsPods,
    ProviderError,
    ReportsBilling,
    Resumes,
    StopsPreserving,
)
from governor.fakes.http_cloud import HOLD, running
from governor.fakes.vast import FakeVast
from tests.contract.conformance_vast import statuses
from tests.fake_clouds import TIMEOUT_S, Served

KEY = "vast_UNIT_TEST_SECRET_0123456789abcdef"
TLS = ssl.create_default_context()  # built once: every client building its own is slow
# The fake cloud's clock, pinned.
T = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=1)
SINCE = T - timedelta(days=1)  # when the tests' instances were registered: before any charge


@dataclass
class Cloud(Served[FakeVast]):
    control: httpx.Client  # the test's own line to the fake, never the adapter's
    deletes_expected: bool = False

    def post(self, url: str, **kwargs: Any) -> httpx.Response:
        return self.control.post(url, **kwargs)

    def answer_instance(self, **fields: object) -> None:
        """The next instance read answers exactly these fields."""
        self.answer_next("body:" + json.dumps({"instances": fields}))

    def puts(self) -> list[str]:
        return self.fake.calls("PUT")


@pytest.fixture
def cloud(tmp_path: Path) -> Iterator[Cloud]:
    fake = FakeVast(tmp_path / "vast.json", KEY)
    fake.clock = lambda: T
    fake.add_pod("1001", "0.44")
    fake.add_pod("1002", "3600", storage_total_cost="0.01", disk_space=73.0)
    with running(fake) as server, httpx.Client(timeout=TIMEOUT_S, verify=TLS) as control:
        cloud = Cloud(fake, server.url, control)
        yield cloud
    assert cloud.deletes_expected or fake.calls("DELETE") == []


@pytest.fixture
def sent() -> list[httpx.Request]:
    return []


@pytest.fixture
def vast(cloud: Cloud, sent: list[httpx.Request]) -> Iterator[VastProvider]:
    with cloud.client(verify=TLS, event_hooks={"request": [sent.append]}) as client:
        yield VastProvider(client, KEY, cloud.url)


def test_it_stops_preserving_resumes_reports_billing_and_lists_pods(vast: VastProvider) -> None:
    assert isinstance(vast, StopsPreserving) and isinstance(vast, ReportsBilling)
    assert isinstance(vast, ListsPods) and isinstance(vast, Resumes)
    assert not hasattr(vast, "terminate") and not hasattr(vast, "delete")
    assert vast.stop_latency_s == STOP_LATENCY_S == 60.0


def test_describe_counts_the_disk_once(vast: VastProvider) -> None:
    pod = vast.describe("1001")
    assert pod.state is PodState.RUNNING
    # dph_total is 0.4482: the GPU's 0.44 plus the disk's 0.0082, reported as storage
    assert pod.hourly_rate_usd == Decimal("0.44")
    assert pod.storage is not None
    assert pod.storage.gb == Decimal(40)
    assert pod.storage.usd_per_gb_month == Decimal("0.0082") * HOURS_PER_MONTH / 40
    assert pod.storage.stopped_usd_per_gb_month == pod.storage.usd_per_gb_month
    other = vast.describe("1002").storage
    assert other is not None and other.usd_per_gb_month == Decimal("0.1")  # 0.01 * 730 / 73


def test_the_key_goes_as_a_bearer_header_only(
    vast: VastProvider, sent: list[httpx.Request]
) -> None:
    vast.describe("1001")
    vast.stop("1001")
    vast.billed(dict.fromkeys(["1001"], SINCE))
    vast.pods()
    assert sent
    for request in sent:
        assert request.headers["Authorization"] == f"Bearer {KEY}"
        assert KEY not in str(request.url) and "api_key" not in str(request.url)


def test_missing_fields_are_none(vast: VastProvider, cloud: Cloud) -> None:
    cloud.answer_instance(id=1001, actual_status="running")
    pod = vast.describe("1001")
    assert pod.state is PodState.RUNNING
    assert pod.hourly_rate_usd is None and pod.storage is None


def test_without_a_storage_cost_the_total_is_the_rate(vast: VastProvider, cloud: Cloud) -> None:
    cloud.answer_instance(actual_status="running", dph_total="0.5", disk_space=10)
    pod = vast.describe("1001")
    assert pod.hourly_rate_usd == Decimal("0.5") and pod.storage is None


@pytest.mark.parametrize("bad", ["cheap", True, [1], "NaN"])
def test_a_non_number_is_a_retryable_malformed_answer(
    vast: VastProvider, cloud: Cloud, bad: object
) -> None:
    cloud.answer_instance(actual_status="running", dph_total=bad, storage_total_cost=0.01)
    with pytest.raises(ProviderError, match="non-number") as caught:
        vast.describe("1001")
    assert caught.value.retryable


@pytest.mark.parametrize(
    ("actual", "intended", "state"),
    [
        ("running", "running", PodState.RUNNING),
        ("loading", "running", PodState.RUNNING),
        ("created", "running", PodState.RUNNING),
        (None, "running", PodState.RUNNING),  # the contract is being created
        ("frozen", "frozen", PodState.RUNNING),  # paused, GPU still billed
        ("exited", "running", PodState.RUNNING),  # crashed; the GPU is still held
        ("scheduling", "running", PodState.RUNNING),  # restarting, may start any moment
        ("unknown", "running", PodState.RUNNING),
        ("offline", "running", PodState.RUNNING),
        ("stopped", "running", PodState.RUNNING),  # asked to start again
        ("running", "stopped", PodState.STOPPING),
        ("offline", "stopped", PodState.STOPPING),
        ("stopped", "stopped", PodState.STOPPED),
        ("exited", "stopped", PodState.STOPPED),
        ("stopped", None, PodState.STOPPED),
    ],
)
def test_states(
    vast: VastProvider, cloud: Cloud, actual: str | None, intended: str | None, state: PodState
) -> None:
    cloud.answer_instance(actual_status=actual, intended_status=intended)
    assert vast.describe("1001").state is state


@pytest.mark.parametrize("answer", ["", "error:404:no_such_instance", "status:404"])
def test_describe_of_no_such_instance_is_a_permanent_error(
    vast: VastProvider, cloud: Cloud, answer: str
) -> None:
    cloud.answer_next(answer)
    with pytest.raises(ProviderError, match="vast has no instance 404404") as caught:
        vast.describe("404404")
    assert caught.value.retryable is False


def test_a_ref_that_is_not_an_instance_id_is_refused_unsent(
    vast: VastProvider, cloud: Cloud
) -> None:
    with pytest.raises(ProviderError, match="numbers") as caught:
        vast.describe("../1001")
    assert caught.value.retryable is False
    assert vast.stop("pod-1").outcome is CallOutcome.PERMANENT
    assert cloud.fake.calls() == []


def test_stop_sends_state_stopped_and_is_idempotent(vast: VastProvider, cloud: Cloud) -> None:
    first = vast.stop("1001")
    assert first.outcome is CallOutcome.PENDING, first  # Vast stops it a moment later
    assert cloud.puts() == ["PUT /api/v0/instances/1001/"]
    assert vast.describe("1001").state is PodState.STOPPED
    again = vast.stop("1001")
    assert again.outcome is CallOutcome.DONE and "already stopped" in again.detail
    assert cloud.puts() == ["PUT /api/v0/instances/1001/"]  # nothing sent the second time
    assert cloud.fake.state.instances["1001"].intended_status == "stopped"


def test_a_stop_in_progress_is_pending_and_not_sent_again(vast: VastProvider, cloud: Cloud) -> None:
    cloud.fake.state.stop_delay_s = 60.0
    assert vast.stop("1001").outcome is CallOutcome.PENDING
    assert vast.describe("1001").state is PodState.STOPPING
    assert vast.stop("1001").outcome is CallOutcome.PENDING
    assert len(cloud.puts()) == 1


def test_an_exited_instance_asked_to_run_is_stopped(vast: VastProvider, cloud: Cloud) -> None:
    cloud.answer_instance(actual_status="exited", intended_status="running")
    assert vast.stop("1001").outcome is CallOutcome.PENDING
    assert len(cloud.puts()) == 1


def test_stopping_no_such_instance_is_done(vast: VastProvider, cloud: Cloud) -> None:
    result = vast.stop("404404")
    assert result.outcome is CallOutcome.DONE and "gone" in result.detail
    assert cloud.puts() == []


@pytest.mark.parametrize(
    "answer", ["refused:no_such_instance", "error:404:not_found", "status:404"]
)
def test_the_put_answering_no_such_instance_is_done(
    vast: VastProvider, cloud: Cloud, answer: str
) -> None:
    cloud.answer_next("", answer)
    assert vast.stop("1001").outcome is CallOutcome.DONE


def test_a_404_without_vast_code_is_not_gone(cloud: Cloud) -> None:
    """A wrong URL must never read as "already stopped" while the instance bills on."""
    with cloud.client(verify=TLS) as client:
        result = VastProvider(client, KEY, f"{cloud.url}/wrong").stop("1001")
    assert result.outcome is CallOutcome.PERMANENT and "HTTP 404" in result.detail


def test_a_wrong_state_is_decided_by_a_fresh_read(vast: VastProvider, cloud: Cloud) -> None:
    cloud.answer_next("", "status:409")
    result = vast.stop("1001")
    assert result.outcome is CallOutcome.RETRYABLE and "still running" in result.detail
    stopped = json.dumps({"instances": {"actual_status": "stopped", "intended_status": "stopped"}})
    cloud.answer_next("", "status:409", f"body:{stopped}")
    assert vast.stop("1001").outcome is CallOutcome.DONE


@pytest.mark.parametrize(
    ("answer", "outcome", "says"),
    [
        ("429", CallOutcome.RETRYABLE, "API requests too frequent"),
        ("429:9", CallOutcome.RETRYABLE, "retry after 9 s"),
        ("500", CallOutcome.RETRYABLE, "HTTP 500"),
        (HOLD, CallOutcome.RETRYABLE, "timed out"),
        ("malformed", CallOutcome.RETRYABLE, "not JSON"),
        ("refused:rate_limit_exceeded", CallOutcome.RETRYABLE, "rate_limit_exceeded"),
        ("error:400:rate_limit_exceeded", CallOutcome.RETRYABLE, "rate_limit_exceeded"),
        ("refused:missing_billing", CallOutcome.PERMANENT, "missing_billing"),
        ("refused:invalid_args", CallOutcome.PERMANENT, "canned invalid_args"),
        ("error:403:invalid_token", CallOutcome.PERMANENT, "canned invalid_token"),
    ],
)
def test_failed_stops_are_classified(
    vast: VastProvider, cloud: Cloud, answer: str, outcome: CallOutcome, says: str
) -> None:
    cloud.answer_next("", answer)  # the read goes through, the PUT fails
    result = vast.stop("1001")
    assert result.outcome is outcome, result
    assert says in result.detail and "vast" in result.detail
    assert KEY not in result.detail
    assert vast.stop("1001").outcome is CallOutcome.PENDING  # the next try goes through


def test_resume_sends_state_running_and_is_idempotent(
    vast: VastProvider, cloud: Cloud, sent: list[httpx.Request]
) -> None:
    vast.stop("1001")
    assert vast.describe("1001").state is PodState.STOPPED
    result = vast.resume("1001")
    assert result.outcome is CallOutcome.DONE, result
    assert json.loads(sent[-1].content) == {"state": "running"}
    assert cloud.puts() == ["PUT /api/v0/instances/1001/"] * 2
    assert vast.describe("1001").state is PodState.RUNNING
    again = vast.resume("1001")
    assert again.outcome is CallOutcome.DONE and "already running" in again.detail
    assert len(cloud.puts()) == 2  # nothing sent the second time


def test_a_resumed_instance_bills_its_gpu_again(vast: VastProvider, cloud: Cloud) -> None:
    cloud.fake.clock = lambda: T - timedelta(hours=2)
    cloud.fake.add_pod("7", "1", started_at=T - timedelta(hours=3), storage_total_cost="0.01")
    vast.stop("7")
    cloud.fake.clock = lambda: T - timedelta(hours=1)
    assert vast.resume("7").outcome is CallOutcome.DONE
    cloud.fake.clock = lambda: T
    assert vast.billed(dict.fromkeys(["7"], SINCE))["7"].amount_usd == Decimal(
        "2.03"
    )  # 2 h of GPU, 3 h of disk


def test_resuming_a_stopping_instance_keeps_its_gpu(vast: VastProvider, cloud: Cloud) -> None:
    cloud.fake.state.stop_delay_s = 60.0
    vast.stop("1001")
    assert vast.describe("1001").state is PodState.STOPPING
    assert vast.resume("1001").outcome is CallOutcome.DONE
    assert vast.describe("1001").state is PodState.RUNNING
    instance = cloud.fake.state.instances["1001"]
    assert instance.stops_at is None and instance.earlier_runs == []  # it never let go


def test_an_instance_waiting_for_its_gpu_is_already_resumed(
    vast: VastProvider, cloud: Cloud
) -> None:
    cloud.answer_instance(actual_status="scheduling", intended_status="running")
    assert vast.resume("1001").outcome is CallOutcome.DONE
    assert cloud.puts() == []


def test_resuming_no_such_instance_is_permanent(vast: VastProvider, cloud: Cloud) -> None:
    result = vast.resume("404404")
    assert result.outcome is CallOutcome.PERMANENT and "no instance 404404" in result.detail
    assert cloud.puts() == []


@pytest.mark.parametrize(
    ("answer", "outcome", "says"),
    [
        ("429", CallOutcome.RETRYABLE, "API requests too frequent"),
        ("500", CallOutcome.RETRYABLE, "HTTP 500"),
        ("malformed", CallOutcome.RETRYABLE, "not JSON"),
        ("refused:rate_limit_exceeded", CallOutcome.RETRYABLE, "rate_limit_exceeded"),
        ("refused:no_such_instance", CallOutcome.PERMANENT, "no_such_instance"),
        ("error:404:not_found", CallOutcome.PERMANENT, "canned not_found"),
        ("refused:missing_billing", CallOutcome.PERMANENT, "missing_billing"),
    ],
)
def test_failed_resumes_are_classified(
    vast: VastProvider, cloud: Cloud, answer: str, outcome: CallOutcome, says: str
) -> None:
    vast.stop("1001")
    cloud.answer_next("", answer)  # the read goes through, the PUT fails
    result = vast.resume("1001")
    assert result.outcome is outcome, result
    assert says in result.detail and KEY not in result.detail
    assert vast.describe("1001").state is PodState.STOPPED
    assert vast.resume("1001").outcome is CallOutcome.DONE  # the next try goes through


def test_a_wrong_state_on_resume_is_decided_by_a_fresh_read(
    vast: VastProvider, cloud: Cloud
) -> None:
    vast.stop("1001")
    cloud.answer_next("", "status:409")
    result = vast.resume("1001")
    assert result.outcome is CallOutcome.RETRYABLE and "has not started" in result.detail
    started = json.dumps({"instances": {"actual_status": "loading", "intended_status": "running"}})
    cloud.answer_next("", "status:409", f"body:{started}")
    assert vast.resume("1001").outcome is CallOutcome.DONE


def test_vast_plain_text_429_has_no_delay(vast: VastProvider, cloud: Cloud) -> None:
    cloud.answer_next("429")
    with pytest.raises(ProviderError) as caught:
        vast.describe("1001")
    assert caught.value.retryable and caught.value.retry_after_s is None
    assert caught.value.status == 429
    cloud.answer_next("429:4")
    with pytest.raises(ProviderError) as caught:
        vast.describe("1001")
    assert caught.value.retry_after_s == 4.0


def test_a_wrong_key_is_permanent_and_never_echoed(cloud: Cloud) -> None:
    wrong = "vast_WRONG_KEY_987"
    with cloud.client(verify=TLS) as client:
        result = VastProvider(client, wrong, cloud.url).stop("1001")
    assert result.outcome is CallOutcome.PERMANENT and "invalid_token" in result.detail
    assert wrong not in result.detail
    assert cloud.puts() == []


def test_billed_sums_this_instances_charges_across_pages(vast: VastProvider, cloud: Cloud) -> None:
    cloud.fake.charges_page_limit = 3
    cloud.fake.add_pod("7", "0.333333", started_at=T - timedelta(hours=4, minutes=20))
    cloud.fake.add_pod("8", "9", started_at=T - timedelta(hours=2))
    billed = vast.billed(dict.fromkeys(["7"], SINCE))["7"]
    # the GPU: 4 h at 0.333333 and 20 min at 0.111111; the disk: 4 h at 0.0082 and 0.002733
    assert billed.amount_usd == Decimal("1.479976")
    assert billed.amount_usd == cloud.fake.state.instances["7"].bill_usd(T)
    assert billed.through == T
    # 10 charges of its own and 4 of the other's, 3 to a page
    assert cloud.fake.calls("GET").count("GET /api/v0/charges/") == 5


def test_billed_reads_the_accounts_charges_once_for_many_instances(
    vast: VastProvider, cloud: Cloud
) -> None:
    cloud.fake.charges_page_limit = 3
    cloud.fake.add_pod("7", "0.333333", started_at=T - timedelta(hours=4, minutes=20))
    cloud.fake.add_pod("8", "9", started_at=T - timedelta(hours=2))
    bills = vast.billed(dict.fromkeys(["7", "8", "404404"], SINCE))
    for ref in ("7", "8"):
        assert bills[ref].amount_usd == cloud.fake.state.instances[ref].bill_usd(T)
        assert bills[ref].through == T
    assert bills["404404"].amount_usd == 0 and bills["404404"].through < T
    # the same five pages as for one instance: the account's charges are read once
    assert cloud.fake.calls("GET").count("GET /api/v0/charges/") == 5


def test_billed_counts_storage_after_the_stop(vast: VastProvider, cloud: Cloud) -> None:
    cloud.fake.clock = lambda: T - timedelta(hours=2)
    cloud.fake.add_pod("7", "1", started_at=T - timedelta(hours=3), storage_total_cost="0.01")
    vast.stop("7")
    cloud.fake.clock = lambda: T
    assert vast.billed(dict.fromkeys(["7"], SINCE))["7"].amount_usd == Decimal(
        "1.03"
    )  # 1 h of GPU, 3 h of disk


def test_billed_leaves_out_the_charges_before_an_instances_registration(
    vast: VastProvider, cloud: Cloud
) -> None:
    cloud.fake.add_pod("7", "1", started_at=T - timedelta(hours=3))
    cloud.fake.add_pod("8", "1", started_at=T - timedelta(hours=3))
    bills = vast.billed({"7": SINCE, "8": T})  # 8 was registered once its charges had ended
    assert bills["7"].amount_usd == cloud.fake.state.instances["7"].bill_usd(T) > 0
    assert bills["8"].amount_usd == 0


def test_billed_of_an_instance_without_charges_is_zero(vast: VastProvider) -> None:
    billed = vast.billed(dict.fromkeys(["404404"], SINCE))["404404"]
    assert billed.amount_usd == 0 and billed.through < datetime.now(UTC)


def test_billed_asks_for_instance_charges_in_a_day_range(
    vast: VastProvider, sent: list[httpx.Request]
) -> None:
    vast.billed(dict.fromkeys(["1001"], SINCE))
    (request,) = sent
    filters = json.loads(request.url.params["select_filters"])
    assert filters["type"] == {"in": ["instance"]}
    midnight = SINCE.replace(hour=0, minute=0, second=0)  # from the day of the registration
    assert filters["day"]["gte"] == int(midnight.timestamp()) < filters["day"]["lte"]
    assert request.url.params["limit"] == "500"


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ({"results": [{"source": "instance-1001", "amount": "x", "end": 1}]}, "malformed charge"),
        ({"results": [{"source": "instance-1001", "amount": 1}]}, "malformed charge"),
        ({"results": "none"}, "malformed page"),
        ({"results": [], "next_token": 5}, "loops"),
    ],
)
def test_malformed_charges_are_retryable(
    vast: VastProvider, cloud: Cloud, body: dict[str, object], says: str
) -> None:
    cloud.answer_next(f"body:{json.dumps(body)}")
    with pytest.raises(ProviderError, match=says) as caught:
        vast.billed(dict.fromkeys(["1001"], SINCE))
    assert caught.value.retryable


def test_billed_refusals_are_classified(vast: VastProvider, cloud: Cloud) -> None:
    cloud.answer_next("refused:invalid_args")
    with pytest.raises(ProviderError, match="invalid_args") as caught:
        vast.billed(dict.fromkeys(["1001"], SINCE))
    assert caught.value.retryable is False


def test_pods_lists_every_instance_across_pages(
    vast: VastProvider, cloud: Cloud, sent: list[httpx.Request]
) -> None:
    cloud.fake.instances_page_limit = 2
    cloud.fake.add_pod("7", "0.25")
    cloud.fake.add_pod("8", "9")
    cloud.fake.state.instances["8"].destroyed_at = T.isoformat()
    vast.stop("7")
    sent.clear()
    listed = {pod.ref: pod.description for pod in vast.pods()}
    assert set(listed) == {"7", "1001", "1002"}  # the destroyed one is not listed
    assert listed["7"].state is PodState.STOPPED  # its disk still bills
    assert listed["7"].hourly_rate_usd == Decimal("0.25")
    assert listed["1001"].state is PodState.RUNNING
    assert listed["1002"] == vast.describe("1002")
    assert [r.url.path for r in sent[:-1]] == ["/api/v1/instances/"] * 2
    assert [r.url.params.get("limit") for r in sent[:-1]] == ["25", "25"]
    assert "after_token" not in sent[0].url.params and sent[1].url.params["after_token"]


@pytest.mark.parametrize("token", ["abc", 5])
def test_an_instance_list_whose_next_token_loops_is_retryable(
    vast: VastProvider, cloud: Cloud, token: object
) -> None:
    page = json.dumps({"instances": [], "next_token": token})
    cloud.answer_next(f"body:{page}", f"body:{page}")
    with pytest.raises(ProviderError, match="loops") as caught:
        vast.pods()
    assert caught.value.retryable


@pytest.mark.parametrize(
    ("answer", "retryable"),
    [
        ("429", True),
        ("500", True),
        ("refused:rate_limit_exceeded", True),
        ("body:" + json.dumps({"instances": {"id": 1}}), True),
        ("refused:invalid_args", False),
    ],
)
def test_failed_lists_are_classified(
    vast: VastProvider, cloud: Cloud, answer: str, retryable: bool
) -> None:
    cloud.answer_next(answer)
    with pytest.raises(ProviderError, match="vast") as caught:
        vast.pods()
    assert caught.value.retryable is retryable
    assert KEY not in str(caught.value)


def test_listing_with_a_wrong_key_is_permanent_and_never_echoed(cloud: Cloud) -> None:
    wrong = "vast_WRONG_KEY_987"
    with (
        cloud.client(verify=TLS) as client,
        pytest.raises(ProviderError, match="invalid_token") as caught,
    ):
        VastProvider(client, wrong, cloud.url).pods()
    assert caught.value.retryable is False and caught.value.status == 401
    assert wrong not in str(caught.value)


def test_the_fake_destroys_on_delete_and_records_it(cloud: Cloud, vast: VastProvider) -> None:
    cloud.deletes_expected = True
    answer = cloud.control.delete(
        f"{cloud.url}/api/v0/instances/1001/", headers={"Authorization": f"Bearer {KEY}"}
    )
    assert answer.json() == {"success": True}
    assert cloud.fake.calls("DELETE") == ["DELETE /api/v0/instances/1001/"]
    assert vast.stop("1001").outcome is CallOutcome.DONE  # gone
    with pytest.raises(ProviderError, match="no instance 1001"):
        vast.describe("1001")


def test_no_log_line_carries_the_key(
    vast: VastProvider, cloud: Cloud, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    cloud.answer_next("429", "500", "malformed", "refused:invalid_token", HOLD, "status:401")
    for _ in range(7):
        vast.stop("1001")
    vast.describe("1001")
    vast.billed(dict.fromkeys(["1001"], SINCE))
    assert caplog.records, "expected the HTTP client to log its requests"
    assert KEY not in caplog.text


# refusals without a code, and every status -------------------------------------------------


@pytest.mark.parametrize(
    ("declined", "outcome"),
    [
        ("declined:Instance cannot be stopped right now", CallOutcome.PERMANENT),
        ("declined:API requests too frequent endpoint threshold=1.0", CallOutcome.RETRYABLE),
        ('body:{"success": false}', CallOutcome.PERMANENT),
        ("body:{}", CallOutcome.PERMANENT),  # not "success": true, as Vast's SDK reads it
    ],
)
def test_a_stop_not_accepted_is_never_taken_as_accepted(
    vast: VastProvider, cloud: Cloud, declined: str, outcome: CallOutcome
) -> None:
    cloud.answer_next("", declined)  # the instance is read, then the stop is answered so
    result = vast.stop("1001")
    assert result.outcome is outcome, result
    assert KEY not in result.detail
    assert len(cloud.puts()) == 1
    assert vast.describe("1001").state is PodState.RUNNING


def test_a_start_not_accepted_is_a_permanent_failure(vast: VastProvider, cloud: Cloud) -> None:
    vast.stop("1001")
    cloud.answer_next("", "declined:Instance has no GPU available")
    result = vast.resume("1001")
    assert result.outcome is CallOutcome.PERMANENT and "success false" in result.detail


def test_every_status_the_sdk_names_is_mapped() -> None:
    assert set(STATUSES) == statuses()


@pytest.mark.parametrize(
    ("actual", "intended"), [("hibernating", "running"), ("running", "paused"), (7, None)]
)
def test_a_status_the_sdk_does_not_name_is_neither_running_nor_stopped(
    vast: VastProvider, cloud: Cloud, actual: object, intended: object
) -> None:
    cloud.answer_instance(actual_status=actual, intended_status=intended)
    described = vast.describe("1001")
    assert described.state is PodState.RUNNING and described.state_known is False
    assert described.provider_state == f"{actual}/{intended}"
    cloud.answer_instance(actual_status=actual, intended_status=intended)
    stopped = vast.stop("1001")
    assert stopped.outcome is CallOutcome.PENDING and not stopped.state_known
    assert stopped.provider_state == f"{actual}/{intended}"
    cloud.answer_instance(actual_status=actual, intended_status=intended)
    resumed = vast.resume("1001")
    assert resumed.outcome is CallOutcome.RETRYABLE and not resumed.state_known
    assert cloud.puts() == []
    cloud.answer_instance(actual_status="running", intended_status="running")
    assert vast.describe("1001").state_known


@pytest.mark.parametrize("actual", ["destroying", "destroyed", "terminated"])
def test_an_instance_being_destroyed_is_gone(vast: VastProvider, cloud: Cloud, actual: str) -> None:
    cloud.answer_instance(actual_status=actual, intended_status="stopped")
    assert vast.describe("1001").state is PodState.GONE
    cloud.answer_instance(actual_status=actual, intended_status="stopped")
    assert vast.stop("1001").outcome is CallOutcome.DONE
    cloud.answer_instance(actual_status=actual, intended_status="stopped")
    assert vast.resume("1001").outcome is CallOutcome.PERMANENT
    assert cloud.puts() == []
