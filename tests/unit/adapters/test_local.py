"""The on-prem adapter against real processes started here, and small stop commands.

A process is signalled once and is done when it has exited; one that is not there (exited,
a zombie, a pid now given to another process, a removed pid file) is done without a signal;
pids that must never be signalled are refused; a stop command runs without a shell, its
failures are classified and its stderr is quoted without secrets. Only a provider with a
resume command can resume, running it the same way; its refusals are permanent.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from governor.adapters.providers import local
from governor.adapters.providers.local import (
    STOP_LATENCY_S,
    LocalCommandProvider,
    LocalProvider,
    Process,
)
from governor.domain.model import PodState
from governor.domain.ports import CallOutcome, ProviderError, Resumes, StopsPreserving

SLEEP = "import time; time.sleep(60)"
IGNORES_SIGTERM = (
    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
    "print('ready', flush=True); time.sleep(60)"
)
RECORD = "import sys; open(sys.argv[1], 'a').write(sys.argv[2] + '\\n')"
FAIL = (
    "import sys; print('first line\\nsecond\\nthird\\nUnit train@x.service not loaded.', "
    "file=sys.stderr); sys.exit(5)"
)

Spawn = Callable[[str], subprocess.Popen[str]]


@pytest.fixture
def spawn() -> Iterator[Spawn]:
    """Starts Python processes, and kills and reaps whatever is left of them afterwards."""
    started: list[subprocess.Popen[str]] = []

    def start(code: str) -> subprocess.Popen[str]:
        process = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
        started.append(process)
        return process

    yield start
    for process in started:
        process.kill()
        process.communicate()


@pytest.fixture
def signals(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    """Every signal the adapter sends (not the existence checks), really sent unless it
    would reach a process group, init or the test run itself."""
    sent: list[tuple[int, int]] = []
    real_kill = os.kill

    def kill(pid: int, sig: int) -> None:
        if sig != 0:
            sent.append((pid, sig))
            if pid <= 1 or pid == os.getpid():
                return
        real_kill(pid, sig)

    monkeypatch.setattr(os, "kill", kill)
    return sent


def pid_file(tmp_path: Path, pid: int | str) -> str:
    path = tmp_path / "train.pid"
    path.write_text(f"{pid}\n")
    return f"pidfile:{path}"


def test_describe_a_running_process_by_pid_and_by_pid_file(spawn: Spawn, tmp_path: Path) -> None:
    process = spawn(SLEEP)
    provider = LocalProvider()
    for ref in (str(process.pid), pid_file(tmp_path, process.pid)):
        described = provider.describe(ref)
        assert described.state is PodState.RUNNING
        assert described.hourly_rate_usd is None and described.storage is None
    assert provider.stop_latency_s == STOP_LATENCY_S
    assert isinstance(provider, StopsPreserving)
    assert not hasattr(provider, "terminate") and not hasattr(provider, "delete")


@pytest.mark.parametrize("by", ["pid", "pid file"])
def test_stop_signals_and_is_done_once_the_process_exited(
    spawn: Spawn, tmp_path: Path, signals: list[tuple[int, int]], by: str
) -> None:
    process = spawn(SLEEP)
    ref = str(process.pid) if by == "pid" else pid_file(tmp_path, process.pid)
    provider = LocalProvider()
    first = provider.stop(ref)
    assert first.outcome is CallOutcome.PENDING and "sent SIGTERM" in first.detail
    assert process.wait(timeout=60) == -signal.SIGTERM
    assert provider.stop(ref).outcome is CallOutcome.DONE
    assert provider.describe(ref).state is PodState.STOPPED
    assert provider.stop(ref).outcome is CallOutcome.DONE
    assert signals == [(process.pid, signal.SIGTERM)]


def test_a_process_still_exiting_is_pending_and_not_signalled_again(
    spawn: Spawn, signals: list[tuple[int, int]]
) -> None:
    process = spawn(IGNORES_SIGTERM)
    assert process.stdout is not None and process.stdout.readline() == "ready\n"
    provider = LocalProvider()
    assert provider.stop(str(process.pid)).outcome is CallOutcome.PENDING
    again = provider.stop(str(process.pid))
    assert again.outcome is CallOutcome.PENDING and "was sent SIGTERM" in again.detail
    assert provider.describe(str(process.pid)).state is PodState.STOPPING
    assert signals == [(process.pid, signal.SIGTERM)]


def test_the_signal_is_configurable(spawn: Spawn) -> None:
    process = spawn(SLEEP)
    result = LocalProvider(stop_signal=signal.SIGUSR1).stop(str(process.pid))
    assert result.outcome is CallOutcome.PENDING and "SIGUSR1" in result.detail
    assert process.wait(timeout=60) == -signal.SIGUSR1


def test_a_process_that_is_not_there_is_done(
    spawn: Spawn, tmp_path: Path, signals: list[tuple[int, int]]
) -> None:
    process = spawn("pass")
    process.wait(timeout=60)
    removed = f"pidfile:{tmp_path / 'removed-on-exit.pid'}"
    provider = LocalProvider()
    for ref in (str(process.pid), removed):
        assert provider.describe(ref).state is PodState.STOPPED
        result = provider.stop(ref)
        assert result.outcome is CallOutcome.DONE and "not running" in result.detail
    assert signals == []


def test_a_zombie_is_not_running(spawn: Spawn, signals: list[tuple[int, int]]) -> None:
    process = spawn("pass")  # exits, and stays a zombie until it is reaped
    stat = Path(f"/proc/{process.pid}/stat")
    deadline = time.monotonic() + 60  # a busy machine can be slow to start the child
    while stat.read_text().rsplit(")", 1)[-1].split()[0] != "Z":
        assert time.monotonic() < deadline, "the child never exited"
        time.sleep(0.01)
    provider = LocalProvider()
    assert provider.describe(str(process.pid)).state is PodState.STOPPED
    assert provider.stop(str(process.pid)).outcome is CallOutcome.DONE
    assert signals == []


def test_a_pid_given_to_another_process_is_never_signalled(
    spawn: Spawn, monkeypatch: pytest.MonkeyPatch, signals: list[tuple[int, int]]
) -> None:
    process = spawn(SLEEP)
    provider = LocalProvider()
    assert provider.describe(str(process.pid)).state is PodState.RUNNING  # first seen
    monkeypatch.setattr(local, "find_process", lambda pid: Process(pid, "a later start"))
    assert provider.describe(str(process.pid)).state is PodState.STOPPED
    assert provider.stop(str(process.pid)).outcome is CallOutcome.DONE
    assert signals == [] and process.poll() is None


def test_a_process_of_another_user_is_permanent_with_what_to_do(
    spawn: Spawn, monkeypatch: pytest.MonkeyPatch
) -> None:
    process = spawn(SLEEP)
    real_kill = os.kill

    def kill(pid: int, sig: int) -> None:
        if sig != 0:
            raise PermissionError(1, "Operation not permitted")
        real_kill(pid, sig)

    monkeypatch.setattr(os, "kill", kill)
    result = LocalProvider().stop(str(process.pid))
    assert result.outcome is CallOutcome.PERMANENT
    assert "another user" in result.detail and "stop command" in result.detail
    assert process.poll() is None


@pytest.mark.parametrize("ref", ["0", "1", "-1", "12a", "", " ", "1_000", "pid:12"])
def test_pids_that_must_never_be_signalled_are_refused(
    ref: str, signals: list[tuple[int, int]]
) -> None:
    provider = LocalProvider()
    with pytest.raises(ProviderError) as caught:
        provider.describe(ref)
    assert caught.value.retryable is False
    assert provider.stop(ref).outcome is CallOutcome.PERMANENT
    assert signals == []


def test_the_governor_never_signals_itself(signals: list[tuple[int, int]]) -> None:
    result = LocalProvider().stop(str(os.getpid()))
    assert result.outcome is CallOutcome.PERMANENT and "governor itself" in result.detail
    assert signals == []


def test_an_unreadable_pid_file_is_permanent_and_named(tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.pid"
    garbage.write_text("not a pid\n")
    directory = tmp_path / "a-directory.pid"
    directory.mkdir()
    provider = LocalProvider()
    for path in (garbage, directory):
        with pytest.raises(ProviderError, match=str(path)) as caught:
            provider.describe(f"pidfile:{path}")
        assert caught.value.retryable is False
        result = provider.stop(f"pidfile:{path}")
        assert result.outcome is CallOutcome.PERMANENT and str(path) in result.detail
    relative = provider.stop("pidfile:run/train.pid")
    assert relative.outcome is CallOutcome.PERMANENT and "absolute" in relative.detail


def test_a_stop_command_gets_the_ref_as_one_argument_without_a_shell(tmp_path: Path) -> None:
    log = tmp_path / "ran.log"
    provider = LocalProvider(stop_command=[sys.executable, "-c", RECORD, str(log), "train@{ref}"])
    ref = "llama; touch pwned $(id)"
    assert provider.describe(ref).state is PodState.RUNNING
    result = provider.stop(ref)
    assert result.outcome is CallOutcome.DONE, result
    assert log.read_text() == f"train@{ref}\n"
    assert provider.describe(ref).state is PodState.STOPPED
    again = provider.stop(ref)
    assert again.outcome is CallOutcome.DONE and "already stopped" in again.detail
    assert log.read_text() == f"train@{ref}\n"  # not run twice
    assert not (tmp_path / "pwned").exists() and not Path("pwned").exists()


def test_a_failing_stop_command_is_retryable_with_its_last_words() -> None:
    provider = LocalProvider(stop_command=[sys.executable, "-c", FAIL, "{ref}"])
    result = provider.stop("x")
    assert result.outcome is CallOutcome.RETRYABLE
    assert "exited with status 5" in result.detail and "train@x.service not loaded" in result.detail
    assert "first line" not in result.detail  # only the last lines
    assert provider.describe("x").state is PodState.RUNNING


def test_a_stop_command_that_hangs_is_killed_and_retryable() -> None:
    provider = LocalProvider(stop_command=[sys.executable, "-c", SLEEP], command_timeout_s=0.2)
    started = time.monotonic()
    result = provider.stop("x")
    assert result.outcome is CallOutcome.RETRYABLE and "within 0.2 s" in result.detail
    assert time.monotonic() - started < 5


def test_a_stop_command_that_cannot_run_is_permanent_and_named(tmp_path: Path) -> None:
    missing = LocalProvider(stop_command=["/nonexistent/stop-train", "{ref}"]).stop("x")
    assert missing.outcome is CallOutcome.PERMANENT and "/nonexistent/stop-train" in missing.detail
    script = tmp_path / "stop-train"
    script.write_text("#!/bin/sh\nexit 0\n")  # not executable
    refused = LocalProvider(stop_command=[str(script)]).stop("x")
    assert refused.outcome is CallOutcome.PERMANENT and str(script) in refused.detail


def test_no_secret_from_the_stop_command_reaches_the_result() -> None:
    leaky = (
        'import sys; print(\'curl -H "Authorization: Bearer sk_live_SECRET_1" '
        "https://x/?api_key=SECRET_2 failed', file=sys.stderr); sys.exit(22)"
    )
    result = LocalProvider(stop_command=[sys.executable, "-c", leaky]).stop("x")
    assert result.outcome is CallOutcome.RETRYABLE and "***" in result.detail
    assert "SECRET_1" not in result.detail and "SECRET_2" not in result.detail


@pytest.mark.parametrize("ref", ["", "-rf", "--all", "a\nb", "a\x00b"])
def test_a_ref_the_command_could_misread_is_refused(tmp_path: Path, ref: str) -> None:
    log = tmp_path / "ran.log"
    provider = LocalProvider(stop_command=[sys.executable, "-c", RECORD, str(log), "{ref}"])
    with pytest.raises(ProviderError, match="refuses the ref"):
        provider.describe(ref)
    assert provider.stop(ref).outcome is CallOutcome.PERMANENT
    assert not log.exists()


def test_a_configuration_that_cannot_work_is_refused_at_once() -> None:
    with pytest.raises(ValueError, match="program"):
        LocalProvider(stop_command=[])
    with pytest.raises(ValueError):
        LocalProvider(stop_signal=999)


def commands(log: Path, resume: list[str] | None = None) -> LocalCommandProvider:
    """A provider whose stop and resume commands log what they ran (a failing resume
    command instead, if given)."""
    return LocalCommandProvider(
        stop_command=[sys.executable, "-c", RECORD, str(log), "stop train@{ref}"],
        resume_command=resume or [sys.executable, "-c", RECORD, str(log), "start train@{ref}"],
    )


def test_only_a_provider_with_a_resume_command_resumes(tmp_path: Path) -> None:
    stop_only = LocalProvider(stop_command=[sys.executable, "-c", RECORD, "x", "{ref}"])
    assert not isinstance(LocalProvider(), Resumes) and not isinstance(stop_only, Resumes)
    both = commands(tmp_path / "ran.log")
    assert isinstance(both, Resumes) and isinstance(both, StopsPreserving)


def test_a_resume_command_starts_a_stopped_pod_again(tmp_path: Path) -> None:
    log = tmp_path / "ran.log"
    provider = commands(log)
    ref = "llama; touch pwned"
    provider.stop(ref)
    assert provider.describe(ref).state is PodState.STOPPED
    result = provider.resume(ref)
    assert result.outcome is CallOutcome.DONE, result
    assert log.read_text() == f"stop train@{ref}\nstart train@{ref}\n"
    assert provider.describe(ref).state is PodState.RUNNING
    assert provider.stop(ref).outcome is CallOutcome.DONE  # and it can be stopped again
    assert log.read_text().count("stop") == 2
    assert not (tmp_path / "pwned").exists() and not Path("pwned").exists()


def test_a_failing_resume_command_is_permanent_with_its_last_words(tmp_path: Path) -> None:
    provider = commands(tmp_path / "ran.log", resume=[sys.executable, "-c", FAIL, "{ref}"])
    provider.stop("x")
    result = provider.resume("x")
    assert result.outcome is CallOutcome.PERMANENT
    assert "resume command" in result.detail and "exited with status 5" in result.detail
    assert "train@x.service not loaded" in result.detail and "first line" not in result.detail
    assert provider.describe("x").state is PodState.STOPPED


def test_a_resume_command_that_hangs_is_killed_and_retryable(tmp_path: Path) -> None:
    provider = LocalCommandProvider(
        stop_command=["true"],  # no interpreter to start: well within the short timeout
        resume_command=[sys.executable, "-c", SLEEP],
        command_timeout_s=0.2,
    )
    provider.stop("x")
    result = provider.resume("x")
    assert result.outcome is CallOutcome.RETRYABLE and "within 0.2 s" in result.detail
    assert provider.describe("x").state is PodState.STOPPED


def test_no_secret_from_the_resume_command_reaches_the_result(tmp_path: Path) -> None:
    leaky = "import sys; print('Bearer sk_live_SECRET_3 refused', file=sys.stderr); sys.exit(1)"
    result = commands(tmp_path / "ran.log", resume=[sys.executable, "-c", leaky]).resume("x")
    assert result.outcome is CallOutcome.PERMANENT and "***" in result.detail
    assert "SECRET_3" not in result.detail


@pytest.mark.parametrize("ref", ["", "-rf", "a\nb"])
def test_a_ref_the_resume_command_could_misread_is_refused(tmp_path: Path, ref: str) -> None:
    log = tmp_path / "ran.log"
    assert commands(log).resume(ref).outcome is CallOutcome.PERMANENT
    assert not log.exists()


def test_a_resume_command_needs_a_program() -> None:
    with pytest.raises(ValueError, match="program"):
        LocalCommandProvider(stop_command=["systemctl", "stop", "{ref}"], resume_command=[])
