"""A machine you own or rent by contract: the pod is a process on the governor's host, or
whatever the operator's stop command stops. Its disk is the machine's and outlives the stop.

Without a command a ref names a process, by pid ("12345") or by pid file
("pidfile:/run/train.pid"), and stopping sends it one signal (SIGTERM by default: the job's
handler checkpoints and exits), then waits for it to be gone. A pid names the process it
named when first seen here: once that process has exited, a new one given the same pid is
not it, and is never signalled.

With a command (an argument list run without a shell, "{ref}" in any argument replaced by
the ref, e.g. `systemctl stop train@{ref}`), stopping runs it and exit status 0 means
stopped. The governor cannot observe what the command stops, so such a pod is described as
running until its stop command has succeeded in this process. Only such a pod can be
resumed, by a resume command given the same way (`systemctl start train@{ref}`: see
LocalCommandProvider); a process ended by a signal cannot be started again from here.

Nothing here has a price: the rate is declared when the pod is registered.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from governor.adapters.providers._http import redact
from governor.domain.model import PodState
from governor.domain.ports import CallOutcome, CallResult, PodDescription, ProviderError

# systemd's default TimeoutStopSec: how long a stopping job usually gets before it is killed.
STOP_LATENCY_S = 90.0
COMMAND_TIMEOUT_S = 30.0
PIDFILE = "pidfile:"
REF_FORM = "a pid (12345) or a pid file (pidfile:/run/train.pid)"
STDERR_LINES = 3  # how much of a failed command's stderr a result quotes
_PID = re.compile(r"\d+")


@dataclass(frozen=True)
class Process:
    """One process: its pid and when it started (ticks since boot, from /proc; None where
    there is no /proc), which tells it apart from a later process given the same pid."""

    pid: int
    started: str | None


def find_process(pid: int) -> Process | None:
    """The live process with `pid`; None if there is none. A zombie counts as none: it has
    exited and holds nothing, it only waits for its parent to collect its status."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        pass  # it exists, owned by another user
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return Process(pid, None)  # no /proc here: the signal check stands alone
    fields = stat.rsplit(")", 1)[-1].split()  # after "pid (command name)"
    if len(fields) < 20:
        return Process(pid, None)
    if fields[0] in ("Z", "X"):
        return None
    return Process(pid, fields[19])


class LocalProvider:
    """Implements StopsPreserving for processes on this host, or through a stop command.

    `stop_command`: the argument list that stops a pod ("{ref}" replaced by its ref), or
    None to signal the process a ref names; `stop_signal`: the signal sent then;
    `command_timeout_s`: how long the command may run before it is killed and the stop
    retried.
    """

    def __init__(
        self,
        *,
        stop_command: Sequence[str] | None = None,
        stop_signal: int = signal.SIGTERM,
        command_timeout_s: float = COMMAND_TIMEOUT_S,
        stop_latency_s: float = STOP_LATENCY_S,
    ) -> None:
        if stop_command is not None and not stop_command:
            raise ValueError("a stop command needs at least the program to run")
        self.stop_latency_s = stop_latency_s
        self._command = None if stop_command is None else tuple(stop_command)
        self._signal = signal.Signals(stop_signal)
        self._command_timeout_s = command_timeout_s
        self._first_seen: dict[str, Process] = {}  # the process each pid ref named
        self._signalled: set[Process] = set()
        self._stopped: set[str] = set()  # refs whose stop command succeeded

    def describe(self, ref: str) -> PodDescription:
        if self._command is not None:
            _check_command_ref(ref)
            return PodDescription(
                PodState.STOPPED if ref in self._stopped else PodState.RUNNING, None
            )
        process = self._process(ref)
        if process is None:
            return PodDescription(PodState.STOPPED, None)
        running = process not in self._signalled
        return PodDescription(PodState.RUNNING if running else PodState.STOPPING, None)

    def stop(self, ref: str) -> CallResult:
        try:
            if self._command is not None:
                return self._stop_by_command(self._command, ref)
            return self._send_signal(ref)
        except ProviderError as exc:
            return CallResult.failed(exc)

    def _stop_by_command(self, command: tuple[str, ...], ref: str) -> CallResult:
        _check_command_ref(ref)
        if ref in self._stopped:
            return CallResult(CallOutcome.DONE, "already stopped by the stop command")
        result = self._run_command("stop", command, ref, failed=CallOutcome.RETRYABLE)
        if result.outcome is CallOutcome.DONE:
            self._stopped.add(ref)
        return result

    def _send_signal(self, ref: str) -> CallResult:
        process = self._process(ref)
        if process is None:
            return CallResult(CallOutcome.DONE, "not running")
        name = self._signal.name
        if process in self._signalled:
            return CallResult(
                CallOutcome.PENDING, f"pid {process.pid} was sent {name}; waiting for it to exit"
            )
        try:
            os.kill(process.pid, self._signal)
        except ProcessLookupError:
            return CallResult(CallOutcome.DONE, "not running")
        except PermissionError:
            return CallResult(
                CallOutcome.PERMANENT,
                f"local may not send {name} to pid {process.pid}: it belongs to another user. "
                "Run the governor as that user, or configure a stop command allowed to stop it "
                "(e.g. through sudo or systemctl).",
            )
        self._signalled.add(process)
        return CallResult(
            CallOutcome.PENDING, f"sent {name} to pid {process.pid}; waiting for it to exit"
        )

    def _process(self, ref: str) -> Process | None:
        """The live process `ref` names, None if it is not running."""
        if ref.startswith(PIDFILE):
            pid = _read_pid_file(Path(ref.removeprefix(PIDFILE)))
            return None if pid is None else find_process(pid)
        process = find_process(_pid(ref, "the ref"))
        if process is None:
            return None
        first = self._first_seen.setdefault(ref, process)
        return process if process == first else None  # the pid now names someone else

    def _run_command(
        self, what: str, command: tuple[str, ...], ref: str, *, failed: CallOutcome
    ) -> CallResult:
        """Runs the `what` ("stop", "resume") command for `ref`: DONE when it exits with 0,
        `failed` when it exits otherwise, quoting the last lines of its stderr."""
        argv = [argument.replace("{ref}", ref) for argument in command]
        program = argv[0]
        try:
            finished = subprocess.run(
                argv,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                errors="replace",
                timeout=self._command_timeout_s,
                check=False,
            )
        except FileNotFoundError:
            return CallResult(
                CallOutcome.PERMANENT,
                f"local {what} command {program!r} was not found: install it or fix the command",
            )
        except subprocess.TimeoutExpired:
            return CallResult(
                CallOutcome.RETRYABLE,
                f"local {what} command {program!r} did not finish within "
                f"{self._command_timeout_s:g} s and was killed",
            )
        except OSError as exc:
            return CallResult(
                CallOutcome.PERMANENT,
                f"local cannot run the {what} command {program!r}: {exc.strerror or exc}",
            )
        if finished.returncode == 0:
            return CallResult(CallOutcome.DONE, f"{what} command {program!r} succeeded")
        said = "\n".join(finished.stderr.strip().splitlines()[-STDERR_LINES:])
        tail = f": {redact(said)[-500:]}" if said else ""
        return CallResult(
            failed,
            f"local {what} command {program!r} exited with status {finished.returncode}{tail}",
        )


class LocalCommandProvider(LocalProvider):
    """A LocalProvider stopping through a stop command that can also resume: implements
    Resumes.

    `resume_command`: the argument list that starts a stopped pod again ("{ref}" replaced,
    e.g. `systemctl start train@{ref}`), run as the stop command is. Exit status 0 means the
    pod runs again, and is described as running from then on; any other status is the
    machine refusing (a unit that is not there, no GPU free), which trying again would not
    change: permanent, in the command's own last words.
    """

    def __init__(
        self,
        *,
        stop_command: Sequence[str],
        resume_command: Sequence[str],
        command_timeout_s: float = COMMAND_TIMEOUT_S,
        stop_latency_s: float = STOP_LATENCY_S,
    ) -> None:
        if not resume_command:
            raise ValueError("a resume command needs at least the program to run")
        super().__init__(
            stop_command=stop_command,
            command_timeout_s=command_timeout_s,
            stop_latency_s=stop_latency_s,
        )
        self._resume_command = tuple(resume_command)

    def resume(self, ref: str) -> CallResult:
        try:
            _check_command_ref(ref)
        except ProviderError as exc:
            return CallResult.failed(exc)
        result = self._run_command(
            "resume", self._resume_command, ref, failed=CallOutcome.PERMANENT
        )
        if result.outcome is CallOutcome.DONE:
            self._stopped.discard(ref)
        return result


def _read_pid_file(path: Path) -> int | None:
    """The pid a pid file holds; None when there is no file (a daemon, and systemd, remove
    it when the process exits)."""
    if not path.is_absolute():
        raise ProviderError(
            f"local pid file {str(path)!r} must be an absolute path", retryable=False
        )
    try:
        text = path.read_text(errors="replace")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ProviderError(
            f"local cannot read the pid file {path}: {exc.strerror or exc}", retryable=False
        ) from None
    return _pid(text, f"the pid file {path}")


def _pid(text: str, what: str) -> int:
    """A pid that may be signalled: never 0, negative (process groups, every process) or 1
    (init), nor the governor itself."""
    text = text.strip()
    if not _PID.fullmatch(text):
        raise ProviderError(
            f"local: {what} holds {text[:40]!r}, not a pid; a ref is {REF_FORM}", retryable=False
        )
    pid = int(text)
    if pid <= 1 or pid == os.getpid():
        raise ProviderError(
            f"local refuses to signal pid {pid}: it is init or the governor itself",
            retryable=False,
        )
    return pid


def _check_command_ref(ref: str) -> None:
    """A ref the stop and resume commands can take as one argument, never as an option."""
    if not ref or ref.startswith("-") or any(ord(c) < 32 or ord(c) == 127 for c in ref):
        raise ProviderError(
            f"local refuses the ref {ref!r} for its commands: it must not be empty, start "
            "with '-' or hold control characters",
            retryable=False,
        )
