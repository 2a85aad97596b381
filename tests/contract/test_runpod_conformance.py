"""The RunPod adapter and the fake RunPod held to RunPod's own definitions of its API (the
documents of its SDK and CLI, its REST v1 Pod schema: tests/specs/runpod), not to each other;
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
from governor.domain.ports import CallOutcome
from governor.fakes.http_cloud import running
from governor.fakes.runpod import SPOT, FakeRunPod
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
