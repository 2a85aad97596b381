"""The GCP and Vast adapters' requests, and the fakes' answers, held to the providers' own
published definitions (tests/specs/) rather than to our reading of them.

Every contract test already checks each exchange it makes (see `govern` in conftest.py);
these prove that the checks see the calls that matter and that they catch a request the
provider does not document and an answer outside its schema.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import pytest

from governor.domain.ports import CallOutcome, ProviderError, Resumes, StopsPreserving
from governor.fakes.bigquery import ExportRow
from governor.fakes.gcp import FakeGcp
from governor.fakes.http_cloud import running
from tests.clock import FrozenClock
from tests.contract import conformance_gcp, conformance_vast
from tests.contract.conformance import Exchange, recorder
from tests.contract.conftest import SECRET, Governed, govern
from tests.contract.harness_gcp import EXPORT, MACHINE_TYPE, RATE
from tests.contract.harness_gcp import HARNESS as GCP
from tests.contract.harness_vast import HARNESS as VAST

INSTANCE = "/compute/v1/projects/contract-project/zones/us-central1-a/instances/pod-1"


def _stop_and_resume(governed: Governed) -> None:
    """A stop whose first try fails after it was accepted, then a resume: every call the
    adapter makes."""
    adapter, ref = governed.adapter, governed.harness.running
    assert isinstance(adapter, StopsPreserving) and isinstance(adapter, Resumes)
    adapter.pods()
    governed.harness.refuse_next_stop(governed, True)
    outcomes = [adapter.stop(ref).outcome for _ in range(5)]
    assert CallOutcome.RETRYABLE in outcomes and outcomes[-1] is CallOutcome.DONE, outcomes
    assert adapter.resume(ref).outcome is CallOutcome.DONE


def test_every_compute_engine_call_is_a_documented_method(tmp_path: Path) -> None:
    with govern(GCP, tmp_path) as governed:
        _stop_and_resume(governed)
        called = [conformance_gcp.method_of(e) for e in governed.exchanges]
        assert {m.id for m in called if m} >= {
            "compute.instances.aggregatedList",
            "compute.disks.aggregatedList",
            "compute.instances.get",
            "compute.instances.stop",
            "compute.zoneOperations.get",
            "compute.instances.start",
        }
        assert None not in called
        assert conformance_gcp.off_spec(governed.exchanges) == []


def test_a_request_compute_engine_does_not_document_is_caught() -> None:
    wrong = [
        Exchange("POST", f"{INSTANCE}/halt", {}, None, 200, None),
        Exchange("POST", f"{INSTANCE}/stop", {"discardLocalSsd": ["no"]}, None, 200, None),
        Exchange("POST", f"{INSTANCE}/stop", {"force": ["true"]}, None, 200, None),
        Exchange("GET", INSTANCE.replace("pod-1", "Pod_1"), {}, None, 200, None),
    ]
    errors = conformance_gcp.off_spec(wrong)
    assert len(errors) == 4, errors
    assert "no method of compute.v1" in errors[0] and "not a boolean" in errors[1]
    assert "no query parameter 'force'" in errors[2] and "Pod_1" in errors[3]


def test_an_answer_of_the_fake_outside_the_schema_is_caught(tmp_path: Path) -> None:
    with govern(GCP, tmp_path) as governed:
        _stop_and_resume(governed)
        stop = next(e for e in governed.exchanges if e.path.endswith("/stop") and e.answer)
        described = next(e for e in governed.exchanges if e.path == INSTANCE and e.answer)
    assert conformance_gcp.off_spec([stop, described]) == []
    off = [
        _answered(stop, status="FINISHED"),
        _answered(stop, progress="100"),
        _answered(stop, stoppedBy="governor"),
        _answered(stop, error={"errors": [{"code": 7}]}),
        _answered(described, status="HIBERNATING"),
        _answered(described, disks=[{"diskSizeGb": "a lot"}]),
    ]
    errors = conformance_gcp.off_spec(off)
    assert len(errors) == len(off), errors
    for error, said in zip(
        errors,
        [
            "'FINISHED' is not one of",
            "'100' is not an integer",
            "stoppedBy: not a field",
            "7 is not a string",
            "'HIBERNATING' is not one of",
            "'a lot' is not an int64",
        ],
        strict=True,
    ):
        assert said in error


def _billing_export_read(tmp_path: Path) -> list[Exchange]:
    """The GCP adapter's reads of the billing export: a job still running when asked (polled
    with getQueryResults), and a result of two pages (the second in euros, refused)."""
    clock = FrozenClock()
    fake = FakeGcp(tmp_path / "gcp.json", SECRET, project="contract-project")
    fake.clock = clock.now
    export = fake.export_billing(EXPORT)
    fake.add_pod(GCP.running, RATE, machine_type=MACHINE_TYPE)
    registered = clock.now()
    clock.advance(3 * 3600)
    exchanges: list[Exchange] = []
    with running(fake) as server:
        hooks = {"response": [recorder(exchanges)]}
        with httpx.Client(timeout=10.0, event_hooks=hooks) as client:
            adapter = GCP.billed_adapter(server.url, SECRET, client)
            export.pending_polls = 2
            assert adapter.billed_since(GCP.running, registered, clock.now(), None).amount_usd
            zone, _, name = GCP.running.partition("/")
            hour = timedelta(hours=1)
            euros = ExportRow(
                "contract-project", zone, name, registered, registered + hour, Decimal(1), "EUR"
            )
            export.extra.append(euros)
            export.pending_polls, export.page_size = 0, 1
            with pytest.raises(ProviderError, match="in EUR"):
                adapter.billed_since(GCP.running, registered, clock.now(), None)
    return exchanges


def test_every_bigquery_call_is_a_documented_method(tmp_path: Path) -> None:
    exchanges = _billing_export_read(tmp_path)
    called = [conformance_gcp.method_of(e) for e in exchanges]
    ids = [m.id for m in called if m and m.id.startswith("bigquery.")]
    assert ids.count("bigquery.jobs.query") == 2
    assert ids.count("bigquery.jobs.getQueryResults") == 3  # two polls, one second page
    assert None not in called
    assert conformance_gcp.off_spec(exchanges) == []


def test_a_bigquery_request_or_answer_outside_the_discovery_document_is_caught(
    tmp_path: Path,
) -> None:
    exchanges = _billing_export_read(tmp_path)
    query = next(e for e in exchanges if e.method == "POST")
    results = next(e for e in exchanges if e.method == "GET" and "/queries/" in e.path)
    assert conformance_gcp.off_spec([query, results]) == []
    off = [
        replace(query, body={**query.body, "timeoutMs": "10000"}),
        replace(query, body={**query.body, "parameters": query.body["queryParameters"]}),
        replace(query, path=query.path.replace("/queries", "/query")),
        replace(results, query={**results.query, "useInt64Timestamp": ["true"]}),
        replace(results, query={**results.query, "timeoutMs": ["soon"]}),
        _answered(results, kind="bigquery#queryResponse"),
        _answered(results, totalRows=1),
        _answered(results, jobComplete="yes"),
    ]
    errors = conformance_gcp.off_spec(off)
    assert len(errors) == len(off), errors
    for error, said in zip(
        errors,
        [
            "'10000' is not an integer",
            "parameters: not a field",
            "no method of bigquery.v2",
            "no query parameter 'useInt64Timestamp'",
            "timeoutMs='soon' is not an integer",
            "'bigquery#queryResponse' is not 'bigquery#getQueryResultsResponse'",
            "1 is not a string",
            "'yes' is not a boolean",
        ],
        strict=True,
    ):
        assert said in error


def test_every_vast_call_is_one_the_sdk_makes(tmp_path: Path) -> None:
    with govern(VAST, tmp_path) as governed:
        _stop_and_resume(governed)
        calls = {(e.method, e.path) for e in governed.exchanges}
        assert ("PUT", "/api/v0/instances/1001/") in calls
        assert ("GET", "/api/v1/instances/") in calls
        assert conformance_vast.off_spec(governed.exchanges) == []


def test_a_request_the_vast_sdk_does_not_make_is_caught() -> None:
    path = "/api/v0/instances/1001/"
    wrong = [
        Exchange("POST", path, {}, {"state": "stopped"}, 200, None),
        Exchange("PUT", path, {}, {"state": "paused"}, 200, None),
        Exchange("PUT", path, {}, {"status": "stopped"}, 200, None),
        Exchange("GET", path, {"mine": ["1"]}, None, 200, None),
    ]
    errors = conformance_vast.off_spec(wrong)
    assert len(errors) == 4, errors
    assert "no such endpoint" in errors[0] and "state='paused'" in errors[1]
    assert "no body key 'status'" in errors[2] and "no 'mine'" in errors[3]


def test_an_answer_of_the_vast_fake_with_a_status_the_sdk_does_not_name_is_caught(
    tmp_path: Path,
) -> None:
    with govern(VAST, tmp_path) as governed:
        governed.adapter.describe(VAST.running)
        read = governed.exchanges[-1]
    assert conformance_vast.off_spec([read]) == []
    instance = {**read.answer["instances"], "actual_status": "hibernating"}
    errors = conformance_vast.off_spec([replace(read, answer={"instances": instance})])
    assert errors and "actual_status='hibernating'" in errors[0]


def test_a_vast_listing_field_of_the_wrong_type_is_caught(tmp_path: Path) -> None:
    with govern(VAST, tmp_path) as governed:
        governed.adapter.describe(VAST.running)
        read = governed.exchanges[-1]
    assert {"label", "gpu_name", "num_gpus"} <= set(read.answer["instances"])
    instance = {**read.answer["instances"], "num_gpus": "two", "gpu_name": None}
    errors = conformance_vast.off_spec([replace(read, answer={"instances": instance})])
    assert len(errors) == 2 and "gpu_name=None" in errors[0] and "num_gpus='two'" in errors[1]


def _answered(exchange: Exchange, **fields: Any) -> Exchange:
    return replace(exchange, answer={**exchange.answer, **fields})
