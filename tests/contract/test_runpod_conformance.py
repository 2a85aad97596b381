"""The RunPod adapter and the fake RunPod held to RunPod's own definitions of its API (the
documents of its SDK and CLI, its REST v1 Pod schema, its REST v2 OpenAPI document for a
pod's network volumes: tests/specs/runpod), not to each other;
and real answers of RunPod, from its docs and its users' reports, replayed through the
adapter.

Every request the adapter sends in the contract suite, and every answer the fake gives it,
is checked there (harness_runpod.py); here, the calls the suite does not make (a spot pod's
resume, RunPod's documented error answers), and proof that the checks catch a request or an
answer RunPod's definitions do not allow.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import pytest

from governor.adapters.providers.runpod import (
    BID_RESUME_MUTATION,
    POD_QUERY,
    PODS_QUERY,
    RESUME_MUTATION,
    STATES,
    STOP_MUTATION,
    RunPodProvider,
)
from governor.domain.ports import CallOutcome, ProviderError, Storage
from governor.fakes.http_cloud import now, running
from governor.fakes.runpod import SPOT, FakeRunPod
from tests.contract import runpod_rest_spec
from tests.contract.runpod_spec import (
    SPECS,
    check_answer,
    check_request,
    conforming,
    definitions,
)
from tests.fake_clouds import Served

KEY = "rpa_CONFORMANCE_SECRET_77"
CORPUS = json.loads((SPECS / "answers.json").read_text())["answers"]


@pytest.fixture
def cloud(tmp_path: Path) -> Iterator[Served[FakeRunPod]]:
    fake = FakeRunPod(tmp_path / "runpod.json", KEY)
    fake.add_pod("pod-1", "0.44")
    fake.add_pod("spot-1", "0.20")
    fake.state.pods["spot-1"].pod_type = SPOT
    with running(fake) as server:
        yield Served(fake, server.url)


def exchanges(cloud: Served[FakeRunPod], key: str = KEY) -> tuple[RunPodProvider, list[Any]]:
    """The adapter over a client checked against the definitions, and the GraphQL answers
    it got (so a test can tell the checks ran)."""
    seen: list[Any] = []

    def record(response: httpx.Response) -> None:
        if response.request.url.path.endswith("/graphql"):
            seen.append(response.status_code)

    client = conforming(cloud.client(event_hooks={"response": [record]}))
    return RunPodProvider(client, key, f"{cloud.url}/graphql"), seen


def test_every_call_and_error_answer_conforms(cloud: Served[FakeRunPod]) -> None:
    runpod, seen = exchanges(cloud)
    assert runpod.describe("pod-1").hourly_rate_usd is not None
    assert len(runpod.pods()) == 2
    assert runpod.stop("spot-1").outcome is CallOutcome.DONE
    assert runpod.resume("spot-1").outcome is CallOutcome.DONE  # podBidResume
    for answer in ("transient", "no-capacity", "graphql:This pod is locked"):
        cloud.answer_next("", answer)
        assert runpod.stop("pod-1").outcome is not CallOutcome.DONE
    assert runpod.stop("pod-1").outcome is CallOutcome.DONE
    assert runpod.resume("pod-1").outcome is CallOutcome.DONE  # podResume
    assert runpod.stop("pod-404").outcome is CallOutcome.DONE
    assert cloud.fake.state.mutation_names() == ["podStop", "podBidResume", "podStop", "podResume"]
    assert len(seen) == 17 and set(seen) == {200}
    wrong_key, _ = exchanges(cloud, "rpa_WRONG")
    assert wrong_key.stop("pod-1").outcome is CallOutcome.PERMANENT  # HTTP 401: its request checked


def test_the_checks_fail_on_a_fake_answer_outside_the_spec(cloud: Served[FakeRunPod]) -> None:
    runpod, _ = exchanges(cloud)
    cloud.fake.state.pods["pod-1"].desired_status = "STOPPED"  # not a documented value
    with pytest.raises(AssertionError, match="desiredStatus 'STOPPED' is not one RunPod"):
        runpod.describe("pod-1")


ADAPTER = [
    (POD_QUERY, {"podId": "pod-1"}),
    (PODS_QUERY, {}),
    (STOP_MUTATION, {"podId": "pod-1"}),
    (RESUME_MUTATION, {"podId": "pod-1", "gpuCount": 1}),
    (BID_RESUME_MUTATION, {"podId": "pod-1", "bidPerGpu": 0.2, "gpuCount": 1}),
]


@pytest.mark.parametrize(("query", "variables"), ADAPTER)
def test_the_adapters_documents_conform(query: str, variables: dict[str, Any]) -> None:
    assert check_request({"query": query, "variables": variables}) == []


@pytest.mark.parametrize(
    ("query", "variables", "says"),
    [
        (POD_QUERY.replace("costPerHr", "hourlyCost"), {"podId": "p"}, "pod.hourlyCost"),
        (STOP_MUTATION.replace("podStop(", "podPause("), {"podId": "p"}, "podPause is not"),
        (RESUME_MUTATION, {"podId": "p", "gpuCount": "1"}, "$gpuCount: Int sent as '1'"),
        (
            RESUME_MUTATION.replace("$gpuCount: Int!", "$gpuCount: Float!"),
            {"podId": "p", "gpuCount": 1.0},
            "gpuCount: Float) is not RunPod's",
        ),
        (STOP_MUTATION.replace("{podId: $podId}", "{id: $podId}"), {"podId": "p"}, "id: String"),
        (STOP_MUTATION.replace("{ id desiredStatus }", "{ id gpus }"), {"podId": "p"}, "gpus"),
    ],
)
def test_a_request_outside_the_spec_is_caught(
    query: str, variables: dict[str, Any], says: str
) -> None:
    problems = check_request({"query": query, "variables": variables})
    assert any(says in problem for problem in problems), problems


POD = {"id": "p", "desiredStatus": "RUNNING", "costPerHr": 0.44, "volumeInGb": 20}


@pytest.mark.parametrize(
    ("answer", "says"),
    [
        ({"data": {"pod": {**POD, "desiredStatus": "STOPPED"}}}, "'STOPPED' is not one"),
        ({"data": {"pod": {**POD, "costPerHr": "0.44"}}}, "costPerHr: '0.44' is not a float32"),
        ({"data": {"pod": {**POD, "volumeInGb": True}}}, "volumeInGb: True is not a int"),
        ({"data": {"pod": {**POD, "uptime": 5}}}, "uptime answered, not selected"),
        ({"data": {"pod": "p"}}, "pod: 'p' is not an object"),
        ({"errors": [{"reason": "busy"}]}, "is not GraphQL's"),
    ],
)
def test_an_answer_outside_the_spec_is_caught(answer: dict[str, Any], says: str) -> None:
    request = {"query": POD_QUERY, "variables": {"podId": "p"}}
    assert check_answer(request, {"data": {"pod": POD}}) == []
    problems = check_answer(request, answer)
    assert any(says in problem for problem in problems), problems


@pytest.mark.parametrize("status", sorted(definitions().statuses))
def test_every_documented_status_is_read(cloud: Served[FakeRunPod], status: str) -> None:
    """A value RunPod adds to its documented statuses fails here until the adapter maps it."""
    cloud.fake.state.pods["pod-1"].desired_status = status
    runpod, _ = exchanges(cloud)
    assert runpod.describe("pod-1").state is STATES[status]  # unmapped: an error


def replayed(entry: dict[str, Any]) -> RunPodProvider:
    """The adapter, answered first its read of the pod, then `entry`'s real body."""
    status = "RUNNING" if entry["call"] == "stop" else "EXITED"
    kind = SPOT if entry["call"] == "resume-spot" else "RESERVED"
    pod = {"id": "p", "desiredStatus": status, "costPerHr": 0.2, "gpuCount": 1, "podType": kind}
    bodies = iter([{"data": {"pod": pod}}, entry["body"]])
    transport = httpx.MockTransport(lambda request: httpx.Response(200, json=next(bodies)))
    return RunPodProvider(httpx.Client(transport=transport), KEY)


@pytest.mark.parametrize("entry", CORPUS, ids=[e["source"].split(" ")[0][-40:] for e in CORPUS])
def test_real_answers_replayed_through_the_adapter(entry: dict[str, Any]) -> None:
    runpod = replayed(entry)
    result = runpod.stop("p") if entry["call"] == "stop" else runpod.resume("p")
    assert result.outcome is CallOutcome(entry["outcome"]), result
    if "errors" in entry["body"]:
        assert entry["body"]["errors"][0]["message"][:40] in result.detail


def test_the_corpus_cites_each_answer() -> None:
    assert CORPUS and all(entry["source"].startswith("https://") for entry in CORPUS)


def with_network_volumes(cloud: Served[FakeRunPod]) -> None:
    """Pods on a 2 TB STANDARD and a 100 GB HIGH_PERFORMANCE network volume, and one with
    only a container disk, beside pod-1 on its 20 GB volume disk."""
    fake = cloud.fake
    for ref in ("on-volume", "fast", "disk-only"):
        fake.add_pod(ref, "0.44")
    fake.add_network_volume("on-volume", "vol-1", 2000)
    fake.add_network_volume("fast", "vol-2", 100, "HIGH_PERFORMANCE")
    fake.state.pods["disk-only"].volume_in_gb = 0


def test_a_network_volume_is_read_through_rest_v2_within_its_spec(
    cloud: Served[FakeRunPod],
) -> None:
    with_network_volumes(cloud)
    runpod, _ = exchanges(cloud)
    # the first 1,000 GB at $0.07, the next at $0.05: $120 a month, $0.06 a GB
    on_volume = runpod.describe("on-volume")
    assert on_volume.storage == Storage(Decimal(2000), Decimal("0.06"), Decimal("0.06"))
    assert on_volume.cannot_preserve is None
    fast = runpod.describe("fast")
    assert fast.storage == Storage(Decimal(100), Decimal("0.14"), Decimal("0.14"))
    only_disk = runpod.describe("disk-only")
    assert (
        only_disk.cannot_preserve is not None and "no network volume" in only_disk.cannot_preserve
    )
    assert cloud.fake.calls("GET") == [
        "GET /v2/pods/on-volume",
        "GET /v2/network-volumes/vol-1",
        "GET /v2/pods/fast",
        "GET /v2/network-volumes/vol-2",
        "GET /v2/pods/disk-only",
    ]
    assert runpod.describe("pod-1").cannot_preserve is None  # a volume disk: no REST call
    listed = {entry.ref: entry.description for entry in runpod.pods()}
    assert listed["on-volume"].storage == on_volume.storage
    assert len(cloud.fake.calls("GET")) == 2 * 5  # the same reads again, none for pod-1


@pytest.mark.parametrize(
    ("answers", "retryable"),
    [
        (("", "429:7"), True),
        (("", "500"), True),
        (("", "", "status:503"), True),
        (("", "status:403"), False),
        (("", "", "status:404"), False),
    ],
)
def test_the_rest_v2_errors_are_classified(
    cloud: Served[FakeRunPod], answers: tuple[str, ...], retryable: bool
) -> None:
    """Each error of the pod's or the volume's read (after the GraphQL read of the pod), as
    RunPod's REST v2 words it (an ErrorResponse, checked against the document)."""
    with_network_volumes(cloud)
    runpod, _ = exchanges(cloud)
    cloud.answer_next(*answers)
    with pytest.raises(ProviderError) as failed:
        runpod.describe("on-volume")
    assert failed.value.retryable is retryable
    assert failed.value.retry_after_s == (7.0 if "429:7" in answers else None)
    assert runpod.describe("on-volume").storage is not None  # and then it reads again


def test_the_rest_checks_fail_on_a_fake_answer_and_a_request_outside_the_spec(
    cloud: Served[FakeRunPod],
) -> None:
    with_network_volumes(cloud)
    runpod, _ = exchanges(cloud)
    cloud.fake.state.network_volumes["vol-1"].type = "FAST"
    with pytest.raises(AssertionError, match="'FAST' is not one of"):
        runpod.describe("on-volume")
    with conforming(cloud.client()) as client, pytest.raises(AssertionError, match="expand"):
        client.get(f"{cloud.url}/v2/pods/fast", params={"expand": "mounts"})


REST_POD = runpod_rest_spec.document()["paths"]["/v2/pods/{id}"]["get"]["responses"]["200"][
    "content"
]["application/json"]["examples"]["pod"]["value"]
VOLUME = {"id": "v", "name": "n", "size": 100, "dataCenter": "US-KS-2", "type": "STANDARD"}


@pytest.mark.parametrize(
    ("path", "status", "answer", "says"),
    [
        ("/v2/pods/p", 200, {**REST_POD, "volumeInGb": 0}, "'volumeInGb' was unexpected"),
        ("/v2/pods/p", 200, {k: v for k, v in REST_POD.items() if k != "mounts"}, "'mounts'"),
        ("/v2/pods/p", 200, {**REST_POD, "mounts": {"network": [{"volumeId": "v"}]}}, "'path'"),
        ("/v2/pods/p", 404, {"errors": [{"message": "pod not found"}]}, "'title'"),
        ("/v2/network-volumes/v", 200, {**VOLUME, "size": "100"}, "'100' is not of type"),
        ("/v2/network-volumes/v", 200, {**VOLUME, "type": "FAST"}, "'FAST' is not one of"),
    ],
)
def test_a_rest_answer_outside_the_spec_is_caught(
    path: str, status: int, answer: Any, says: str
) -> None:
    good = REST_POD if path.startswith("/v2/pods/") else VOLUME
    assert runpod_rest_spec.answer_errors("GET", path, 200, good) == []
    problems = runpod_rest_spec.answer_errors("GET", path, status, answer)
    assert any(says in problem for problem in problems), problems


@pytest.mark.parametrize(
    ("method", "path", "query", "says"),
    [
        ("GET", "/v2/pod/p", {}, "no operation"),
        ("POST", "/v2/network-volumes/v", {}, "no operation"),
        ("GET", "/v2/network-volumes/v", {"podId": ["p"]}, "no query parameter 'podId'"),
    ],
)
def test_a_rest_request_outside_the_spec_is_caught(
    method: str, path: str, query: dict[str, list[str]], says: str
) -> None:
    assert runpod_rest_spec.request_errors("GET", "/v2/pods/p", {}, None) == []
    problems = runpod_rest_spec.request_errors(method, path, query, None)
    assert any(says in problem for problem in problems), problems


def test_a_network_volume_of_a_tier_runpod_does_not_document_costs_the_dearer_rate() -> None:
    pod = {"id": "p", "desiredStatus": "RUNNING", "costPerHr": 0.44, "volumeInGb": 0}
    rest_pod = {**REST_POD, "mounts": {"network": [{"volumeId": "v", "path": "/workspace"}]}}
    bodies = iter([{"data": {"pod": pod}}, rest_pod, {**VOLUME, "type": "ARCHIVE"}])
    transport = httpx.MockTransport(lambda request: httpx.Response(200, json=next(bodies)))
    runpod = RunPodProvider(
        httpx.Client(transport=transport), KEY, high_performance_usd_per_gb_month=Decimal("0.02")
    )
    assert runpod.describe("p").storage == Storage(Decimal(100), Decimal("0.07"), Decimal("0.07"))


def test_billing_is_read_within_its_spec(cloud: Served[FakeRunPod]) -> None:
    """`listPodBilling` for the account and for one pod, over two days' buckets: the
    adapter's requests and the fake's answers (records, resolved query, counts, totals) held
    to the REST v2 document by the conforming client."""
    since = now() - timedelta(hours=30)
    for pod in cloud.fake.state.pods.values():
        pod.started_at = since.isoformat()
    runpod, _ = exchanges(cloud)
    bills = runpod.billed(dict.fromkeys(["pod-1", "spot-1"], since))
    one = runpod.billed({"pod-1": since})
    assert cloud.fake.calls("GET") == ["GET /v2/billing/pods"] * 2
    for ref, rate in (("pod-1", Decimal("0.44")), ("spot-1", Decimal("0.20"))):
        assert abs(bills[ref].amount_usd - rate * 30) < Decimal("0.01")
    assert one["pod-1"].amount_usd >= bills["pod-1"].amount_usd
    with conforming(cloud.client()) as client:
        answer = client.get(
            f"{cloud.url}/v2/billing/pods",
            params={"lastN": "2", "bucketSize": "hour"},
            headers={"Authorization": f"Bearer {KEY}"},
        ).json()
    assert answer["metadata"]["recordCount"] == len(answer["records"]) == 4
    assert answer["metadata"]["uniquePodCount"] == 2


BILLING_RECORD = {
    "startTime": "2026-06-01T00:00:00Z",
    "endTime": "2026-06-02T00:00:00Z",
    "podId": "p",
    "totalAmount": 1.5,
    "gpuAmount": 1.5,
    "cpuAmount": 0.0,
    "diskAmount": 0.0,
}
BILLING = {
    "records": [BILLING_RECORD],
    "metadata": {
        "query": {
            "startTime": "2026-06-01T00:00:00Z",
            "endTime": "2026-06-02T00:00:00Z",
            "bucketSize": "day",
            "podId": None,
        },
        "recordCount": 1,
        "uniquePodCount": 1,
        "totals": {k: v for k, v in BILLING_RECORD.items() if k.endswith("Amount")},
    },
}


@pytest.mark.parametrize(
    ("answer", "says"),
    [
        ({"records": [BILLING_RECORD], "metadata": {"recordCount": 1}}, "'query' is a required"),
        ({**BILLING, "records": [{**BILLING_RECORD, "cpuAmount": None}]}, "None is not of type"),
        (
            {**BILLING, "records": [{k: v for k, v in BILLING_RECORD.items() if k != "cpuAmount"}]},
            "'cpuAmount' is a required",
        ),
        (
            {**BILLING, "metadata": {**BILLING["metadata"], "query": {"bucketSize": "fortnight"}}},
            "'fortnight' is not one of",
        ),
    ],
)
def test_a_billing_answer_outside_the_spec_is_caught(answer: dict[str, Any], says: str) -> None:
    assert runpod_rest_spec.answer_errors("GET", "/v2/billing/pods", 200, BILLING) == []
    problems = runpod_rest_spec.answer_errors("GET", "/v2/billing/pods", 200, answer)
    assert any(says in problem for problem in problems), problems


@pytest.mark.parametrize(
    ("query", "says"),
    [
        ({"bucketSize": ["fortnight"]}, "'fortnight' is not one of"),
        ({"startTime": ["yesterday"]}, "is not a 'date-time'"),
        ({"lastN": ["0"]}, "less than the minimum of 1"),
        ({"pod_id": ["p"]}, "no query parameter 'pod_id'"),
    ],
)
def test_a_billing_request_outside_the_spec_is_caught(
    query: dict[str, list[str]], says: str
) -> None:
    good = {"bucketSize": ["day"], "startTime": ["2026-06-01T00:00:00Z"], "podId": ["p"]}
    assert runpod_rest_spec.request_errors("GET", "/v2/billing/pods", good, None) == []
    problems = runpod_rest_spec.request_errors("GET", "/v2/billing/pods", query, None)
    assert any(says in problem for problem in problems), problems
