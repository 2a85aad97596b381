"""GCP Compute Engine over its REST API: read a VM's rate, state and disks, stop it keeping
its persistent disks, and start it again on them.

Only `instances.get`, `disks.get`, `instances.stop`, `instances.start`, `zoneOperations.get`
and the project-wide `instances.aggregatedList` and `disks.aggregatedList` are ever sent; never
`instances.delete`, which takes every auto-delete disk (the boot disk by default) with it.
A stopped VM is TERMINATED in GCP's words; its persistent disks keep billing. Local SSDs
are kept too (`discardLocalSsd=false`), since a stop that discards them loses their data,
and so they keep billing as well.

The API carries no prices, so the hourly rate comes from a configured table keyed by
machine type (and accelerator type, for GPUs attached to a general-purpose VM). This adapter
makes no billing call: GCP's billing data (budget notifications, the BigQuery export) lags the
meter by hours, too late to govern with, so the governor meters rate x time itself; the
BigQuery export is read only to reconcile, by `gcp_billing.BilledGcpProvider`.

Instances stop asynchronously: `instances.stop` answers a zonal Operation, and a stop that
was accepted is PENDING. The adapter keeps the Operation's name, and the next stop call
reads it (`zoneOperations.get`) before the VM: an Operation that ended DONE with
`error.errors[]` is the stop failing, classified by its codes, and one that ended without
is not yet the VM being TERMINATED, so the VM is read too. A start that was accepted is
done: the VM bills from then on. A zone without the capacity to start it
(ZONE_RESOURCE_POOL_EXHAUSTED, in the Operation or the answer) is a permanent refusal, in
Google's words. Every `status` the Instance resource documents is mapped; one it does not
is a retryable failure, never read as running or stopped.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from types import MappingProxyType
from typing import Any, Protocol
from uuid import uuid4

import httpx

from governor.adapters.providers._http import ProviderHttp
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

DEFAULT_URL = "https://compute.googleapis.com/compute/v1"
STOP_LATENCY_S = 90.0  # the guest gets a graceful shutdown before the VM is TERMINATED
NO_RATES: Mapping[str, Decimal] = MappingProxyType({})
# Google's list prices per GiB-month of provisioned size (the API's `sizeGb` is GiB too); a
# stopped VM's disks bill the same, and so do local SSDs a stop keeps.
LOCAL_SSD = "local-ssd"  # the disk rates' key for local SSDs (SCRATCH disks)
DISK_RATES: Mapping[str, Decimal] = MappingProxyType(
    {
        "pd-standard": Decimal("0.04"),
        "pd-balanced": Decimal("0.10"),
        "pd-ssd": Decimal("0.17"),
        LOCAL_SSD: Decimal("0.08"),
    }
)
# Disk types not in the table (hyperdisk-*, pd-extreme) are priced as pd-balanced: an
# estimate, since their real price also depends on provisioned IOPS and throughput.
FALLBACK_DISK_TYPE = "pd-balanced"

# Every value of the Instance resource's `status` enum in Compute Engine's discovery document.
STATES = {
    "PENDING": PodState.RUNNING,  # Flex Start, waiting for capacity: may start at any moment
    "PROVISIONING": PodState.RUNNING,
    "STAGING": PodState.RUNNING,
    "RUNNING": PodState.RUNNING,
    "REPAIRING": PodState.RUNNING,
    "PENDING_STOP": PodState.STOPPING,  # shutting down gracefully
    "STOPPING": PodState.STOPPING,
    "SUSPENDING": PodState.STOPPING,
    "DEPROVISIONING": PodState.STOPPING,  # halted, its resources being torn down
    "STOPPED": PodState.STOPPED,
    "TERMINATED": PodState.STOPPED,  # stopped, not deleted
    "SUSPENDED": PodState.STOPPED,
}
# Google's words (HTTP error reasons, Operation error codes) for a refusal that may pass on a
# later try: rate limits and quotas. Any other word is permanent, unless the VM is merely
# not ready (NOT_READY) or the answer is a 5xx or a 429.
RATE_OR_QUOTA = frozenset(
    {
        "rateLimitExceeded",
        "userRateLimitExceeded",
        "quotaExceeded",
        "RATE_LIMIT_EXCEEDED",
        "RESOURCE_OPERATION_RATE_EXCEEDED",
        "QUOTA_EXCEEDED",
    }
)
NOT_READY = frozenset({"resourceNotReady", "RESOURCE_NOT_READY"})  # the VM's state, for now
NOT_FOUND = frozenset({"notFound", "RESOURCE_NOT_FOUND"})
# The zone has no machine free to start the VM on; Google may say so with a 5xx.
NO_CAPACITY = frozenset(
    {"ZONE_RESOURCE_POOL_EXHAUSTED", "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS"}
)
_GCE_NAME = r"[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?"
_REF = re.compile(rf"(?P<zone>{_GCE_NAME})/(?P<name>{_GCE_NAME})")


class TokenSource(Protocol):
    """Where OAuth2 access tokens come from; `token()` gives one that is valid now, and
    `credential` says which credential that is (never the secret). Google's own credentials
    are `gcp_auth.GoogleCredentials` (the gcp extra)."""

    @property
    def credential(self) -> str: ...

    def token(self) -> str: ...


@dataclass(frozen=True)
class StaticToken:
    """An access token minted elsewhere (e.g. `gcloud auth print-access-token`); it is
    never refreshed, so it stops working when it expires (an hour, by default)."""

    access_token: str = field(repr=False)
    credential: str = "a static access token (never refreshed)"

    def token(self) -> str:
        return self.access_token


class InstanceNotFound(ProviderError):
    """Google answered 404 for the instance itself (not for its project or zone)."""


class WrongState(ProviderError):
    """Google refused a call because of the instance's state (409, resourceNotReady)."""


class _ComputeHttp(ProviderHttp):
    """ProviderHttp that lets Google's error body classify a refusal (see `refusal`); a 429,
    and a 5xx or an error without that body, are left to ProviderHttp."""

    def raise_for_status(self, response: httpx.Response) -> None:
        status = response.status_code
        google = _google_error(response) if status >= 400 and status != 429 else None
        if google is None or (status >= 500 and not google[1] & NO_CAPACITY):
            super().raise_for_status(response)
            return
        said, reasons = google
        raise self.refusal(
            reasons, f"(HTTP {status} {'/'.join(sorted(reasons)) or 'error'}: {said})", said, status
        )

    def refusal(
        self, words: frozenset[str], what: str, said: str, status: int | None = None
    ) -> ProviderError:
        """The one place a refusal in Google's words is classified, whether an HTTP error's
        reasons or a failed Operation's codes (`status` None): a zone without capacity is
        permanent; a missing instance is InstanceNotFound; the instance's state is
        WrongState, retryable; a rate limit or a quota is retryable; anything else is
        permanent."""
        if words & NO_CAPACITY:
            return self.error(f"has no capacity to start it {what}", False, status=status)
        if (status == 404 and "/instances/" in said) or (status is None and words & NOT_FOUND):
            error = self.error(f"has no such instance {what}", False, status=status)
            return InstanceNotFound(str(error), retryable=False, status=status)
        if status == 409 or words & NOT_READY:
            error = self.error(
                f"refused: the instance is in the wrong state {what}", True, status=status
            )
            return WrongState(str(error), retryable=True, status=status)
        if words & RATE_OR_QUOTA:
            return self.error(f"rate limited or over quota {what}", True, status=status)
        return self.error(f"refused the request {what}", False, status=status)


class GcpProvider:
    """Implements StopsPreserving, Resumes and ListsPods against the Compute Engine API for
    one project.

    `rates` maps a machine type to its $/hour, and "<type>:spot" to its Spot price; a
    machine type not in it has no known rate (None). GPUs attached to a general-purpose
    VM (N1) are priced by accelerator type ("nvidia-tesla-t4", "nvidia-tesla-t4:spot") and
    added per GPU; accelerator-optimized types (a2, a3, g2) include their GPUs, so price
    those on the machine type and leave their accelerators out of the table.
    """

    def __init__(
        self,
        client: httpx.Client,
        token: TokenSource,
        project: str,
        url: str = DEFAULT_URL,
        *,
        rates: Mapping[str, Decimal] = NO_RATES,
        disk_rates: Mapping[str, Decimal] = DISK_RATES,
        stop_latency_s: float = STOP_LATENCY_S,
    ) -> None:
        self.stop_latency_s = stop_latency_s
        self.credential = token.credential  # which one, for `governor providers check`
        self._client = client
        self._token = token
        self._project = project
        self._url = url.rstrip("/")
        self._rates = {key: Decimal(str(rate)) for key, rate in rates.items()}
        self._disk_rates = {**DISK_RATES, **disk_rates}
        # ref -> the name of the Operation of its accepted stop, until it is seen DONE
        self._stopping: dict[str, str] = {}

    def region_of(self, ref: str) -> str | None:
        """The region of the VM's zone (a zone is its region's name and a letter:
        us-central1-a is in us-central1), read from the ref; None for a ref not of that form."""
        match = _REF.fullmatch(ref)
        if match is None:
            return None
        region, dash, _letter = match["zone"].rpartition("-")
        return region if dash else None

    def describe(self, ref: str) -> PodDescription:
        url, http = self._instance_url(ref), self._http()
        return self._description(http, _instance(http, url))

    def pods(self) -> list[Listed]:
        """Every VM of the project in every zone, stopped ones included (their disks still
        bill). The project's disks are listed once up front rather than read one by one."""
        http = self._http()
        disks = {
            f"projects/{self._project}/zones/{zone}/disks/{disk.get('name')}": disk
            for zone, disk in self._aggregated(http, "disks")
        }
        return [
            _listed(
                f"{zone}/{instance.get('name')}", instance, self._description(http, instance, disks)
            )
            for zone, instance in self._aggregated(http, "instances")
        ]

    def _description(
        self,
        http: _ComputeHttp,
        instance: dict[str, Any],
        disks: Mapping[str, dict[str, Any]] = MappingProxyType({}),
    ) -> PodDescription:
        return _seen(instance).describing(
            self._hourly_rate(instance), self._storage(http, instance, disks)
        )

    def stop(self, ref: str) -> CallResult:
        """Asked again while a stop is PENDING, first follows that stop's Operation: a
        failure it ended with is this call's failure (a retryable one sends the stop again
        on the next call)."""
        try:
            url, http = self._instance_url(ref), self._http()
            self._follow_stop(http, ref)
            seen = _seen(_instance(http, url))
            if not seen.known:
                return seen.unknown()
            state = seen.state
            if state is not PodState.RUNNING:
                if state is PodState.STOPPED:
                    self._stopping.pop(ref, None)  # its Operation no longer matters
                return _settled(state)
            if ref in self._stopping:
                name = self._stopping[ref]
                return CallResult(CallOutcome.PENDING, f"stop operation {name} not DONE yet")
            params = {"discardLocalSsd": "false", "requestId": str(uuid4())}
            try:
                answer = http.request("POST", f"{url}/stop", params=params)
            except WrongState as exc:
                seen = _seen(_instance(http, url))
                if not seen.known:
                    return seen.unknown()
                return (
                    CallResult.failed(exc)
                    if seen.state is PodState.RUNNING
                    else _settled(seen.state)
                )
            operation = _operation(http, answer, "stop")
        except InstanceNotFound:
            self._stopping.pop(ref, None)
            return CallResult(CallOutcome.DONE, "already gone")
        except ProviderError as exc:
            return CallResult.failed(exc)
        name, status = operation.get("name", "?"), operation.get("status", "?")
        if status != "DONE":
            self._stopping[ref] = str(name)
        return CallResult(
            CallOutcome.PENDING, f"stop accepted (operation {name} {status}); not TERMINATED yet"
        )

    def _follow_stop(self, http: _ComputeHttp, ref: str) -> None:
        """Reads the Operation of `ref`'s accepted stop, if one is not yet seen DONE, and
        forgets it once DONE, raising the error it failed with. One Google no longer has
        (it keeps them for a while only) is forgotten: the VM says the rest."""
        name = self._stopping.get(ref)
        if name is None:
            return
        zone = ref.partition("/")[0]
        url = f"{self._url}/projects/{self._project}/zones/{zone}/operations/{name}"
        try:
            answer = http.request("GET", url)
        except ProviderError as exc:
            if exc.status != 404:
                raise
            del self._stopping[ref]
            return
        operation = _object(http, answer, "an operation")
        if operation.get("status") == "DONE":
            del self._stopping[ref]
            _operation(http, operation, "stop")

    def resume(self, ref: str) -> CallResult:
        """Starts a stopped VM; a VM that is missing or deleted cannot be started."""
        try:
            url, http = self._instance_url(ref), self._http()
            seen = _seen(_instance(http, url))
            if not seen.known:
                return seen.unknown(CallOutcome.RETRYABLE)
            if seen.state is PodState.RUNNING:
                return CallResult(CallOutcome.DONE, "already running")
            try:
                answer = http.request("POST", f"{url}/start", params={"requestId": str(uuid4())})
            except WrongState as exc:  # e.g. still STOPPING; started meanwhile is as good
                seen = _seen(_instance(http, url))
                if not seen.known:
                    return seen.unknown(CallOutcome.RETRYABLE)
                if seen.state is not PodState.RUNNING:
                    return CallResult.failed(exc)
                return CallResult(CallOutcome.DONE, "started meanwhile")
            operation = _operation(http, answer, "start")
        except ProviderError as exc:
            return CallResult.failed(exc)
        name, status = operation.get("name", "?"), operation.get("status", "?")
        return CallResult(CallOutcome.DONE, f"start accepted (operation {name} {status})")

    def _http(self) -> _ComputeHttp:
        """A client for one call with the token valid now, which is also the secret masked
        in its errors."""
        token = self._token.token()
        return _ComputeHttp.bearer(self._client, "gcp", token)

    def _instance_url(self, ref: str) -> str:
        match = _REF.fullmatch(ref)
        if match is None:
            raise ProviderError(
                f"gcp instance ref {ref!r} is not '<zone>/<instance-name>' "
                "(e.g. 'us-central1-a/train-1')",
                retryable=False,
            )
        zone, name = match["zone"], match["name"]
        return f"{self._url}/projects/{self._project}/zones/{zone}/instances/{name}"

    def _hourly_rate(self, instance: dict[str, Any]) -> Decimal | None:
        scheduling = instance.get("scheduling") or {}
        spot = (
            scheduling.get("provisioningModel") == "SPOT" or scheduling.get("preemptible") is True
        )
        rate = self._rate(_last_segment(instance.get("machineType")), spot)
        if rate is None:
            return None
        for accelerator in instance.get("guestAccelerators") or []:
            per_gpu = self._rate(_last_segment(accelerator.get("acceleratorType")), spot)
            if per_gpu is not None:
                rate += per_gpu * Decimal(str(accelerator.get("acceleratorCount", 1)))
        return rate

    def _rate(self, name: str, spot: bool) -> Decimal | None:
        """The table's rate for `name`; a Spot VM without a Spot entry gets the on-demand
        rate, which over-counts rather than under-counts."""
        if spot and f"{name}:spot" in self._rates:
            return self._rates[f"{name}:spot"]
        return self._rates.get(name)

    def _aggregated(self, http: _ComputeHttp, collection: str) -> list[tuple[str, dict[str, Any]]]:
        """Every item of `collection` in the project as (zone, item), following
        nextPageToken. A zone with nothing on a page carries a `warning` instead."""
        url = f"{self._url}/projects/{self._project}/aggregated/{collection}"
        found: list[tuple[str, dict[str, Any]]] = []
        params: dict[str, str] = {}
        while True:
            page = _object(http, http.request("GET", url, params=params), f"a list of {collection}")
            scopes = page.get("items") or {}
            if not isinstance(scopes, dict):
                raise http.error(f"answered a malformed {collection} list: {page!r:.200}", True)
            for scope, listed in scopes.items():
                items = listed.get(collection) if isinstance(listed, dict) else None
                zone = str(scope).removeprefix("zones/")
                found += [
                    (zone, _object(http, item, f"one of {collection}")) for item in items or []
                ]
            token = page.get("nextPageToken")
            if not token:
                return found
            params = {"pageToken": str(token)}

    def _storage(
        self, http: _ComputeHttp, instance: dict[str, Any], disks: Mapping[str, dict[str, Any]]
    ) -> Storage | None:
        """The persistent disks (boot and attached) and the local SSDs, which a stop keeps,
        and their size-weighted price. The instance names each persistent disk only by URL,
        so each one not in `disks` (keyed "projects/...") is read for its type and size; a
        local SSD's size is on the instance."""
        total_gb = monthly_usd = Decimal(0)
        for attached in instance.get("disks") or []:
            if attached.get("type") == "SCRATCH":
                disk, kind, size = attached, LOCAL_SSD, attached.get("diskSizeGb")
            else:
                source = str(attached.get("source", ""))
                if "projects/" not in source:
                    raise http.error(f"answered a disk without a source: {attached!r:.200}", True)
                path = _from_projects(source)
                disk = disks.get(path) or _object(
                    http, http.request("GET", f"{self._url}/{path}"), "a disk"
                )
                kind, size = _last_segment(disk.get("type")), disk.get("sizeGb")
            try:
                gb = Decimal(str(size))
            except InvalidOperation:
                raise http.error(f"answered a disk without a size: {disk!r:.200}", True) from None
            rate = self._disk_rates.get(kind, self._disk_rates[FALLBACK_DISK_TYPE])
            total_gb += gb
            monthly_usd += gb * rate
        if not total_gb:
            return None
        rate = monthly_usd / total_gb
        return Storage(total_gb, rate, rate)


def _google_error(response: httpx.Response) -> tuple[str, frozenset[str]] | None:
    """Google's `{"error": {"message", "errors": [{"reason"}]}}` as (message, reasons);
    None when the body is not in that shape."""
    try:
        body = response.json()
    except ValueError:
        return None
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict):
        return None
    details = error.get("errors")
    if not isinstance(details, list):
        details = []
    reasons = frozenset(
        str(d["reason"]) for d in details if isinstance(d, dict) and d.get("reason")
    )
    return str(error.get("message", ""))[:300], reasons


def _operation(http: _ComputeHttp, answer: Any, verb: str) -> dict[str, Any]:
    """The Operation of a `verb` call, or the error it failed with (`error.errors[]`)."""
    operation = _object(http, answer, "an operation")
    error = operation.get("error")
    errors = error.get("errors") if isinstance(error, dict) else None
    if not errors:
        return operation
    codes = frozenset(str(e.get("code")) for e in errors if isinstance(e, dict))
    said = "; ".join(
        f"{e.get('code')}: {e.get('message')}" if isinstance(e, dict) else str(e) for e in errors
    )[:300]
    raise http.refusal(codes, f"({verb} operation failed: {said})", said)


def _settled(state: PodState) -> CallResult:
    """The result for a VM that is not running: stopped is DONE, stopping is PENDING."""
    if state is PodState.STOPPING:
        return CallResult(CallOutcome.PENDING, "stopping; not TERMINATED yet")
    return CallResult(CallOutcome.DONE, f"already {state.value}")


def _instance(http: _ComputeHttp, url: str) -> dict[str, Any]:
    return _object(http, http.request("GET", url), "an instance")


def _object(http: _ComputeHttp, answer: Any, what: str) -> dict[str, Any]:
    if not isinstance(answer, dict):
        raise http.error(f"answered {answer!r:.200}, not {what}", True)
    return answer


def _seen(instance: dict[str, Any]) -> Seen:
    """The VM's status; one Google does not document is unknown (`Seen`), neither running
    nor stopped."""
    return Seen.of(STATES, instance.get("status"))


def _last_segment(url: Any) -> str:
    """The name at the end of a resource URL (machineType, disk type, accelerator type)."""
    return str(url or "").rstrip("/").rsplit("/", 1)[-1]


def _from_projects(url: str) -> str:
    """A resource URL from "projects/" on, to be read through the configured endpoint."""
    return url[url.index("projects/") :]


def _listed(ref: str, instance: dict[str, Any], description: PodDescription) -> Listed:
    """A VM as listed: its `name`, its `labels`, and its GPUs from `guestAccelerators` (the
    first accelerator type's name, every accelerator counted)."""
    labels = instance.get("labels")
    accelerators = [a for a in instance.get("guestAccelerators") or [] if isinstance(a, dict)]
    counts = [a.get("acceleratorCount") for a in accelerators]
    name = instance.get("name")
    return Listed(
        ref,
        description,
        name=name if isinstance(name, str) else None,
        labels={str(k): str(v) for k, v in labels.items()} if isinstance(labels, dict) else {},
        gpu_type=_last_segment(accelerators[0].get("acceleratorType")) if accelerators else None,
        gpu_count=sum(c for c in counts if isinstance(c, int)) if accelerators else None,
    )
