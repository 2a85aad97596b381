"""The job's side of the heartbeat protocol: one call in, one typed directive out.

Transient failures (connection errors, timeouts, 5xx, 429) never raise: the last directive
comes back with `next_heartbeat_s` set to the backoff delay, and once the governor has been
unreachable for `fail_safe_after_s` the directive becomes a fail-safe `stop` (fail closed)
unless the client was built with `fail_open=True`. A 4xx (wrong token, wrong run) raises
GovernorError at once, except: a run that has ended (409 `run_ended`) is a `stop`, never an
error; a payload too large (413) is dropped, logged once (a heartbeat goes again without its
metrics; an event report returns False).
"""

from __future__ import annotations

import json
import logging
import math
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields, replace
from datetime import UTC, datetime
from decimal import Decimal
from email.utils import parsedate_to_datetime
from typing import Any, Literal

import httpx

logger = logging.getLogger(__name__)

Action = Literal["continue", "checkpoint", "stop"]
Status = Literal["running", "checkpointing", "stopping", "stopped", "finished", "failed"]
Phase = Literal[
    "loading", "compiling", "canary", "training", "checkpointing", "evaluation", "export"
]
Category = Literal["harness", "model", "provider"]

UNREACHABLE = "unreachable"  # the reason of the client's own fail-safe stop
ENDED = "run-ended"  # the governor says the run has ended: the job should stop
CANARY_HOLD = "canary-hold"  # a canary_only plan: report "canary" until training is released
NON_FINITE_REASON = "non-finite"  # the loss blew up: stop without saving over the last good weights
DEFAULT_HEARTBEAT_S = 15.0  # until the governor says otherwise
FIRST_BACKOFF_S = 0.5
# What the governor takes in a heartbeat's metrics: more is dropped here, not refused there.
MAX_METRICS = 64
JOB_TOKEN = "GOVERNOR_JOB_TOKEN"  # where from_env reads the run's job token
FORMER_JOB_TOKEN = "GOVERNOR_TOKEN"  # its former name, still read
CLAIM = "GOVERNOR_CLAIM"  # a launched job's one-time claim secret, exchanged for the two above
CLAIM_WAIT_S = 600.0  # how long a claim waits for its pod to be registered
CLAIM_RETRY_S = 5.0
# The prefixes of the governor's other tokens: none of them is a job's (gov_job_...).
OTHER_ROLES = {
    "gov_op_": "an operator",
    "gov_view_": "a viewer",
    "gov_agent_": "an agent",
    "gov_gate_": "a gate",
}
MAX_METRICS_BYTES = 16 * 1024
METRICS_DROPPED = (
    f"Heartbeat metrics over the governor's limits ({MAX_METRICS} names, "
    f"{MAX_METRICS_BYTES // 1024} KiB): dropped."
)
MAX_BACKOFF_S = 30.0


class GovernorError(Exception):
    """The governor refused a call (or the client is not configured): retrying will not help."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class BudgetFigures:
    """The budget as of the directive, in dollars."""

    spent_usd: Decimal
    committed_usd: Decimal
    effective_ceiling_usd: Decimal
    remaining_usd: Decimal
    burn_rate_usd_per_hour: Decimal


@dataclass(frozen=True)
class Directive:
    """What the governor wants: `continue`, `checkpoint` (save now), or `stop` (save and exit
    before `deadline`). `budget` is None until the governor has answered."""

    action: Action
    reason: str | None = None
    message: str | None = None
    deadline: datetime | None = None
    next_heartbeat_s: float = DEFAULT_HEARTBEAT_S
    budget: BudgetFigures | None = None

    @property
    def should_checkpoint(self) -> bool:
        return self.action == "checkpoint"

    @property
    def should_stop(self) -> bool:
        return self.action == "stop"

    @property
    def held_to_canary(self) -> bool:
        """The plan is canary_only and unproven: the job is in its canary, not training."""
        return self.reason == CANARY_HOLD and not self.should_stop

    @property
    def save_first(self) -> bool:
        """Whether to save before stopping: not when the weights may already be NaN (the
        last good checkpoint must not be rotated out)."""
        return self.reason != NON_FINITE_REASON

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> Directive:
        deadline = body.get("deadline")
        return cls(
            action=body["action"],
            reason=body.get("reason"),
            message=body.get("message"),
            deadline=datetime.fromisoformat(deadline) if deadline else None,
            next_heartbeat_s=float(body["next_heartbeat_s"]),
            budget=BudgetFigures(*(Decimal(body["budget"][f.name]) for f in fields(BudgetFigures))),
        )


@dataclass(frozen=True)
class Checkpoint:
    step: int
    path: str


class _Ended(Exception):
    """The run has ended: nothing more is taken from its job."""


class _TooLarge(Exception):
    """The governor would not take a body this large."""


class _Unavailable(Exception):
    def __init__(self, what: str, retry_after_s: float | None = None) -> None:
        super().__init__(what)
        self.retry_after_s = retry_after_s


class Governor:
    """A training job's connection to the governor (see GovernorLoop for a background thread).

    gov = Governor.from_env()
    if gov.heartbeat(step).should_stop: save_and_exit()
    """

    def __init__(
        self,
        url: str,
        run_id: str,
        token: str,
        *,
        fail_safe_after_s: float = 600.0,
        fail_open: bool = False,
        timeout_s: float = 10.0,
        transport: httpx.BaseTransport | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        _refuse_other_roles(token)
        self.run_id = run_id
        self.fail_safe_after_s = fail_safe_after_s
        self.fail_open = fail_open
        self.directive = Directive("continue")
        self._http = httpx.Client(
            base_url=url,
            headers={"Authorization": f"Bearer {token}"},
            timeout=timeout_s,
            transport=transport,
        )
        self._clock = clock
        self._sleep = sleep
        self._heard_at = clock()  # the fail-safe counts from here until the first answer
        self._failures = 0
        self._retry_in_s = 0.0
        self._warned: set[str] = set()  # what has been logged once already

    @classmethod
    def from_env(cls, **options: Any) -> Governor:
        """Built from GOVERNOR_URL, GOVERNOR_RUN_ID and GOVERNOR_JOB_TOKEN; `options` as
        __init__. A job a launch gate accepted has GOVERNOR_CLAIM instead of the run's id
        and token: they are claimed with it, once (`claim`), and set in the environment for
        the job's other processes. GOVERNOR_TOKEN, the job token's former name, is still read
        (with a warning in the log) when GOVERNOR_JOB_TOKEN is not set."""
        names = ("GOVERNOR_URL", "GOVERNOR_RUN_ID", JOB_TOKEN)
        values = [os.environ.get(name, "") for name in names]
        if values[0] and not values[1] and os.environ.get(CLAIM):
            run_id, token = claim(values[0], os.environ[CLAIM], **_claim_options(options))
            os.environ["GOVERNOR_RUN_ID"], os.environ[JOB_TOKEN] = run_id, token
            return cls(values[0], run_id, token, **options)
        if not values[2] and os.environ.get(FORMER_JOB_TOKEN):
            logger.warning(
                "governor: %s is deprecated for the job's token: set %s instead",
                FORMER_JOB_TOKEN,
                JOB_TOKEN,
            )
            values[2] = os.environ[FORMER_JOB_TOKEN]
        missing = [name for name, value in zip(names, values, strict=True) if not value]
        if missing:
            raise GovernorError(
                f"{', '.join(missing)} not set: the run's id and job token come from "
                "POST /v1/budgets/{id}/runs ('governor run create')"
            )
        return cls(*values, **options)

    @property
    def in_contact(self) -> bool:
        """The last call was answered."""
        return self._failures == 0

    def heartbeat(
        self,
        step: int,
        *,
        status: Status = "running",
        phase: Phase | None = None,
        total_steps: int | None = None,
        checkpoint: Checkpoint | None = None,
        metrics: Mapping[str, Any] | None = None,
        retry_for_s: float = 0.0,
    ) -> Directive:
        """Check in and get the directive. Call again after its `next_heartbeat_s`.

        Transient failures are retried for up to `retry_for_s` (never past the fail-safe).
        A stop, once given, stays a stop.
        """
        body: dict[str, Any] = {"step": step, "status": status}
        if phase is not None:
            body["phase"] = phase
        if total_steps is not None:
            body["total_steps"] = total_steps
        if checkpoint is not None:
            body["checkpoint"] = {"step": checkpoint.step, "path": checkpoint.path}
        if metrics is not None:
            sent = _encoded(metrics)
            if _fits(sent):
                body["metrics"] = sent
            else:
                self._warn_once("metrics", METRICS_DROPPED)
        path = f"/v1/runs/{self.run_id}/heartbeat"
        try:
            reply = self._deliver(path, body, retry_for_s)
        except _Ended as exc:
            self.directive = Directive("stop", ENDED, str(exc), budget=self.directive.budget)
            return self.directive
        if reply is None:
            return replace(self._unreachable(), next_heartbeat_s=self._retry_in_s)
        directive = Directive.from_json(reply)
        if directive.should_stop or not self.directive.should_stop:
            self.directive = directive
        return self.directive

    def report_failure(
        self,
        category: Category,
        message: str,
        *,
        kind: str | None = None,
        evidence: Mapping[str, Any] | None = None,
        retry_for_s: float = 0.0,
    ) -> bool:
        """Record a failure in the governor's event log; False if it could not be delivered.

        `category` is harness, model or provider; `kind="oom"` is always recorded as model.
        """
        body: dict[str, Any] = {"category": category, "message": message[:2000]}
        if kind is not None:
            body["kind"] = kind
        if evidence is not None:
            body["evidence"] = dict(evidence)
        try:
            return self._send(f"/v1/runs/{self.run_id}/events", body, retry_for_s) is not None
        except _TooLarge:
            self._warn_once("event", "An event report was too large for the governor: dropped.")
        except _Ended:
            logger.info("The run has ended: the event was not recorded.")
        return False

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Governor:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    # --- transport, backoff and fail-safe ------------------------------------------------

    def _deliver(
        self, path: str, body: dict[str, Any], retry_for_s: float
    ) -> dict[str, Any] | None:
        """A heartbeat; one too large for the governor goes again without its metrics."""
        try:
            return self._send(path, body, retry_for_s)
        except _TooLarge:
            if "metrics" not in body:
                raise
            self._warn_once("metrics", METRICS_DROPPED)
            return self._send(path, {k: v for k, v in body.items() if k != "metrics"}, retry_for_s)

    def _warn_once(self, what: str, message: str) -> None:
        if what not in self._warned:
            self._warned.add(what)
            logger.warning(message)

    def _send(self, path: str, body: dict[str, Any], retry_for_s: float) -> dict[str, Any] | None:
        give_up_at = self._clock() + retry_for_s
        while True:
            try:
                reply = self._post(path, body)
            except _Unavailable as exc:
                self._failed(exc)
                if self._lost() or self._clock() + self._retry_in_s > give_up_at:
                    return None
                self._sleep(self._retry_in_s)
                continue
            if self._failures:
                logger.info("The governor answers again after %d failed calls.", self._failures)
            self._failures, self._heard_at = 0, self._clock()
            return reply

    def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        try:
            response = self._http.post(path, json=body)
        except httpx.TransportError as exc:  # refused, reset, timed out
            raise _Unavailable(f"{type(exc).__name__}: {exc}") from exc
        if response.status_code == 429 or response.status_code >= 500:
            raise _Unavailable(f"HTTP {response.status_code}", _retry_after_s(response))
        if response.status_code == 413:
            raise _TooLarge()
        if response.status_code == 409 and _code(response) == "run_ended":
            raise _Ended(_said(response))
        if response.is_error:
            raise _refusal(response, self.run_id)
        reply: dict[str, Any] = response.json()
        return reply

    def _failed(self, exc: _Unavailable) -> None:
        self._failures += 1
        if self._failures == 1:
            logger.warning("The governor is unreachable (%s); retrying quietly.", exc)
        backoff = min(MAX_BACKOFF_S, FIRST_BACKOFF_S * 2 ** (self._failures - 1))
        asked = min(exc.retry_after_s or 0.0, self.fail_safe_after_s)
        delay = max(backoff, asked)  # never sooner than Retry-After asks
        until_fail_safe = self._heard_at + self.fail_safe_after_s - self._clock()
        self._retry_in_s = min(delay, until_fail_safe) if until_fail_safe > 0 else delay

    def _lost(self) -> bool:
        return self._clock() - self._heard_at >= self.fail_safe_after_s

    def _unreachable(self) -> Directive:
        if self._lost() and not self.fail_open and not self.directive.should_stop:
            silent = self._clock() - self._heard_at
            logger.error("No answer from the governor for %.0f s: fail-safe stop.", silent)
            self.directive = Directive(
                "stop",
                UNREACHABLE,
                f"No answer from the governor for {silent:.0f} s: fail-safe stop, "
                "save and exit (fail_open=True keeps training instead).",
                budget=self.directive.budget,
            )
        return self.directive


def claim(
    url: str,
    secret: str,
    *,
    wait_s: float = CLAIM_WAIT_S,
    timeout_s: float = 10.0,
    transport: httpx.BaseTransport | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> tuple[str, str]:
    """The run's id and job token, for a launch's one-time claim secret (GOVERNOR_CLAIM):
    asked again while its pod is not registered yet (or the governor does not answer), for
    at most `wait_s`. GovernorError when the claim is refused (used already, expired,
    unknown) or the wait is over."""
    deadline = clock() + wait_s
    with httpx.Client(base_url=url, timeout=timeout_s, transport=transport) as http:
        while True:
            try:
                response = http.post("/v1/runs/claim", json={"claim": secret})
                said = _said(response)
                if response.status_code == 201:
                    created = response.json()
                    return str(created["id"]), str(created["token"])
                retry = response.status_code == 409 and "not registered yet" in said
                retry = retry or response.status_code == 429 or response.status_code >= 500
            except httpx.TransportError as exc:
                said, retry = f"{type(exc).__name__}: {exc}", True
            if not retry:
                raise GovernorError(f"the claim (GOVERNOR_CLAIM) was refused: {said}")
            if clock() >= deadline:
                raise GovernorError(f"the claim (GOVERNOR_CLAIM) was not answered in time: {said}")
            sleep(min(CLAIM_RETRY_S, max(0.0, deadline - clock())))


def _claim_options(options: dict[str, Any]) -> dict[str, Any]:
    names = ("timeout_s", "transport", "clock", "sleep")
    return {name: options[name] for name in names if name in options}


def _refuse_other_roles(token: str) -> None:
    """A job checks in with its run's job token: an operator, viewer or agent token is a
    mix-up of environment variables, said at once rather than as a 403 at the first beat."""
    for prefix, role in OTHER_ROLES.items():
        if token.startswith(prefix):
            raise GovernorError(
                f"the token given to the job is {role} token ({prefix}...), not a job token "
                f"(gov_job_...): set {JOB_TOKEN} to the run's token from "
                "POST /v1/budgets/{id}/runs ('governor run create'); the operator's token is "
                "for the command line (GOVERNOR_OPERATOR_TOKEN)"
            )


def _retry_after_s(response: httpx.Response) -> float | None:
    """Retry-After as seconds or an HTTP date; None when absent or unreadable."""
    value = response.headers.get("Retry-After", "")
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


NON_FINITE = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}  # JSON has no NaN


def _encoded(metrics: Mapping[str, Any]) -> dict[str, Any]:
    """Metrics as the governor takes them: numbers (a tensor or NumPy scalar as its float),
    NaN and infinities as "NaN", "Infinity" and "-Infinity", text and flags as they are;
    anything else is left out. Never raises: a bad metric must not end the heartbeats."""
    sent: dict[str, Any] = {}
    for name, value in metrics.items():
        try:
            if value is None or isinstance(value, bool | int | str):
                sent[str(name)] = value
                continue
            number = float(value)
        except Exception:  # a metric the job could not turn into a number
            continue
        sent[str(name)] = number if math.isfinite(number) else NON_FINITE[repr(number)]
    return sent


def non_finite(metrics: Mapping[str, Any]) -> set[str]:
    """The names of the metrics whose values are NaN or infinite (a tensor's included)."""
    return {name for name, value in _encoded(metrics).items() if value in _NON_FINITE_TEXT}


_NON_FINITE_TEXT = frozenset(NON_FINITE.values())


def _fits(metrics: Mapping[str, Any]) -> bool:
    try:
        size = len(json.dumps(metrics, separators=(",", ":"), allow_nan=False).encode())
    except (TypeError, ValueError):
        return False
    return len(metrics) <= MAX_METRICS and size <= MAX_METRICS_BYTES


def _error(response: httpx.Response) -> dict[str, Any]:
    try:
        error = response.json()["error"]
    except (ValueError, KeyError, TypeError):
        return {}
    return error if isinstance(error, dict) else {}


def _code(response: httpx.Response) -> str | None:
    return _error(response).get("code")


def _said(response: httpx.Response) -> str:
    return str(_error(response).get("message") or response.text[:300])


def _refusal(response: httpx.Response, run_id: str) -> GovernorError:
    detail = _said(response)
    hint = {
        401: f"the job token was not accepted: check {JOB_TOKEN}",
        403: f"the token is not run {run_id}'s: check GOVERNOR_RUN_ID and {JOB_TOKEN}",
        404: f"no run {run_id} there: check GOVERNOR_URL and GOVERNOR_RUN_ID",
    }.get(response.status_code, "the governor refused the call")
    path = response.request.url.path
    status = response.status_code
    return GovernorError(f"{hint} (HTTP {status} on {path}: {detail})", status)
