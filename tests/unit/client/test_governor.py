"""Governor: the typed directive, quiet retries with backoff, the fail-safe, clear refusals."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from email.utils import format_datetime

import httpx
import pytest

from governor.client import UNREACHABLE, Checkpoint, Governor, GovernorError
from governor.client.core import METRICS_DROPPED
from tests.unit.client.fakes import FakeTime, ScriptedServer, directive

REFUSED = httpx.ConnectError("connection refused")


def test_a_heartbeat_sends_the_contract_and_returns_a_typed_directive() -> None:
    deadline = "2026-01-01T12:00:05+00:00"
    server = ScriptedServer(directive("stop", reason="ceiling", deadline=deadline, message="save"))
    with server.governor() as gov:
        got = gov.heartbeat(
            7,
            phase="training",
            total_steps=100,
            checkpoint=Checkpoint(6, "/ckpt/6"),
            metrics={"loss": float("nan"), "lr": 0.1},
        )

    request = server.requests[0]
    assert request.url.path == "/v1/runs/run-1/heartbeat"
    assert request.headers["Authorization"] == "Bearer job-token"
    assert server.bodies() == [
        {
            "step": 7,
            "status": "running",
            "phase": "training",
            "total_steps": 100,
            "checkpoint": {"step": 6, "path": "/ckpt/6"},
            "metrics": {"loss": "NaN", "lr": 0.1},
        }
    ]
    assert (got.action, got.reason, got.message) == ("stop", "ceiling", "save")
    assert got.should_stop and not got.should_checkpoint
    assert got.deadline == datetime(2026, 1, 1, 12, 0, 5, tzinfo=UTC)
    assert got.budget is not None and got.budget.remaining_usd == Decimal("1.00")
    assert gov.directive == got


def test_transient_failures_are_retried_with_exponential_backoff() -> None:
    time = FakeTime()
    server = ScriptedServer(REFUSED, httpx.ReadTimeout("slow"), 503, 500, directive())
    gov = server.governor(time)

    got = gov.heartbeat(1, retry_for_s=60)

    assert got.action == "continue" and got.budget is not None
    assert time.sleeps == [0.5, 1.0, 2.0, 4.0]
    assert len(server.requests) == 5 and gov.in_contact


@pytest.mark.parametrize("retry_after", ["7", "date"])
def test_429_waits_as_long_as_retry_after_says(retry_after: str) -> None:
    if retry_after == "date":
        retry_after = format_datetime(datetime.now(UTC) + timedelta(seconds=8), usegmt=True)
    time = FakeTime()
    busy = httpx.Response(429, headers={"Retry-After": retry_after}, json={})
    gov = ScriptedServer(busy, directive()).governor(time)

    gov.heartbeat(1, retry_for_s=60)

    [waited] = time.sleeps
    assert 6 <= waited <= 8


def test_without_patience_a_failure_hands_back_the_last_directive_and_the_backoff() -> None:
    time = FakeTime()
    server = ScriptedServer(directive("checkpoint", next_heartbeat_s=5), REFUSED)
    gov = server.governor(time)
    gov.heartbeat(1)

    first, second = gov.heartbeat(2), gov.heartbeat(3)

    assert (first.action, first.next_heartbeat_s) == ("checkpoint", 0.5)
    assert (second.action, second.next_heartbeat_s) == ("checkpoint", 1.0)
    assert time.sleeps == [] and not gov.in_contact


def test_fail_closed_unreachable_for_fail_safe_after_s_means_stop_and_it_stays_stop() -> None:
    time = FakeTime()
    server = ScriptedServer(directive(), REFUSED)
    gov = server.governor(time, fail_safe_after_s=10)
    gov.heartbeat(1)

    time.now += 9.8
    almost = gov.heartbeat(2)
    assert almost.action == "continue"
    assert almost.next_heartbeat_s == pytest.approx(0.2)  # come back when the fail-safe is due
    time.now += 0.2
    lost = gov.heartbeat(3)
    assert lost.should_stop and lost.reason == UNREACHABLE
    assert lost.message is not None and "10 s" in lost.message
    assert lost.budget is not None  # the last figures the governor gave

    server.answer(directive("continue"))
    assert gov.heartbeat(4).should_stop  # a stop, once given, stays a stop


def test_fail_safe_counts_from_the_start_when_the_governor_never_answered() -> None:
    time = FakeTime()
    gov = ScriptedServer(REFUSED).governor(time, fail_safe_after_s=3)

    got = gov.heartbeat(0, retry_for_s=60)

    assert got.should_stop and got.reason == UNREACHABLE
    assert time.sleeps == [0.5, 1.0, 1.5]  # never retried past the fail-safe


def test_fail_open_keeps_training_on_the_last_directive() -> None:
    time = FakeTime()
    server = ScriptedServer(directive(), REFUSED)
    gov = server.governor(time, fail_safe_after_s=10, fail_open=True)
    gov.heartbeat(1)

    time.now += 3600
    got = gov.heartbeat(2)

    assert got.action == "continue" and got.reason is None


@pytest.mark.parametrize(
    ("status", "hint"),
    [
        (401, "GOVERNOR_JOB_TOKEN"),
        (403, "not run run-1's"),
        (404, "no run run-1"),
        (422, "refused"),
    ],
)
def test_a_refusal_is_a_clear_error_at_once(status: int, hint: str) -> None:
    time = FakeTime()
    server = ScriptedServer(status)
    gov = server.governor(time)

    with pytest.raises(GovernorError, match=hint) as raised:
        gov.heartbeat(1, retry_for_s=60)

    assert raised.value.status == status
    assert len(server.requests) == 1 and time.sleeps == []


def test_report_failure_posts_an_event_and_says_whether_it_got_through() -> None:
    server = ScriptedServer({"id": 1}, REFUSED)
    gov = server.governor(FakeTime())

    assert gov.report_failure("model", "CUDA out of memory", kind="oom") is True
    assert gov.report_failure("harness", "gone") is False
    assert server.bodies("/events")[0] == {
        "category": "model",
        "message": "CUDA out of memory",
        "kind": "oom",
    }


def test_from_env_reads_url_run_and_job_token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GOVERNOR_URL", "http://governor.test")
    monkeypatch.setenv("GOVERNOR_RUN_ID", "run-9")
    for name in ("GOVERNOR_JOB_TOKEN", "GOVERNOR_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(GovernorError, match="GOVERNOR_JOB_TOKEN not set"):
        Governor.from_env()

    monkeypatch.setenv("GOVERNOR_JOB_TOKEN", "gov_job_t")
    monkeypatch.setenv("GOVERNOR_TOKEN", "gov_job_the_former_one")
    with Governor.from_env(fail_safe_after_s=5) as gov:
        assert (gov.run_id, gov.fail_safe_after_s) == ("run-9", 5)
        assert gov._http.headers["authorization"] == "Bearer gov_job_t"


def test_from_env_still_reads_the_former_name_and_says_to_move(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("GOVERNOR_URL", "http://governor.test")
    monkeypatch.setenv("GOVERNOR_RUN_ID", "run-9")
    monkeypatch.delenv("GOVERNOR_JOB_TOKEN", raising=False)
    monkeypatch.setenv("GOVERNOR_TOKEN", "gov_job_t")
    with caplog.at_level(logging.WARNING), Governor.from_env() as gov:
        assert gov._http.headers["authorization"] == "Bearer gov_job_t"
    assert "GOVERNOR_TOKEN is deprecated for the job's token: set GOVERNOR_JOB_TOKEN" in (
        caplog.text
    )


@pytest.mark.parametrize(
    ("token", "role"),
    [("gov_op_x", "an operator"), ("gov_view_x", "a viewer"), ("gov_agent_x", "an agent")],
)
def test_a_token_of_another_role_is_refused_before_any_call(token: str, role: str) -> None:
    server = ScriptedServer({"action": "continue"})
    with pytest.raises(GovernorError, match=f"is {role} token .* not a job token") as refused:
        Governor("http://governor.test", "run-1", token, transport=httpx.MockTransport(server))
    assert "GOVERNOR_JOB_TOKEN" in str(refused.value)
    assert server.requests == []


def ended() -> httpx.Response:
    body = {"error": {"code": "run_ended", "message": "run run-1 ended (stopped)"}}
    return httpx.Response(409, json=body)


def test_a_run_that_has_ended_is_a_stop_never_an_error() -> None:
    server = ScriptedServer(directive(), ended())
    with server.governor() as gov:
        assert gov.heartbeat(1).action == "continue"
        got = gov.heartbeat(2, status="finished")
        assert (got.action, got.reason) == ("stop", "run-ended")
        assert got.message is not None and "ended" in got.message
        assert got.budget is not None  # what was last known stays
        assert gov.report_failure("harness", "late note") is False


def test_another_conflict_is_still_a_refusal() -> None:
    conflict = httpx.Response(409, json={"error": {"code": "conflict", "message": "no"}})
    with ScriptedServer(conflict).governor() as gov, pytest.raises(GovernorError) as caught:
        gov.heartbeat(1)
    assert caught.value.status == 409


def test_metrics_too_large_are_dropped_once_and_the_beat_goes_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    server = ScriptedServer(413, directive(), 413, directive())
    with server.governor() as gov:
        assert gov.heartbeat(1, metrics={"loss": 1.0}).action == "continue"
        assert gov.heartbeat(2, metrics={"loss": 0.9}).action == "continue"
    assert [("metrics" in b) for b in server.bodies()] == [True, False, True, False]
    assert [r.message for r in caplog.records].count(METRICS_DROPPED) == 1


def test_metrics_over_the_governors_limits_are_dropped_before_sending(
    caplog: pytest.LogCaptureFixture,
) -> None:
    server = ScriptedServer(directive())
    with server.governor() as gov:
        gov.heartbeat(1, metrics={f"m{n}": n for n in range(65)})
        gov.heartbeat(2, metrics={"note": "x" * 17_000})
        gov.heartbeat(3, metrics={"loss": 0.5})
    assert [b.get("metrics") for b in server.bodies()] == [None, None, {"loss": 0.5}]
    assert [r.message for r in caplog.records].count(METRICS_DROPPED) == 1


def test_an_event_too_large_is_dropped_not_raised() -> None:
    with ScriptedServer(413).governor() as gov:
        assert gov.report_failure("model", "x" * 100, evidence={"blob": "y" * 100}) is False
