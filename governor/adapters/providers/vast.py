"""Vast.ai over its REST API: list the account's instances, read one's rate and state, stop
it keeping its disk, start it again on that disk, and read what Vast has charged for it.

Only `GET /api/v0/instances/{id}/`, `PUT /api/v0/instances/{id}/` with `{"state":
"stopped"}` or `{"state": "running"}`, `GET /api/v1/instances/` and `GET /api/v0/charges/`
are ever sent; never `DELETE`, which destroys the instance and its disk. Vast refuses with
`{"success": false, "error": <code>, "msg"|"message": ...}`, under a 4xx or inside an HTTP
200, so the code decides: a missing instance is gone (done for a stop, permanent for a
start), a rate limit is retryable, anything else is permanent. Some endpoints refuse with
`{"success": false, "msg": ...}` and no code: permanent too, unless the message is Vast's
rate limit's ("API requests too frequent"). A stop or start is accepted only when the answer
says `"success": true`, as Vast's own SDK reads it. Its 429 is often plain text, with no
Retry-After. Vast accepts a start even when the host's GPUs are rented out: the instance
then waits in `scheduling` for them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation
from typing import Any

import httpx

from governor.adapters.providers._http import ProviderHttp, number
from governor.domain.model import PodState
from governor.domain.money import HOURS_PER_MONTH
from governor.domain.ports import (
    Billed,
    CallOutcome,
    CallResult,
    Listed,
    PodDescription,
    ProviderError,
    Seen,
    Storage,
    labels_in_name,
    spelled,
)

DEFAULT_URL = "https://console.vast.ai"
# The PUT answers at once; the host stops the container when it next hears from Vast.
STOP_LATENCY_S = 60.0
CHARGES_PAGE = 500  # the most charges Vast returns in one page
INSTANCES_PAGE = 25  # the most instances Vast lists in one page

GONE_CODES = frozenset({"no_such_instance", "not_found"})
RETRYABLE_CODES = frozenset({"rate_limit_exceeded"})
RATE_LIMITED_SAYS = "too frequent"  # Vast's rate limit: "API requests too frequent ..."
# Every instance status Vast's SDK names (`actual_status`, `intended_status`): whether the
# container may hold its GPU (RUNNING), has let it go (STOPPED: whether it is stopped depends
# on what was asked, see _state) or the instance is being destroyed (GONE). null is an
# instance being provisioned; `frozen` is paused with its memory kept, its GPU still billed;
# `scheduling` a restart waiting for its GPU; `unknown` (no heartbeat) and `offline` (host
# disconnected) may run or bill at any moment; `unavail` could not get its GPU.
STATUSES: Mapping[str | None, PodState] = {
    None: PodState.RUNNING,
    "created": PodState.RUNNING,
    "loading": PodState.RUNNING,
    "running": PodState.RUNNING,
    "frozen": PodState.RUNNING,
    "rebooting": PodState.RUNNING,
    "scheduling": PodState.RUNNING,
    "unknown": PodState.RUNNING,
    "offline": PodState.RUNNING,
    "stopped": PodState.STOPPED,
    "exited": PodState.STOPPED,
    "unavail": PodState.STOPPED,
    "destroying": PodState.GONE,
    "destroyed": PodState.GONE,
    "terminated": PodState.GONE,
}


class VastRefused(ProviderError):
    """Vast refused, with one of its error codes or none (""); `gone` when the code means no
    such instance. The one place a refusal is classified: a rate limit (its code, or its
    words) is retryable, anything else permanent."""

    def __init__(self, message: str, code: str, status: int | None = None) -> None:
        retryable = code in RETRYABLE_CODES or RATE_LIMITED_SAYS in message.lower()
        super().__init__(message, retryable=retryable, status=status)
        self.code = code

    @property
    def gone(self) -> bool:
        return self.code in GONE_CODES


class NoSuchInstance(VastRefused):
    def __init__(self, ref: str, code: str = "no_such_instance", status: int | None = None) -> None:
        super().__init__(f"vast has no instance {ref} ({code})", code, status)


class VastHttp(ProviderHttp):
    """ProviderHttp that lets Vast's error code, not only the HTTP status, classify a 4xx.

    A 404 carrying `no_such_instance` means the instance is gone, while a 404 without a Vast
    code (a wrong URL) must stay a permanent failure; a 4xx carrying `rate_limit_exceeded`
    is retryable. 429 and 5xx are left to ProviderHttp.
    """

    def raise_for_status(self, response: httpx.Response) -> None:
        status = response.status_code
        if 400 <= status < 500 and status != 429:
            refusal = self.refusal(_json_or_none(response), status)
            if refusal is not None:
                raise refusal
        super().raise_for_status(response)

    def refusal(self, body: Any, status: int) -> VastRefused | None:
        """The refusal a Vast body states (an error code, or `"success": false` without
        one), None if it states none."""
        if not isinstance(body, dict) or body.get("success") is True:
            return None
        code = body.get("error")
        if not isinstance(code, str) or not code:
            if body.get("success") is not False:
                return None
            code = ""
        said = str(body.get("msg") or body.get("message") or "")[:200]
        error = self.error(f"refused (HTTP {status}, {code or 'success false'}): {said}", False)
        return VastRefused(str(error), code, status)


class VastProvider:
    """Implements StopsPreserving, Resumes, ReportsBilling and ListsPods against Vast's REST
    API.

    A ref is the instance id (digits). The hourly rate is the compute alone, `dph_total`
    less `storage_total_cost`: Vast's total includes the disk, which is reported as storage
    and billed every second the instance exists, running or stopped.
    """

    def __init__(
        self,
        client: httpx.Client,
        api_key: str,
        url: str = DEFAULT_URL,
        *,
        stop_latency_s: float = STOP_LATENCY_S,
    ) -> None:
        self.stop_latency_s = stop_latency_s
        self._http = VastHttp.bearer(client, "vast", api_key)
        self._url = url.rstrip("/")

    def describe(self, ref: str) -> PodDescription:
        return self._description(self._instance(ref))

    def pods(self) -> list[Listed]:
        """Every instance of the account, stopped ones included (their disk still bills)."""
        params = {"limit": str(INSTANCES_PAGE)}
        instances = self._paged("/api/v1/instances/", params, "instances")
        return [_listed(i, self._description(i)) for i in instances]

    def _description(self, instance: dict[str, Any]) -> PodDescription:
        try:
            total, disk_hourly, disk_gb = [
                number(instance.get(name))
                for name in ("dph_total", "storage_total_cost", "disk_space")
            ]
        except InvalidOperation:
            raise self._http.error(f"answered a non-number in {instance!r:.200}", True) from None
        rate = None if total is None else total - (disk_hourly or 0)
        return _seen(instance).describing(rate, _storage(disk_hourly, disk_gb))

    def stop(self, ref: str) -> CallResult:
        settled = self._settled(ref)
        if settled is not None:
            return settled
        try:
            self._put(ref, "stopped")
        except ProviderError as exc:
            if exc.status != 409:
                return _gone_or_failed(exc)
            # A wrong-state refusal: what the instance is now decides.
            return self._settled(ref) or CallResult(
                CallOutcome.RETRYABLE, f"{exc}; the instance is still running"
            )
        return CallResult(CallOutcome.PENDING, "stop accepted; the instance has not stopped yet")

    def resume(self, ref: str) -> CallResult:
        started = self._started(ref)
        if started is not None:
            return started
        try:
            self._put(ref, "running")
        except ProviderError as exc:
            if exc.status != 409:
                return CallResult.failed(exc)
            # A wrong-state refusal: what the instance is now decides.
            return self._started(ref) or CallResult(
                CallOutcome.RETRYABLE, f"{exc}; the instance has not started"
            )
        return CallResult(CallOutcome.DONE, "start accepted; Vast runs it once its GPU is free")

    def billed(self, since: Mapping[str, datetime]) -> dict[str, Billed]:
        """Every instance charge Vast lists from the day of the earliest `since` on, read once
        for the account and summed per instance over the charges that end after its own
        `since`, each to its latest charge's `end`."""
        until = datetime.now(UTC)
        start = min(since.values(), default=until).astimezone(UTC)
        start = start.replace(hour=0, minute=0, second=0, microsecond=0)
        filters = {
            "day": {"gte": int(start.timestamp()), "lte": int(until.timestamp())},
            "type": {"in": ["instance"]},
        }
        params = {"select_filters": json.dumps(filters), "limit": str(CHARGES_PAGE)}
        wanted = {f"instance-{_instance_id(ref)}": ref for ref in since}
        bills = {ref: Billed(Decimal(0), start) for ref in since}
        for charge in self._paged("/api/v0/charges/", params, "results"):
            source = charge.get("source")
            ref = wanted.get(source) if isinstance(source, str) else None
            if ref is None:
                continue
            try:
                amount, end = _required(charge.get("amount")), _instant(charge.get("end"))
            except InvalidOperation:
                raise self._http.error(
                    f"answered a malformed charge: {charge!r:.200}", True
                ) from None
            if end <= since[ref]:  # before the instance's bill counts: other spend
                continue
            so_far = bills[ref]
            bills[ref] = Billed(so_far.amount_usd + amount, max(so_far.through, end))
        return bills

    def _settled(self, ref: str) -> CallResult | None:
        """What a stop amounts to given the instance's state now (or a failed read); None while
        it runs."""
        try:
            seen = _seen(self._instance(ref))
        except ProviderError as exc:
            return _gone_or_failed(exc)
        if not seen.known:
            return seen.unknown()
        state = seen.state
        if state is PodState.GONE:
            return CallResult(CallOutcome.DONE, "already gone (being destroyed)")
        if state is PodState.STOPPED:
            return CallResult(CallOutcome.DONE, "already stopped; disk kept")
        if state is PodState.STOPPING:
            return CallResult(CallOutcome.PENDING, "stop asked; the instance has not stopped yet")
        return None

    def _started(self, ref: str) -> CallResult | None:
        """What a resume amounts to given the instance's state now (or a failed read: a
        missing instance cannot start); None while it is stopped or stopping."""
        try:
            seen = _seen(self._instance(ref))
        except ProviderError as exc:
            return CallResult.failed(exc)
        if not seen.known:
            return seen.unknown(CallOutcome.RETRYABLE)
        state = seen.state
        if state is PodState.RUNNING:
            return CallResult(CallOutcome.DONE, "already running")
        if state is PodState.GONE:
            return CallResult(CallOutcome.PERMANENT, f"vast instance {ref} is being destroyed")
        return None

    def _put(self, ref: str, state: str) -> None:
        """Asks for `state`; accepted only if Vast answers `"success": true`."""
        answer = self._call("PUT", self._instance_url(ref), body={"state": state})
        if answer.get("success") is not True:
            said = f"{answer!r:.200}"
            raise VastRefused(str(self._http.error(f"did not accept it: {said}", False)), "")

    def _instance(self, ref: str) -> dict[str, Any]:
        try:
            answer = self._call("GET", self._instance_url(ref), params={"owner": "me"})
        except VastRefused as exc:
            if exc.gone:
                raise NoSuchInstance(ref, exc.code, exc.status) from None
            raise
        instance = answer.get("instances")
        if instance is None:
            raise NoSuchInstance(ref)
        if not isinstance(instance, dict):
            raise self._http.error(f"answered a malformed instance: {instance!r:.200}", True)
        return instance

    def _paged(self, path: str, params: dict[str, str], key: str) -> Iterator[dict[str, Any]]:
        """Every object listed under `key` on the pages of `path` that `params` select,
        following Vast's next_token from page to page."""
        seen: set[str] = set()
        token: Any = None
        while True:
            page_params = {**params, "after_token": token} if token else params
            page = self._call("GET", self._url + path, params=page_params)
            listed = page.get(key)
            if not isinstance(listed, list) or not all(isinstance(o, dict) for o in listed):
                raise self._http.error(f"answered a malformed page of {path}: {page!r:.200}", True)
            yield from listed
            token = page.get("next_token")
            if not token:
                return
            if not isinstance(token, str) or token in seen:
                raise self._http.error(f"answered a next_token that loops: {token!r:.100}", True)
            seen.add(token)

    def _instance_url(self, ref: str) -> str:
        return f"{self._url}/api/v0/instances/{_instance_id(ref)}/"

    def _call(
        self,
        method: str,
        url: str,
        *,
        body: Any = None,
        params: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        answer = self._http.request(method, url, json=body, params=params)
        if not isinstance(answer, dict):
            raise self._http.error(f"answered {answer!r:.200}, not an object", True)
        refusal = self._http.refusal(answer, 200)
        if refusal is not None:
            raise refusal
        return answer


def _instance_id(ref: str) -> str:
    """`ref` if it is an instance id; a ref that is not one is refused before any call."""
    if not (ref.isascii() and ref.isdigit()):
        raise ProviderError(f"vast instance ids are numbers, not {ref!r}", retryable=False)
    return ref


def _storage(disk_hourly: Decimal | None, disk_gb: Decimal | None) -> Storage | None:
    """The instance's disk: Vast bills it at the same rate in every state."""
    if disk_hourly is None or disk_gb is None or disk_gb <= 0:
        return None
    per_gb_month = disk_hourly * HOURS_PER_MONTH / disk_gb
    return Storage(disk_gb, per_gb_month, per_gb_month)


def _seen(instance: dict[str, Any]) -> Seen:
    """The instance's state from `actual_status` and `intended_status` (STATUSES), spelled
    `actual/intended`.

    Stopped only when the container is down and a stop was asked (or nothing was): an
    `exited` container asked to run still holds its GPU. A status the SDK does not name
    makes the state unknown (`Seen`), neither running nor stopped.
    """
    actual, intended = instance.get("actual_status"), instance.get("intended_status")
    raw = spelled(f"{actual}/{intended}")
    for status in (actual, intended):
        if not (status is None or isinstance(status, str)) or status not in STATUSES:
            return Seen(raw, PodState.RUNNING, known=False)
    held = STATUSES[actual]
    asked_to_stop = intended is not None and STATUSES[intended] is not PodState.RUNNING
    if held is PodState.GONE:
        return Seen(raw, held)
    if held is PodState.STOPPED and (intended is None or asked_to_stop):
        return Seen(raw, PodState.STOPPED)
    return Seen(raw, PodState.STOPPING if asked_to_stop else PodState.RUNNING)


def _gone_or_failed(error: ProviderError) -> CallResult:
    if isinstance(error, VastRefused) and error.gone:
        return CallResult(CallOutcome.DONE, "already gone")
    return CallResult.failed(error)


def _required(value: Any) -> Decimal:
    parsed = number(value)
    if parsed is None:
        raise InvalidOperation("a number is missing")
    return parsed


def _instant(value: Any) -> datetime:
    """Unix seconds as an aware UTC instant."""
    try:
        return datetime.fromtimestamp(float(_required(value)), UTC)
    except (OverflowError, OSError, ValueError):
        raise InvalidOperation(f"{value!r} is not an instant") from None


def _json_or_none(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return None


def _listed(instance: dict[str, Any], description: PodDescription) -> Listed:
    """An instance as listed: Vast keeps one free-text `label` per instance and no tags, so
    the label is its name, and the labels are those written in it (`labels_in_name`)."""
    label = instance.get("label")
    name = label if isinstance(label, str) and label else None
    gpus = instance.get("num_gpus")
    gpu = instance.get("gpu_name")
    return Listed(
        str(instance.get("id")),
        description,
        name=name,
        labels=labels_in_name(name),
        gpu_type=gpu if isinstance(gpu, str) and gpu else None,
        gpu_count=gpus if isinstance(gpus, int) and not isinstance(gpus, bool) else None,
    )
