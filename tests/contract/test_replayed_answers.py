"""Real answers of Compute Engine and Vast.ai, taken from public sources (the providers'
documentation, their users' reports) with their citations (tests/specs/gcp/answers.json,
tests/specs/vast/answers.json), replayed through the adapters: the fakes are written from
the same reading as the adapters, so these keep both honest.

Each entry answers the call that decides the outcome; a read the adapter makes before it
(the VM, the instance) is answered with the least the provider's definition allows for the
state the call starts from, which is this test's scaffolding, not a corpus entry.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from governor.adapters.providers.gcp import GcpProvider, StaticToken
from governor.adapters.providers.vast import VastProvider
from governor.domain.ports import CallOutcome, ProviderError
from tests.contract import conformance_vast
from tests.contract.conformance import SPECS

GCP = json.loads((SPECS / "gcp" / "answers.json").read_text())["answers"]
VAST = json.loads((SPECS / "vast" / "answers.json").read_text())["answers"]
STOPPED_VM = {"kind": "compute#instance", "name": "train-1", "status": "TERMINATED"}
RUNNING_INSTANCE = {"instances": {"id": 1001, "actual_status": "running"}}


def _answering(entry: dict[str, Any], first: Callable[[httpx.Request], bool]) -> httpx.Client:
    """A client whose requests `first` picks get `entry`'s real answer; the others, the
    scaffolding read."""

    def answer(request: httpx.Request) -> httpx.Response:
        if not first(request):
            scaffold = STOPPED_VM if "compute" in request.url.path else RUNNING_INSTANCE
            return httpx.Response(200, json=scaffold)
        if "text" in entry:
            return httpx.Response(entry["status"], text=entry["text"])
        return httpx.Response(entry["status"], json=entry["body"])

    return httpx.Client(transport=httpx.MockTransport(answer))


@pytest.mark.parametrize("entry", GCP, ids=[f"{e['call']}-{e['status']}" for e in GCP])
def test_real_compute_engine_answers_replayed_through_the_adapter(entry: dict[str, Any]) -> None:
    client = _answering(entry, lambda request: request.url.path.endswith("/start"))
    gcp = GcpProvider(client, StaticToken("ya29.token"), "my-project")
    result = gcp.resume("us-central1-a/train-1")
    assert result.outcome is CallOutcome(entry["expect"]), result
    assert entry["body"]["error"]["errors"][0]["code"] in result.detail


@pytest.mark.parametrize("entry", VAST, ids=[f"{e['call']}-{e['status']}" for e in VAST])
def test_real_vast_answers_replayed_through_the_adapter(entry: dict[str, Any]) -> None:
    def decisive(request: httpx.Request) -> bool:
        return entry["call"] == "describe" or request.method == "PUT"

    vast = VastProvider(_answering(entry, decisive), "key")
    if entry["call"] == "describe":
        with pytest.raises(ProviderError) as caught:
            vast.describe("1001")
        assert caught.value.retryable is (entry["expect"] == "retryable")
        return
    result = vast.stop("1001")
    assert result.outcome is CallOutcome(entry["expect"]), result
    assert result.retry_after_s is None  # Vast sends no Retry-After


@pytest.mark.parametrize("entry", VAST, ids=[f"{e['call']}-{e['status']}" for e in VAST])
def test_each_real_vast_answer_is_one_its_sdk_allows(entry: dict[str, Any]) -> None:
    assert conformance_vast.answer_errors(entry.get("body")) == []


@pytest.mark.parametrize("corpus", [GCP, VAST], ids=["gcp", "vast"])
def test_the_corpus_cites_each_answer(corpus: list[dict[str, Any]]) -> None:
    assert corpus and all(entry["source"].startswith("https://") for entry in corpus)
