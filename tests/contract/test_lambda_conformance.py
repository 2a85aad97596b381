"""The Lambda Cloud adapter and the fake Lambda held to Lambda's published OpenAPI document
(tests/specs/lambda/openapi.json), not to each other; and real answers of Lambda, from its
document's examples and a client's tests, replayed through the adapter.

Every contract test already checks each exchange it makes (harness_lambda.py); these prove
that the checks see the calls that matter, that they catch a request Lambda does not
document and an answer outside its schema, that every documented instance status and every
error code Lambda documents for the adapter's calls is read as Lambda means it.
"""

from __future__ import annotations

import json
from dataclasses import replace
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import pytest

from governor.adapters.providers.lambda_cloud import CONFLICT, STATES, LambdaProvider
from governor.domain.model import PodState
from governor.domain.ports import CallOutcome, ProviderError
from tests.contract import conformance_lambda
from tests.contract.conformance import SPECS, Exchange
from tests.contract.conftest import Governed, govern
from tests.contract.harness_lambda import HARNESS as LAMBDA

CORPUS = json.loads((SPECS / "lambda" / "answers.json").read_text())["answers"]
TERMINATE = "/api/v1/instance-operations/terminate"
INSTANCE = "/api/v1/instances/pod-1"


def _every_call(governed: Governed) -> None:
    adapter = governed.adapter
    assert isinstance(adapter, LambdaProvider)
    assert len(adapter.pods()) == 1
    with pytest.raises(ProviderError):
        adapter.describe(LAMBDA.missing)
    assert adapter.terminate(LAMBDA.running, keep="ckpts").outcome is CallOutcome.PENDING
    assert adapter.terminate(LAMBDA.missing, keep="ckpts").outcome is CallOutcome.DONE


def test_every_lambda_call_is_a_documented_operation(tmp_path: Path) -> None:
    with govern(LAMBDA, tmp_path) as governed:
        _every_call(governed)
        called = [conformance_lambda.operation_of(e.method, e.path) for e in governed.exchanges]
        assert None not in called
        assert {o.id for o in called if o} == {
            "listInstances",
            "listFilesystems",
            "getInstance",
            "terminateInstance",
        }
        assert {e.status for e in governed.exchanges} == {200, 404}
        assert conformance_lambda.off_spec(governed.exchanges) == []


def test_a_request_lambda_does_not_document_is_caught() -> None:
    wrong = [
        Exchange("POST", f"{INSTANCE}/terminate", {}, None, 200, None),
        Exchange("POST", TERMINATE, {}, {"instance_id": "pod-1"}, 200, None),
        Exchange("POST", TERMINATE, {}, {"instance_ids": "pod-1"}, 200, None),
        Exchange("GET", "/api/v1/instances", {"status": ["active"]}, None, 200, None),
        Exchange("GET", "/api/v1/filesystems", {}, None, 200, None),
        Exchange("GET", INSTANCE, {}, {"id": "pod-1"}, 200, None),
    ]
    errors = [conformance_lambda.off_spec([exchange]) for exchange in wrong]
    said = [
        "no operation of Lambda's API",
        "'instance_id' is not a field of InstanceTerminateRequest",
        "'pod-1' is not of type 'array'",
        "listInstances has no query parameter 'status'",
        "no operation of Lambda's API",  # creating one is POST; the list is /file-systems
        "getInstance takes no body",
    ]
    for found, expected in zip(errors, said, strict=True):
        assert len(found) >= 1 and expected in found[0], found


def test_an_answer_of_the_fake_outside_the_spec_is_caught(tmp_path: Path) -> None:
    with govern(LAMBDA, tmp_path) as governed:
        _every_call(governed)
        exchanges = governed.exchanges
    read = next(e for e in exchanges if e.path == INSTANCE and e.status == 200)
    listed = next(e for e in exchanges if e.path == "/api/v1/file-systems")
    terminated = next(e for e in exchanges if e.path == TERMINATE and e.status == 200)
    missing = next(e for e in exchanges if e.status == 404)
    instance, filesystem = read.answer["data"], listed.answer["data"][0]
    off = [
        replace(read, answer={"data": {**instance, "status": "stopped"}}),
        replace(read, answer={"data": {**instance, "is_spot": False}}),
        replace(read, answer={"data": {**instance, "instance_type": {"price_cents_per_hour": 44}}}),
        replace(listed, answer={"data": [{**filesystem, "bytes_used": None}]}),
        replace(terminated, status=409, answer={"error": {"code": CONFLICT, "message": "x"}}),
        replace(missing, answer={"error": {"code": "global/object-does-not-exist"}}),
        replace(missing, status=500, answer={"error": "internal"}),
    ]
    said = [
        "'stopped' is not one of ['booting', 'active'",
        "'is_spot' is not a field of Instance",
        "'name' is a required property",
        "None is not of type 'integer'",
        "answered 409, which terminateInstance does not document",
        "'message' is a required property",
        "'internal' is not of type 'object'",
    ]
    for exchange, expected in zip(off, said, strict=True):
        errors = conformance_lambda.off_spec([exchange])
        assert any(expected in error for error in errors), errors


def test_the_map_names_every_status_lambda_documents() -> None:
    """A status Lambda adds to its InstanceStatus enum fails here until the adapter maps it."""
    assert set(STATES) == set(conformance_lambda.statuses())


@pytest.mark.parametrize("status", conformance_lambda.statuses())
def test_every_documented_status_is_read(tmp_path: Path, status: str) -> None:
    with govern(LAMBDA, tmp_path) as governed:
        governed.fake.state.instances[LAMBDA.running].status = status
        assert governed.adapter.describe(LAMBDA.running).state is STATES[status]


CALLS = ("listInstances", "listFilesystems", "getInstance", "terminateInstance")


def _documented() -> list[tuple[str, int, str]]:
    """Every (operation, HTTP status, error code) Lambda documents for the calls the adapter
    makes."""
    schemas = conformance_lambda.document()["components"]["schemas"]
    found = []
    for name in CALLS:
        for code, pointer in sorted(conformance_lambda.operation(name).responses.items()):
            if (status := int(code)) >= 400:
                answer = json.dumps(conformance_lambda.resolve(pointer))
                found += [
                    (name, status, schemas[schema]["properties"]["code"]["const"])
                    for schema in sorted(schemas)
                    if f'"#/components/schemas/{schema}"' in answer
                ]
    return found


# What each error code Lambda documents for the adapter's calls amounts to, by its
# document's words for it.
DOCUMENTED = {
    "global/object-does-not-exist": CallOutcome.DONE,  # the instance is gone
    "global/not-found": CallOutcome.PERMANENT,  # what a wrong path answers: never "gone"
    "global/invalid-api-key": CallOutcome.PERMANENT,
    "global/account-inactive": CallOutcome.PERMANENT,
    "global/forbidden": CallOutcome.PERMANENT,
    "global/invalid-parameters": CallOutcome.PERMANENT,
}
# Described in the document's prose only, for any call: "Try again later", an upstream
# outage ("Try again shortly"), the rate limit (about a request a second), whatever its code.
DESCRIBED = [
    ("terminateInstance", 500, "global/internal-error"),
    ("terminateInstance", 503, "provider/internal-unavailable"),
    ("getInstance", 429, "global/quota-exceeded"),
    ("listInstances", 503, "provider/internal-unavailable"),
]


def test_every_error_code_documented_for_the_adapters_calls_is_classified() -> None:
    assert {code for _, _, code in _documented()} == set(DOCUMENTED)


@pytest.mark.parametrize(
    ("operation", "status", "code"), _documented() + DESCRIBED, ids=lambda v: str(v)
)
def test_each_error_lambda_documents_is_classified_as_its_document_says(
    tmp_path: Path, operation: str, status: int, code: str
) -> None:
    canned = f"code:{status}:{code}"
    expected = DOCUMENTED.get(code, CallOutcome.RETRYABLE)
    with govern(LAMBDA, tmp_path) as governed:
        adapter = governed.adapter
        assert isinstance(adapter, LambdaProvider)
        if operation in ("listInstances", "listFilesystems"):
            governed.answer_next(*([""] if operation == "listFilesystems" else []), canned)
            with pytest.raises(ProviderError) as caught:
                adapter.pods()
            outcome = CallOutcome.RETRYABLE if caught.value.retryable else CallOutcome.PERMANENT
        else:
            governed.answer_next(*([""] if operation == "terminateInstance" else []), canned)
            outcome = adapter.terminate(LAMBDA.running, keep="ckpts").outcome
        assert outcome is expected
        answered = governed.exchanges[-1]
    assert conformance_lambda.operation_of(answered.method, answered.path) == (
        conformance_lambda.operation(operation)
    )
    assert answered.status == status


def replayed(entry: dict[str, Any]) -> tuple[LambdaProvider, list[str]]:
    """The adapter answered `entry`'s real body for its call; a terminate's read of the
    instance before it gets the corpus's own getInstance example, and the filesystems the
    smallest list Lambda's document allows (none), since no real one is published."""
    read = next(e["body"] for e in CORPUS if e["call"] == "describe" and e["status"] == 200)
    asked: list[str] = []

    def answer(request: httpx.Request) -> httpx.Response:
        asked.append(f"{request.method} {request.url.path}")
        if request.url.path.endswith("/file-systems"):
            return httpx.Response(200, json={"data": []})
        if entry["call"] == "terminate" and request.method == "GET":
            return httpx.Response(200, json=read)
        return httpx.Response(entry["status"], json=entry["body"])

    client = httpx.Client(transport=httpx.MockTransport(answer))
    return LambdaProvider(client, "key", "https://cloud.lambda.ai/api/v1"), asked


@pytest.mark.parametrize("entry", CORPUS, ids=[f"{e['call']}-{e['status']}" for e in CORPUS])
def test_real_answers_replayed_through_the_adapter(entry: dict[str, Any]) -> None:
    lam, _ = replayed(entry)
    expect = entry["expect"]
    if entry["call"] == "terminate":
        result = lam.terminate("0920582c7ff041399e34823a0be62549", keep="my-filesystem")
        assert result.outcome is CallOutcome(expect["outcome"]), result
        return
    if "error" in expect:
        with pytest.raises(ProviderError) as caught:
            lam.describe("0920582c7ff041399e34823a0be62549")
        assert caught.value.retryable is (expect["error"] == "retryable")
        assert entry["body"]["error"]["code"] in str(caught.value)
        return
    described = (
        lam.pods()[0].description
        if entry["call"] == "pods"
        else lam.describe("0920582c7ff041399e34823a0be62549")
    )
    assert described.state is PodState(expect["state"])
    assert described.hourly_rate_usd == Decimal(expect["hourly_rate_usd"])
    assert sorted(described.filesystems) == expect["filesystems"]


@pytest.mark.parametrize("entry", CORPUS, ids=[f"{e['call']}-{e['status']}" for e in CORPUS])
def test_each_real_answer_is_one_lambdas_document_allows(entry: dict[str, Any]) -> None:
    method, path = {
        "pods": ("GET", "/api/v1/instances"),
        "describe": ("GET", "/api/v1/instances/0920582c7ff041399e34823a0be62549"),
        "terminate": ("POST", TERMINATE),
    }[entry["call"]]
    assert conformance_lambda.answer_errors(method, path, entry["status"], entry["body"]) == []


def test_the_corpus_cites_each_answer() -> None:
    assert CORPUS and all(entry["source"].startswith("https://") for entry in CORPUS)
