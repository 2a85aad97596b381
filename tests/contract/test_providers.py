"""The contract every provider adapter keeps, each against a fake of its cloud over HTTP
(the on-prem and fake providers, which have no cloud, in the tests that need none).

Stopping is idempotent (already stopped or gone is done), a preserving adapter terminates
no pod a stop works for, failures are classified the same way everywhere (rate limits, 5xx,
timeouts and malformed bodies retryable; a refused key permanent) and no secret reaches an
error text or a log line. An adapter resumes exactly where its provider can start a stopped
pod again: the pod then runs and bills again; resuming is idempotent; a pod that is not
there, or a refusal for want of capacity, is permanent in the provider's words; failures are
classified as for a stop.
"""

from __future__ import annotations

import logging
import time
from decimal import Decimal
from pathlib import Path

import pytest

from governor.domain.model import PodState
from governor.domain.ports import (
    CallOutcome,
    CallResult,
    Resumes,
    StopsPreserving,
    TerminateOnly,
)
from governor.fakes.http_cloud import HOLD
from tests.contract.conftest import HARNESSES, SECRET, Governed, Subject, govern
from tests.contract.harness import Harness

FAILURES = [
    ("429", "rate limited"),
    ("500", ""),
    (HOLD, "timed out"),
    ("malformed", "body that is not"),  # not JSON, not EC2's XML: what the API speaks
]


def halt(governed: Governed, ref: str) -> CallResult:
    return governed.subject.halt(ref)


def halt_until_done(subject: Subject, ref: str) -> CallResult:
    for _ in range(200):
        result = subject.halt(ref)
        assert result.outcome in (CallOutcome.DONE, CallOutcome.PENDING), result
        if result.outcome is CallOutcome.DONE:
            return result
        time.sleep(0.01)  # a process may take a moment to exit on its signal
    raise AssertionError(f"{type(subject.adapter).__name__} never finished stopping {ref}")


def test_the_adapter_stops_or_else_terminates_never_a_pod_a_stop_works_for(
    subject: Subject,
) -> None:
    adapter = subject.adapter
    preserving = isinstance(adapter, StopsPreserving)
    assert preserving or isinstance(adapter, TerminateOnly)
    assert preserving == (subject.keep is None)
    if not preserving:
        return
    assert not hasattr(adapter, "delete")
    if isinstance(adapter, TerminateOnly):  # EC2: for the instances no stop call works for
        assert not adapter.describe(subject.running).terminate_only
        refused = adapter.terminate(subject.running, keep="any-volume")
        assert refused.outcome is CallOutcome.PERMANENT and "can be stopped" in refused.detail
    assert subject.billing(subject.running)


def test_describe_reads_a_running_pod(subject: Subject) -> None:
    described = subject.adapter.describe(subject.running)
    assert described.state is PodState.RUNNING
    assert subject.billing(subject.running)
    rate = described.hourly_rate_usd
    assert rate is None or (isinstance(rate, Decimal) and rate >= 0)


def test_stop_is_idempotent(subject: Subject) -> None:
    ref = subject.running
    halt_until_done(subject, ref)
    assert subject.stopped(ref) and not subject.billing(ref)
    assert subject.halt(ref).outcome is CallOutcome.DONE
    assert subject.adapter.describe(ref).state is not PodState.RUNNING


def test_a_pod_that_is_not_there_is_done(subject: Subject) -> None:
    assert subject.halt(subject.missing).outcome is CallOutcome.DONE


@pytest.mark.parametrize(("answer", "says"), FAILURES, ids=[a for a, _ in FAILURES])
def test_transient_failures_are_retryable(governed: Governed, answer: str, says: str) -> None:
    governed.answer_next(answer)
    result = halt(governed, governed.harness.running)
    assert result.outcome is CallOutcome.RETRYABLE, result
    assert says in result.detail
    assert SECRET not in result.detail
    halt_until_done(governed.subject, governed.harness.running)  # the next tries go through


def test_retry_after_is_carried(honours_retry_after: Governed) -> None:
    governed = honours_retry_after
    governed.answer_next("429:7")
    result = halt(governed, governed.harness.running)
    assert result.outcome is CallOutcome.RETRYABLE and result.retry_after_s == 7.0
    governed.answer_next("429")
    assert halt(governed, governed.harness.running).retry_after_s is None


def test_a_refused_key_is_permanent_and_never_echoed(governed: Governed) -> None:
    wrong = "sk_WRONG_KEY_never_echoed_77"
    with governed.client() as client:
        adapter = governed.adapter_with(wrong, client)
        if isinstance(adapter, StopsPreserving):
            result = adapter.stop(governed.harness.running)
        else:
            result = adapter.terminate(governed.harness.running, keep=str(governed.harness.keep))
    assert result.outcome is CallOutcome.PERMANENT, result
    assert wrong not in result.detail
    assert not governed.harness.stopped(governed.cloud, governed.harness.running)


def test_no_log_line_or_error_carries_the_secret(
    governed: Governed, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    details = []
    for answer, _ in FAILURES:
        governed.answer_next(answer)
        details.append(halt(governed, governed.harness.running).detail)
    halt_until_done(governed.subject, governed.harness.running)
    assert caplog.records, "expected the HTTP client to log its requests"
    assert SECRET not in caplog.text
    assert all(SECRET not in detail for detail in details)


def test_terminate_only_refuses_without_the_named_filesystem(terminating: Governed) -> None:
    governed, adapter = terminating, terminating.adapter
    assert isinstance(adapter, TerminateOnly)
    result = adapter.terminate(governed.harness.running, keep="not-attached-fs")
    assert result.outcome is CallOutcome.PERMANENT and "not-attached-fs" in result.detail
    assert governed.harness.destructive_calls(governed.cloud) == []
    assert not governed.harness.stopped(governed.cloud, governed.harness.running)


# resume ----------------------------------------------------------------------------------


def test_the_adapter_resumes_exactly_where_its_provider_can(subject: Subject) -> None:
    assert isinstance(subject.adapter, Resumes) == subject.resumes
    assert hasattr(subject.adapter, "resume") == subject.resumes


def test_a_stopped_pod_resumes_and_bills_again(resumer: Subject) -> None:
    ref = resumer.running
    halt_until_done(resumer, ref)
    result = resumer.resume(ref)
    assert result.outcome is CallOutcome.DONE, result
    assert resumer.adapter.describe(ref).state is PodState.RUNNING
    assert resumer.billing(ref) and not resumer.stopped(ref)
    halt_until_done(resumer, ref)  # and it can be stopped again
    assert resumer.stopped(ref) and not resumer.billing(ref)


def test_resuming_is_idempotent(resumer: Subject) -> None:
    ref = resumer.running
    assert resumer.resume(ref).outcome is CallOutcome.DONE  # running already
    halt_until_done(resumer, ref)
    for _ in range(2):
        result = resumer.resume(ref)
        assert result.outcome is CallOutcome.DONE, result
        assert resumer.billing(ref)
    assert resumer.adapter.describe(ref).state is PodState.RUNNING


def test_resuming_a_pod_that_is_not_there_is_permanent(resumer: Subject) -> None:
    result = resumer.resume(resumer.missing)
    assert result.outcome is CallOutcome.PERMANENT, result


def test_a_refusal_for_want_of_capacity_is_permanent_in_the_providers_words(
    refuser: Subject,
) -> None:
    ref = refuser.running
    halt_until_done(refuser, ref)
    assert refuser.refuse_next_resume is not None
    refuser.refuse_next_resume()
    refused = refuser.resume(ref)
    assert refused.outcome is CallOutcome.PERMANENT, refused
    assert refuser.refusal_says in refused.detail
    assert refuser.stopped(ref) and not refuser.billing(ref)
    assert refuser.resume(ref).outcome is CallOutcome.DONE  # once there is room again
    assert refuser.billing(ref)


@pytest.mark.parametrize(("answer", "says"), FAILURES, ids=[a for a, _ in FAILURES])
def test_transient_resume_failures_are_retryable(
    resuming: Governed, answer: str, says: str
) -> None:
    subject, ref = resuming.subject, resuming.harness.running
    halt_until_done(subject, ref)
    resuming.answer_next("", answer)  # the read goes through, the start fails
    result = subject.resume(ref)
    assert result.outcome is CallOutcome.RETRYABLE, result
    assert says in result.detail
    assert SECRET not in result.detail
    assert subject.resume(ref).outcome is CallOutcome.DONE  # the next try goes through
    assert subject.billing(ref)


def test_a_resume_with_a_refused_key_is_permanent_and_never_echoed(resuming: Governed) -> None:
    ref = resuming.harness.running
    halt_until_done(resuming.subject, ref)
    wrong = "sk_WRONG_KEY_never_echoed_77"
    with resuming.client() as client:
        adapter = resuming.adapter_with(wrong, client)
        assert isinstance(adapter, Resumes)
        result = adapter.resume(ref)
    assert result.outcome is CallOutcome.PERMANENT, result
    assert wrong not in result.detail
    assert not resuming.harness.billing(resuming.cloud, ref)


def test_no_resume_error_or_log_line_carries_the_secret(
    resuming: Governed, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    subject, ref = resuming.subject, resuming.harness.running
    halt_until_done(subject, ref)
    details = []
    for answer, _ in FAILURES:
        resuming.answer_next("", answer)
        details.append(subject.resume(ref).detail)
    if subject.refuse_next_resume is not None:
        subject.refuse_next_resume()
        details.append(subject.resume(ref).detail)
    assert subject.resume(ref).outcome is CallOutcome.DONE
    assert caplog.records, "expected the HTTP client to log its requests"
    assert SECRET not in caplog.text
    assert all(SECRET not in detail for detail in details)


@pytest.mark.parametrize("transient", [False, True], ids=["permanent", "transient"])
def test_a_stop_refused_after_it_was_sent_is_never_taken_as_accepted(
    refuses_stops: Governed, transient: bool
) -> None:
    """A refusal reported late (a failed Operation) or without an error code is a failure,
    permanent unless the provider's words say try again; the next tries then go through."""
    governed, ref = refuses_stops, refuses_stops.harness.running
    governed.harness.refuse_next_stop(governed, transient)
    results = [halt(governed, ref)]
    while results[-1].outcome is CallOutcome.PENDING and len(results) < 5:
        results.append(halt(governed, ref))
    expected = CallOutcome.RETRYABLE if transient else CallOutcome.PERMANENT
    assert results[-1].outcome is expected, results
    assert not governed.harness.stopped(governed.cloud, ref)
    assert governed.harness.billing(governed.cloud, ref)
    halt_until_done(governed.subject, ref)


DOCUMENTED = [
    pytest.param(harness, answer, transient, id=f"{harness.name}-{answer[:40]}")
    for harness in HARNESSES
    for transient, answers in (
        (True, harness.transient_stop_failures),
        (False, harness.stop_refusals),
    )
    for answer in answers
]


def test_every_provider_declares_its_documented_failures() -> None:
    assert all(h.transient_stop_failures and h.stop_refusals for h in HARNESSES)


@pytest.mark.parametrize(("harness", "answer", "transient"), DOCUMENTED)
def test_a_stop_survives_a_documented_transient_failure_and_never_passes_a_refusal(
    harness: Harness, answer: str, transient: bool, tmp_path: Path
) -> None:
    """The provider's own words for "try again" make the stop retryable, and the next tries
    stop the pod; its words for "no" make it permanent (never done, never pending), the pod
    still billing: the governor's stop order then fails and raises a critical event
    (tests/integration/test_enforcement.py), where a pending or done one would wait or
    report the pod stopped."""
    with govern(harness, tmp_path) as governed:
        ref = harness.running
        governed.answer_next("", answer)  # the pod is read, then the stop call fails
        result = halt(governed, ref)
        assert result.outcome is (CallOutcome.RETRYABLE if transient else CallOutcome.PERMANENT), (
            result
        )
        assert SECRET not in result.detail
        assert not harness.stopped(governed.cloud, ref) and harness.billing(governed.cloud, ref)
        if transient:
            halt_until_done(governed.subject, ref)
            assert harness.stopped(governed.cloud, ref)
