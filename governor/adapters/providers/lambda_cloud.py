"""Lambda Cloud over its REST API: list the account's instances, read one's rate, state and
filesystems, and terminate it only while the filesystem holding its checkpoint is attached.

Lambda cannot stop an instance: terminating it loses the root disk, and only attached
Filesystems outlive it. So this adapter has no `stop`; `terminate` re-reads the instance
and refuses unless the filesystem it was told to keep is attached. Lambda errors carry a
`code` (`{"error": {"code", "message", "suggestion"}}`) and are classified by it alone:
the message is for people and may change.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from decimal import Decimal, InvalidOperation
from typing import Any
from urllib.parse import quote

import httpx

from governor.adapters.providers._http import ProviderHttp, number
from governor.domain.model import PodState
from governor.domain.ports import (
    CallOutcome,
    CallResult,
    Listed,
    PodDescription,
    ProviderError,
    Seen,
    Storage,
)

DEFAULT_URL = "https://cloud.lambda.ai/api/v1"
# Lambda bills by the minute until the instance is terminated, which takes a minute or two.
STOP_LATENCY_S = 120.0
# Lambda's example Filesystem price per GiB used per month; the real one is shown when a
# filesystem is created.
FILESYSTEM_USD_PER_GIB_MONTH = Decimal("0.20")
BYTES_PER_GIB = Decimal(2**30)
DEFAULT_MOUNT_ROOT = "/lambda/nfs"  # where Lambda mounts a filesystem unless told otherwise

STATES = {
    "booting": PodState.RUNNING,
    "active": PodState.RUNNING,
    "unhealthy": PodState.RUNNING,
    "terminating": PodState.STOPPING,
    "terminated": PodState.GONE,
    "preempted": PodState.GONE,
}
# Only the instance-not-found code means the instance is gone. The generic "global/not-found"
# is also what an unknown path answers, so reading it as "gone" would let a wrong URL pass
# for a finished terminate while the instance keeps billing.
INSTANCE_NOT_FOUND = "global/object-does-not-exist"
CONFLICT = "global/conflict"
# Each code as Lambda's OpenAPI document explains it: an internal error says "Try again
# later", and errors of Lambda's upstream providers (code prefix `provider/`) are outages
# ("Try again shortly"); a quota is raised by Lambda's support, and a key, an account, a
# billing address, a permission or a request's parameters do not mend on their own. A 429
# is Lambda's rate limit (about a request a second) whatever its code: always retried.
RETRYABLE_CODES = frozenset({"global/internal-error"})
RETRYABLE_PREFIX = "provider/"
PERMANENT_CODES = frozenset(
    {
        "global/invalid-api-key",
        "global/account-inactive",
        "global/forbidden",
        "global/invalid-address",
        "global/invalid-parameters",
        "global/quota-exceeded",
    }
)


class LambdaError(ProviderError):
    """A failed Lambda call and the error `code` its body named (None: it named none)."""

    def __init__(self, error: ProviderError, code: str | None, retryable: bool) -> None:
        super().__init__(
            str(error), retryable=retryable, retry_after_s=error.retry_after_s, status=error.status
        )
        self.code = code


class InstanceNotFound(ProviderError):
    def __init__(self, ref: str) -> None:
        super().__init__(f"lambda has no instance {ref!r}", retryable=False, status=404)


class _LambdaHttp(ProviderHttp):
    """ProviderHttp that also reads the `code` of Lambda's error bodies: a code that says
    retrying helps (or cannot help) decides over the HTTP status."""

    def raise_for_status(self, response: httpx.Response) -> None:
        try:
            super().raise_for_status(response)
        except ProviderError as exc:
            code = _error_code(response)
            raise LambdaError(exc, code, _retryable(response.status_code, code, exc)) from None


class LambdaProvider:
    """Implements TerminateOnly and ListsPods against Lambda's Cloud API."""

    def __init__(
        self,
        client: httpx.Client,
        api_key: str,
        url: str = DEFAULT_URL,
        *,
        stop_latency_s: float = STOP_LATENCY_S,
        filesystem_usd_per_gib_month: Decimal = FILESYSTEM_USD_PER_GIB_MONTH,
    ) -> None:
        self.stop_latency_s = stop_latency_s
        self._filesystem_rate = filesystem_usd_per_gib_month
        self._http = _LambdaHttp.bearer(client, "lambda", api_key)
        self._url = url.rstrip("/")

    def describe(self, ref: str) -> PodDescription:
        instance = self._instance(ref)
        needed = bool(_filesystem_names(instance))
        return self._description(instance, self._filesystems() if needed else {})

    def pods(self) -> list[Listed]:
        """Every instance Lambda lists (it leaves terminated ones out), the filesystems read
        once for them all."""
        answer = self._http.request("GET", f"{self._url}/instances")
        instances = answer.get("data") if isinstance(answer, dict) else None
        if not isinstance(instances, list) or not all(isinstance(i, dict) for i in instances):
            # not echoed: an instance carries its Jupyter token
            raise self._http.error("answered a malformed instance list", True)
        needed = any(_filesystem_names(instance) for instance in instances)
        filesystems = self._filesystems() if needed else {}
        return [_listed(i, self._description(i, filesystems)) for i in instances]

    def _description(
        self, instance: dict[str, Any], filesystems: dict[str, dict[str, Any]]
    ) -> PodDescription:
        """`instance` described, given the account's filesystems by name."""
        names = _filesystem_names(instance)
        attached = [filesystems.get(name, {}) for name in names]
        mounts = _mounts(instance)
        mounted = {
            name: mounts.get(str(fs.get("id"))) or f"{DEFAULT_MOUNT_ROOT}/{name}"
            for name, fs in zip(names, attached, strict=True)
        }
        cents, sizes = _price_cents(instance), [fs.get("bytes_used") for fs in attached]
        try:
            price = number(cents)
            rate = None if price is None else price / 100  # whole US cents
            storage = self._storage(sizes)
        except InvalidOperation:
            said = f"price_cents_per_hour={cents!r:.40}, bytes_used={sizes!r:.100}"
            raise self._http.error(f"answered a non-number ({said})", True) from None
        cannot_preserve = (
            None if names else "no filesystem is attached: terminating loses everything on it"
        )
        return _seen(instance).describing(rate, storage, mounted, cannot_preserve)

    def terminate(self, ref: str, *, keep: str) -> CallResult:
        try:
            instance = self._instance(ref)
        except InstanceNotFound:
            return CallResult(CallOutcome.DONE, "already gone")
        except ProviderError as exc:
            return CallResult.failed(exc)
        done = _settled(instance)
        if done is not None:
            return done
        attached = _filesystem_names(instance)
        if keep not in attached:
            return CallResult(
                CallOutcome.PERMANENT,
                f"lambda will not terminate {ref!r}: filesystem {keep!r} is not attached "
                f"(attached: {', '.join(map(repr, attached)) or 'none'}), so the checkpoint "
                "would be lost",
            )
        try:
            answer = self._http.request(
                "POST", f"{self._url}/instance-operations/terminate", json={"instance_ids": [ref]}
            )
        except LambdaError as exc:
            if exc.code == INSTANCE_NOT_FOUND:
                return CallResult(CallOutcome.DONE, "already gone")
            if exc.code == CONFLICT:
                return self._after_conflict(ref, exc)
            return CallResult.failed(exc)
        except ProviderError as exc:
            return CallResult.failed(exc)
        if _terminated_status(answer, ref) == "terminated":
            return CallResult(CallOutcome.DONE, f"terminated; filesystem {keep!r} kept")
        return CallResult(CallOutcome.PENDING, f"terminate accepted; filesystem {keep!r} kept")

    def _after_conflict(self, ref: str, conflict: LambdaError) -> CallResult:
        """Lambda said the instance is in the wrong state to terminate: look at it again."""
        try:
            instance = self._instance(ref)
        except InstanceNotFound:
            return CallResult(CallOutcome.DONE, "already gone")
        except ProviderError as exc:
            return CallResult.failed(exc)
        return _settled(instance) or CallResult(CallOutcome.RETRYABLE, str(conflict))

    def _instance(self, ref: str) -> dict[str, Any]:
        try:
            answer = self._http.request("GET", f"{self._url}/instances/{quote(ref, safe='')}")
        except LambdaError as exc:
            if exc.code == INSTANCE_NOT_FOUND:
                raise InstanceNotFound(ref) from None
            raise
        instance = answer.get("data") if isinstance(answer, dict) else None
        if not isinstance(instance, dict):
            raise self._http.error(f"answered a malformed instance: {answer!r:.200}", True)
        return instance

    def _filesystems(self) -> dict[str, dict[str, Any]]:
        """The account's filesystems by name."""
        answer = self._http.request("GET", f"{self._url}/file-systems")
        listed = answer.get("data") if isinstance(answer, dict) else None
        if not isinstance(listed, list):
            raise self._http.error(f"answered malformed filesystems: {answer!r:.200}", True)
        return {str(fs.get("name")): fs for fs in listed if isinstance(fs, dict)}

    def _storage(self, sizes: Sequence[Any]) -> Storage | None:
        """The attached filesystems' size in GiB, Lambda's billing unit, which keeps billing
        after terminate; None when Lambda does not say how much one holds."""
        if any(size is None for size in sizes):
            return None
        gib = sum((number(size) or Decimal(0) for size in sizes), Decimal(0)) / BYTES_PER_GIB
        return Storage(gib, self._filesystem_rate, self._filesystem_rate)


def _retryable(status: int, code: str | None, error: ProviderError) -> bool:
    """Whether retrying can help, by Lambda's code; by the HTTP status where it names none
    this adapter knows."""
    if status == 429 or code in RETRYABLE_CODES:
        return True
    if code is not None and code.startswith(RETRYABLE_PREFIX):
        return True
    return error.retryable and code not in PERMANENT_CODES


def _settled(instance: Mapping[str, Any]) -> CallResult | None:
    """DONE for an instance already gone, PENDING for one terminating or in a status Lambda
    does not document (nothing is sent); None otherwise."""
    seen = _seen(instance)
    if not seen.known:
        return seen.unknown()
    state = seen.state
    if state is PodState.GONE:
        return CallResult(CallOutcome.DONE, f"already {instance.get('status')}")
    if state is PodState.STOPPING:
        return CallResult(CallOutcome.PENDING, "already terminating")
    return None


def _seen(instance: Mapping[str, Any]) -> Seen:
    """The instance's status; one Lambda does not document is unknown (`Seen`): it counts
    as running, metering on being the safe mistake, and is never taken for terminated."""
    return Seen.of(STATES, instance.get("status"))


def _price_cents(instance: Mapping[str, Any]) -> Any:
    kind = instance.get("instance_type")
    return kind.get("price_cents_per_hour") if isinstance(kind, dict) else None


def _filesystem_names(instance: Mapping[str, Any]) -> list[str]:
    names = instance.get("file_system_names")
    return [str(name) for name in names] if isinstance(names, list) else []


def _mounts(instance: Mapping[str, Any]) -> dict[str, str]:
    """Mount points by filesystem id; Lambda leaves the list out when nothing is mounted."""
    mounts = instance.get("file_system_mounts")
    return {
        str(mount.get("file_system_id")): str(mount["mount_point"])
        for mount in (mounts if isinstance(mounts, list) else [])
        if isinstance(mount, dict) and mount.get("mount_point")
    }


def _terminated_status(answer: Any, ref: str) -> str | None:
    """The status the terminate answer gives `ref`, if it gives one."""
    data = answer.get("data") if isinstance(answer, dict) else None
    instances = data.get("terminated_instances") if isinstance(data, dict) else None
    for instance in instances if isinstance(instances, list) else []:
        if isinstance(instance, dict) and instance.get("id") == ref:
            return str(instance.get("status"))
    return None


def _error_code(response: httpx.Response) -> str | None:
    try:
        body = response.json()
    except ValueError:
        return None
    error = body.get("error") if isinstance(body, dict) else None
    code = error.get("code") if isinstance(error, dict) else None
    return code if isinstance(code, str) else None


def _listed(instance: dict[str, Any], description: PodDescription) -> Listed:
    """An instance as listed: its `name`, its `tags` (key/value entries), and its GPUs as its
    instance type says (`gpu_description`, `specs.gpus`)."""
    name, said = instance.get("name"), instance.get("instance_type")
    kind: dict[str, Any] = said if isinstance(said, dict) else {}
    specs: dict[str, Any] = kind["specs"] if isinstance(kind.get("specs"), dict) else {}
    gpu, gpus = kind.get("gpu_description"), specs.get("gpus")
    tags = instance.get("tags")
    return Listed(
        str(instance.get("id")),
        description,
        name=name if isinstance(name, str) and name else None,
        labels={
            str(t["key"]): str(t["value"])
            for t in (tags if isinstance(tags, list) else [])
            if isinstance(t, dict) and "key" in t and "value" in t
        },
        gpu_type=gpu if isinstance(gpu, str) and gpu else None,
        gpu_count=gpus if isinstance(gpus, int) and not isinstance(gpus, bool) else None,
    )
