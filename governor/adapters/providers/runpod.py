"""RunPod over its GraphQL API: read a pod's rate and state, stop it keeping its volume and
resume it on that volume; and over its REST v2 API on the same host: a network volume's
size and tier, and what its pods have been billed so far.

Only `pod` and `myself { pods }` (queries), `podStop`, `podResume` and `podBidResume`
(mutations) are ever sent, each as RunPod's own SDK and CLI write it; never `podTerminate`,
which destroys the volume. A pod resumes with the GPU count the `pod` query reports for it;
a spot (interruptible) pod with `podBidResume`, bidding per GPU what it cost when it ran.
Billing is `GET /v2/billing/pods?bucketSize=day&startTime=` (with `podId=` when one pod is
asked about), whose records of a pod (the day in progress included) add up to what it has
cost since the day it was registered. A pod with no volume disk (`volumeInGb` 0, and only
such a pod, to keep calls few) is read again through REST v2, `GET /v2/pods/{id}`, for its
`mounts.network[].volumeId`, and each volume through `GET /v2/network-volumes/{id}` for its
`size` (GB) and `type`: a network volume is its storage, billed the same running or
stopped; with none, its stop would lose the workspace (`cannot_preserve`). REST v2 answers
errors with an HTTP status, classified with every status in `ProviderHttp` (429 and 5xx
retryable, other 4xx permanent). RunPod answers GraphQL client
errors as HTTP 200 with an `errors` list, so those are classified here, in `_classify`: "not
found" means the pod is gone (done for a stop, permanent for a resume); a rate limit and
RunPod's transient failure (`INTERNAL_SERVER_ERROR`, "Something went wrong. Please try again
later") are retryable; anything else (no GPU free on the pod's host, a locked pod) is
permanent. A `desiredStatus` outside those RunPod documents or has been seen to answer is
never taken for running or stopped: it is unknown (`Seen`), counted as running, and neither
`podStop` nor a resume is sent for it until RunPod answers a status it documents.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation
from typing import Any
from urllib.parse import quote

import httpx

from governor.adapters.providers._http import ProviderHttp, number
from governor.domain.model import PodState
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
)

DEFAULT_URL = "https://api.runpod.io/graphql"
STOP_LATENCY_S = 30.0  # podStop answers at once; the host takes tens of seconds to exit
# RunPod's list prices for a pod's volume disk; the container disk is wiped on stop, unbilled.
VOLUME_USD_PER_GB_MONTH = Decimal("0.10")
STOPPED_VOLUME_USD_PER_GB_MONTH = Decimal("0.20")
# A STANDARD network volume, billed the same running or stopped: the first 1 TB of it at
# $0.07/GB-month, the rest at $0.05 (RunPod's docs, storage/network-volumes.mdx, counted
# per volume). RunPod prices HIGH_PERFORMANCE "at a premium" with no figure: a setting.
STANDARD_FIRST_GB = Decimal(1000)
STANDARD_FIRST_USD_PER_GB_MONTH = Decimal("0.07")
STANDARD_BEYOND_USD_PER_GB_MONTH = Decimal("0.05")
HIGH_PERFORMANCE_USD_PER_GB_MONTH = Decimal("0.14")

PODS_QUERY = (
    "query Pods { myself { pods { id name desiredStatus costPerHr volumeInGb containerDiskInGb "
    "gpuCount } } }"
)
POD_QUERY = (
    "query Pod($podId: String!) { pod(input: {podId: $podId}) "
    "{ id desiredStatus costPerHr volumeInGb containerDiskInGb gpuCount podType } }"
)
STOP_MUTATION = (
    "mutation PodStop($podId: String!) { podStop(input: {podId: $podId}) { id desiredStatus } }"
)
RESUME_MUTATION = (
    "mutation PodResume($podId: String!, $gpuCount: Int!) "
    "{ podResume(input: {podId: $podId, gpuCount: $gpuCount}) { id desiredStatus } }"
)
BID_RESUME_MUTATION = (
    "mutation PodBidResume($podId: String!, $bidPerGpu: Float!, $gpuCount: Int!) "
    "{ podBidResume(input: {podId: $podId, bidPerGpu: $bidPerGpu, gpuCount: $gpuCount}) "
    "{ id desiredStatus } }"
)
SPOT_POD_TYPE = "INTERRUPTABLE"  # `podType` of a spot pod (RunPod rents it `podRentInterruptable`)
# Every `desiredStatus` RunPod documents (its REST v1 Pod schema: RUNNING, EXITED,
# TERMINATED) and those it has been seen to answer over GraphQL (CREATED, RESTARTING,
# PAUSED, DEAD). One that may still hold its GPUs counts as running, so that a stop is sent.
STATES = {
    "RUNNING": PodState.RUNNING,
    "CREATED": PodState.RUNNING,
    "RESTARTING": PodState.RUNNING,
    "DEAD": PodState.RUNNING,
    "EXITED": PodState.STOPPED,
    "PAUSED": PodState.STOPPED,
    "TERMINATED": PodState.GONE,
}
# The `extensions.code` and the words of RunPod's transient failure inside an HTTP 200.
TRANSIENT_CODES = frozenset({"INTERNAL_SERVER_ERROR"})
TRANSIENT_WORDS = ("rate limit", "too many requests", "something went wrong", "try again later")


class PodNotFound(ProviderError):
    def __init__(self, ref: str) -> None:
        super().__init__(f"runpod has no pod {ref!r}", retryable=False)


class RunPodProvider:
    """Implements StopsPreserving, Resumes, ReportsBilling and ListsPods against RunPod's
    GraphQL endpoint (and its REST v2: network volumes, billing)."""

    def __init__(
        self,
        client: httpx.Client,
        api_key: str,
        url: str = DEFAULT_URL,
        *,
        stop_latency_s: float = STOP_LATENCY_S,
        volume_usd_per_gb_month: Decimal = VOLUME_USD_PER_GB_MONTH,
        stopped_volume_usd_per_gb_month: Decimal = STOPPED_VOLUME_USD_PER_GB_MONTH,
        high_performance_usd_per_gb_month: Decimal = HIGH_PERFORMANCE_USD_PER_GB_MONTH,
    ) -> None:
        self.stop_latency_s = stop_latency_s
        self._volume_rates = (volume_usd_per_gb_month, stopped_volume_usd_per_gb_month)
        self._high_performance_rate = high_performance_usd_per_gb_month
        self._http = ProviderHttp.bearer(client, "runpod", api_key)
        self._url = url
        self._rest = httpx.URL(url).copy_with(path="/v2", query=None)
        self._billing_url = self._v2("billing", "pods")

    def describe(self, ref: str) -> PodDescription:
        return self._description(self._pod(ref))

    def pods(self) -> list[Listed]:
        """Every pod of the account, stopped ones included (they still cost storage)."""
        myself = self._graphql(PODS_QUERY, None).get("myself")
        pods = myself.get("pods") if isinstance(myself, dict) else None
        if not isinstance(pods, list):
            raise self._http.error(f"answered no pods: {myself!r:.200}", True)
        return [_listed(p, self._description(p)) for p in pods]

    def _description(self, pod: dict[str, Any]) -> PodDescription:
        try:
            rate, volume = number(pod.get("costPerHr")), number(pod.get("volumeInGb"))
        except InvalidOperation:
            raise self._http.error(f"answered a non-number in {pod!r:.200}", True) from None
        seen = Seen.of(STATES, pod.get("desiredStatus"))
        if volume == 0 and seen.state is not PodState.GONE:
            network = self._network_storage(str(pod.get("id")))
            if network is not None:
                return seen.describing(rate, network)
        storage = None if volume is None else Storage(volume, *self._volume_rates)
        return seen.describing(rate, storage, cannot_preserve=_container_disk_only(volume))

    def _network_storage(self, ref: str) -> Storage | None:
        """The network volumes mounted on pod `ref` (REST v2) as its storage; None: none."""
        pod = self._http.request("GET", self._v2("pods", ref))
        mounts = pod.get("mounts") if isinstance(pod, dict) else None
        network = mounts.get("network", []) if isinstance(mounts, dict) else None
        if not isinstance(network, list) or not all(isinstance(m, dict) for m in network):
            raise self._http.error(f"answered a pod without its mounts: {pod!r:.200}", True)
        volumes = [self._network_volume(str(mount.get("volumeId"))) for mount in network]
        gb = sum((size for size, _ in volumes), Decimal(0))
        if gb == 0:
            return None
        usd_per_gb_month = sum((usd for _, usd in volumes), Decimal(0)) / gb
        return Storage(gb, usd_per_gb_month, usd_per_gb_month)

    def _network_volume(self, volume_id: str) -> tuple[Decimal, Decimal]:
        """A network volume's size (GB) and what it costs a month, by its tier; a tier
        RunPod does not document is priced as the dearer of the two."""
        volume = self._http.request("GET", self._v2("network-volumes", volume_id))
        try:
            size = number(volume.get("size")) if isinstance(volume, dict) else None
        except InvalidOperation:
            size = None
        if size is None or size < 0:
            raise self._http.error(f"answered a volume without a size: {volume!r:.200}", True)
        tier = volume.get("type")
        if tier == "STANDARD":
            first = min(size, STANDARD_FIRST_GB)
            beyond = size - first
            return size, (
                first * STANDARD_FIRST_USD_PER_GB_MONTH + beyond * STANDARD_BEYOND_USD_PER_GB_MONTH
            )
        rate = self._high_performance_rate
        if tier != "HIGH_PERFORMANCE":
            rate = max(rate, STANDARD_FIRST_USD_PER_GB_MONTH)
        return size, size * rate

    def _v2(self, *steps: str) -> str:
        """A REST v2 URL on the GraphQL endpoint's host (RunPod serves both there)."""
        path = "/".join(quote(step, safe="") for step in steps)
        return str(self._rest.copy_with(path=f"{self._rest.path}/{path}"))

    def stop(self, ref: str) -> CallResult:
        try:
            seen = Seen.of(STATES, self._pod(ref).get("desiredStatus"))
            if not seen.known:
                return seen.unknown()
            if seen.state is not PodState.RUNNING:
                return CallResult(CallOutcome.DONE, f"already {seen.state.value}")
            stopped = self._graphql(STOP_MUTATION, ref).get("podStop")
        except PodNotFound:
            return CallResult(CallOutcome.DONE, "already gone")
        except ProviderError as exc:
            return CallResult.failed(exc)
        if isinstance(stopped, dict) and stopped.get("desiredStatus") == "EXITED":
            return CallResult(CallOutcome.DONE, "stopped; volume kept")
        return CallResult(CallOutcome.PENDING, "podStop accepted; not exited yet")

    def resume(self, ref: str) -> CallResult:
        try:
            pod = self._pod(ref)
            seen = Seen.of(STATES, pod.get("desiredStatus"))
            if not seen.known:
                return seen.unknown(CallOutcome.RETRYABLE)
            state = seen.state
            if state is PodState.RUNNING:
                return CallResult(CallOutcome.DONE, "already running")
            if state is PodState.GONE:
                return CallResult(CallOutcome.PERMANENT, f"runpod pod {ref!r} is terminated")
            gpus = pod.get("gpuCount")
            if not isinstance(gpus, int) or isinstance(gpus, bool) or gpus < 0:
                raise self._http.error(f"answered a pod without a gpuCount: {pod!r:.200}", True)
            if pod.get("podType") == SPOT_POD_TYPE:
                bid = self._bid_per_gpu(pod, gpus)
                said = f"podBidResume accepted at ${bid}/GPU/h with {gpus} GPUs; volume kept"
                answer = self._graphql(
                    BID_RESUME_MUTATION, ref, bidPerGpu=float(bid), gpuCount=gpus
                )
                resumed = answer.get("podBidResume")
            else:
                said = f"podResume accepted with {gpus} GPUs; volume kept"
                resumed = self._graphql(RESUME_MUTATION, ref, gpuCount=gpus).get("podResume")
            if not isinstance(resumed, dict):
                raise self._http.error(f"answered a malformed resume: {resumed!r:.200}", True)
        except ProviderError as exc:
            return CallResult.failed(exc)
        return CallResult(CallOutcome.DONE, said)

    def _bid_per_gpu(self, pod: dict[str, Any], gpus: int) -> Decimal:
        """What a spot pod bids per GPU to resume: what it cost per GPU when it ran."""
        try:
            rate = number(pod.get("costPerHr"))
        except InvalidOperation:
            raise self._http.error(f"answered a non-number in {pod!r:.200}", True) from None
        if rate is None or rate <= 0 or gpus == 0:
            raise self._http.error(f"has no rate to bid on for spot pod {pod.get('id')!r}", False)
        return rate / gpus

    def billed(self, since: Mapping[str, datetime]) -> dict[str, Billed]:
        """The account's pods' billing records (the one pod's, when one is asked about) from
        the day of the earliest `since` on, summed per pod over the days that end after its
        own `since`; through the moment RunPod answered. The start is always sent: without
        it RunPod answers the last 30 days only, and an older pod's total would shrink as its
        first days fell out. Daily buckets, a 24th of the records hourly ones would be:
        RunPod snaps the start down to midnight UTC, so the day of registration counts whole,
        as it did in the figure read at registration (the baseline the bill is compared from)."""
        asked_at = datetime.now(UTC)
        start = min(since.values(), default=asked_at).astimezone(UTC)
        params = {"bucketSize": "day", "startTime": start.strftime("%Y-%m-%dT%H:%M:%SZ")}
        if len(since) == 1:
            params["podId"] = next(iter(since))
        answer = self._http.request("GET", self._billing_url, params=params)
        records = answer.get("records") if isinstance(answer, dict) else None
        if not isinstance(records, list):
            raise self._http.error(f"answered billing without records: {answer!r:.200}", True)
        totals = dict.fromkeys(since, Decimal(0))
        try:
            for record in records:
                pod = record.get("podId")
                if pod in totals and _ends(record) > since[pod]:
                    totals[pod] += Decimal(str(record.get("totalAmount", 0)))
        except (InvalidOperation, AttributeError, KeyError, TypeError, ValueError):
            raise self._http.error(f"answered malformed billing: {records!r:.200}", True) from None
        return {ref: Billed(total, asked_at) for ref, total in totals.items()}

    def _pod(self, ref: str) -> dict[str, Any]:
        pod = self._graphql(POD_QUERY, ref).get("pod")
        if pod is None:
            raise PodNotFound(ref)
        if not isinstance(pod, dict):
            raise self._http.error(f"answered a malformed pod: {pod!r:.200}", True)
        return pod

    def _graphql(self, query: str, ref: str | None, **variables: Any) -> dict[str, Any]:
        ids = {} if ref is None else {"podId": ref}
        body = {"query": query, "variables": {**ids, **variables}}
        answer = self._http.request("POST", self._url, json=body)
        if not isinstance(answer, dict):
            raise self._http.error(f"answered {answer!r:.200}, not an object", True)
        errors = answer.get("errors")
        if errors:
            raise self._classify(errors, ref)
        data = answer.get("data")
        if not isinstance(data, dict):
            raise self._http.error(f"answered no data: {answer!r:.200}", True)
        return data

    def _classify(self, errors: Any, ref: str | None) -> ProviderError:
        """A GraphQL `errors` list (inside an HTTP 200) as the error it amounts to: the one
        place RunPod's answers are told retryable from permanent (HTTP statuses aside)."""
        listed = errors if isinstance(errors, list) else [errors]
        said = "; ".join(
            str(e.get("message", e)) if isinstance(e, dict) else str(e) for e in listed
        )[:300]
        codes = {
            str(e["extensions"].get("code"))
            for e in listed
            if isinstance(e, dict) and isinstance(e.get("extensions"), dict)
        }
        lowered = said.lower()
        if "not found" in lowered and ref is not None:
            return PodNotFound(ref)
        retryable = bool(codes & TRANSIENT_CODES) or any(w in lowered for w in TRANSIENT_WORDS)
        return self._http.error(f"refused: {said}", retryable)


def _container_disk_only(volume_gb: Decimal | None) -> str | None:
    """Why a stop would lose the workspace of a pod with no volume disk (and, when this is
    asked, no network volume): RunPod erases its container disk when the pod stops (REST v1
    Pod schema, `containerDiskInGb`)."""
    if volume_gb is None or volume_gb > 0:
        return None
    return (
        "it has no volume disk (volumeInGb 0) and no network volume, and RunPod erases its "
        "container disk when the pod stops: give it a volume disk or a network volume to keep "
        "the workspace"
    )


def _ends(record: dict[str, Any]) -> datetime:
    """When a billing record's bucket ends (RFC 3339), as aware UTC."""
    ends = datetime.fromisoformat(str(record["endTime"]).replace("Z", "+00:00"))
    if ends.tzinfo is None:
        raise ValueError(f"a billing record's endTime without its offset: {ends}")
    return ends


def _listed(pod: dict[str, Any], description: PodDescription) -> Listed:
    """A pod as listed: RunPod keeps a `name` per pod and no labels or tags, so the labels
    are those written in its name (`labels_in_name`); its GPUs are its `gpuCount` (the
    model is its machine's, a nested read the vendored definitions give no type for)."""
    name = pod.get("name")
    gpus = pod.get("gpuCount")
    named = name if isinstance(name, str) and name else None
    return Listed(
        str(pod.get("id")),
        description,
        name=named,
        labels=labels_in_name(named),
        gpu_count=gpus if isinstance(gpus, int) and not isinstance(gpus, bool) else None,
    )
