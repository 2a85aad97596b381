"""A fake RunPod cloud speaking the GraphQL subset the RunPod adapter uses, over real HTTP.

POST /graphql with {"query", "variables"} and the key as `Authorization: Bearer` or
`?api_key=` (both forms the real API accepts). It answers the `pod` and `myself { pods }`
queries and the `podStop`, `podResume` and (for a spot pod) `podBidResume` mutations (a
resumed pod runs and bills again), each with the fields the request selected, as GraphQL
does; `podTerminate` is honoured (the volume is lost) and recorded, as every mutation is, so a
test can prove it never came. Pods bill costPerHr for every second they run, by this
process's clock. Besides the canned answers every fake cloud has, "graphql:<message>" answers
the next call with that error inside an HTTP 200, as RunPod does, "transient" with RunPod's
own transient failure (INTERNAL_SERVER_ERROR) and "no-capacity" with RunPod's refusal to
resume a pod whose host has no GPU free.

Beside it, two operations of RunPod's REST v2 API on the same host: `GET /v2/pods/{id}` (a
pod with the fields RunPod's Pod schema requires, its `mounts` a network volume or its volume
disk) and `GET /v2/network-volumes/{id}`, whose errors are REST v2's: an HTTP status with
a problem+json `ErrorResponse`. A pod's workspace is moved onto a network volume with
`FakeRunPod.add_network_volume` (its volume disk is then 0 GB, as RunPod's are mutually
exclusive).

    python -m governor.fakes.runpod --port 8765 --state cloud.json \\
        --pods 'pod-1=3600' [--api-key KEY]
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from http import HTTPStatus
from pathlib import Path
from typing import Any

from governor.fakes import http_cloud
from governor.fakes.http_cloud import ErrorShapes, FakeCloud, FakeRequest, Reply, bill_runs, now

DEFAULT_API_KEY = "fake-runpod-key"
_MUTATION_FIELD = re.compile(r"\b(pod\w+)\s*\(")
NO_FREE_GPUS = "There are not enough free GPUs on the host machine to start this pod."
# RunPod's transient failure, as its SDK's and CLI's users have seen it on podResume/podStop
SOMETHING_WENT_WRONG = "Something went wrong. Please try again later or contact support."
ON_DEMAND, SPOT = "RESERVED", "INTERRUPTABLE"  # `podType` of an on-demand and a spot pod
BILLING_WINDOW = timedelta(days=30)  # what the billing records cover when no start is asked
# The bucket sizes this fake answers billing in; RunPod's week, month and year it refuses.
BUCKETS = {"hour": timedelta(hours=1), "day": timedelta(days=1)}
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
DATA_CENTER = "US-KS-2"
WORKSPACE = "/workspace"
PROBLEM = "application/problem+json"
_REST_POD = re.compile(r"/v2/pods/([^/]+)")
_REST_VOLUME = re.compile(r"/v2/network-volumes/([^/]+)")
# A GraphQL desiredStatus as REST v2's PodStatus says it
REST_STATUS = {
    "RUNNING": "RUNNING",
    "CREATED": "PROVISIONING",
    "RESTARTING": "STARTING",
    "EXITED": "EXITED",
    "PAUSED": "EXITED",
    "DEAD": "ERROR",
    "TERMINATED": "TERMINATED",
}


@dataclass
class CloudVolume:
    """A network volume, as REST v2's NetworkVolume (size in GB; type STANDARD or
    HIGH_PERFORMANCE)."""

    id: str
    size: int
    type: str = "STANDARD"
    name: str = "workspace"

    def rest(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "size": self.size,
            "dataCenter": DATA_CENTER,
            "type": self.type,
        }


@dataclass
class CloudPod:
    id: str
    cost_per_hr: str
    started_at: str
    desired_status: str = "RUNNING"
    stopped_at: str | None = None
    volume_in_gb: int = 20
    container_disk_in_gb: int = 50
    gpu_count: int = 1
    pod_type: str = ON_DEMAND
    bid_per_gpu: float | None = None  # what its last podBidResume bid
    network_volume_id: str | None = None  # the network volume its workspace is on
    name: str = ""  # what the account calls it (the pod's id where none was given)
    earlier_runs: list[list[str]] = field(default_factory=list)  # [from, until] before a resume

    def bill_usd(self, now: datetime, since: datetime | None = None) -> Decimal:
        """costPerHr for every second it ran (from `since`), by the cloud's own clock."""
        runs: list[Sequence[str | None]] = [*self.earlier_runs, [self.started_at, self.stopped_at]]
        return bill_runs(Decimal(self.cost_per_hr), runs, now, since)

    def billing_records(
        self, now: datetime, size: timedelta = BUCKETS["hour"], since: datetime = EPOCH
    ) -> list[dict[str, Any]]:
        """REST v2 billing records, one per bucket of `size` (UTC-aligned) from the bucket
        of `since` or of the pod's start, whichever is later, to now (the last in progress).
        Only compute is billed here: the volume's storage is left to the pod description."""
        began = datetime.fromisoformat(
            self.earlier_runs[0][0] if self.earlier_runs else self.started_at
        )
        first = _bucket_of(max(began, since), size)
        records = []
        while first < now:
            end = first + size
            amount = float(self.bill_usd(min(end, now), first))
            records.append(
                {
                    "startTime": _rfc3339(first),
                    "endTime": _rfc3339(end),
                    "podId": self.id,
                    **_amounts(amount),
                }
            )
            first = end
        return records

    def graphql(self, selected: frozenset[str]) -> dict[str, Any]:
        """The pod as GraphQL answers it: the `selected` fields only."""
        fields = {
            "id": self.id,
            "desiredStatus": self.desired_status,
            "costPerHr": float(self.cost_per_hr),
            "volumeInGb": self.volume_in_gb if self.desired_status != "TERMINATED" else 0,
            "containerDiskInGb": self.container_disk_in_gb,
            "gpuCount": self.gpu_count,
            "podType": self.pod_type,
            "name": self.name or self.id,
        }
        return {name: value for name, value in fields.items() if name in selected}

    def rest(self) -> dict[str, Any]:
        """The pod as REST v2 answers it: every field RunPod's Pod schema requires (the GPU
        block only for a GPU pod, as the schema says)."""
        running = self.desired_status == "RUNNING"
        mounts: dict[str, Any] = {}
        if self.network_volume_id is not None:
            mounts["network"] = [{"volumeId": self.network_volume_id, "path": WORKSPACE}]
        elif self.volume_in_gb > 0:
            mounts["persistent"] = {"size": self.volume_in_gb, "path": WORKSPACE}
        began = self.earlier_runs[0][0] if self.earlier_runs else self.started_at
        pod: dict[str, Any] = {
            "id": self.id,
            "name": self.name or self.id,
            "status": REST_STATUS.get(self.desired_status, self.desired_status),
            "actions": ["stop", "restart", "terminate"] if running else ["start", "terminate"],
            "image": "runpod/pytorch:1.0.2-cu1281-torch280-ubuntu2404",
            "args": "",
            "disk": self.container_disk_in_gb,
            "mounts": mounts,
            "ports": [],
            "env": {},
            "registry": None,
            "cloud": "SECURE",
            "dataCenterId": DATA_CENTER,
            "cudaVersion": "12.8",
            "ssh": {"proxy": None, "direct": None},
            "template": None,
            "cost": float(self.cost_per_hr) if running else 0.0,
            "locked": False,
            "runtime": {"uptime": _uptime_s(self.started_at)} if running else None,
            "createdAt": began,
            "startedAt": self.started_at,
            "globalNetworking": {"enabled": False},
        }
        if self.gpu_count > 0:
            pod["gpu"] = {"id": "NVIDIA A100 80GB PCIe", "count": self.gpu_count}
        return pod


@dataclass
class CloudState:
    pods: dict[str, CloudPod] = field(default_factory=dict)
    mutations: list[dict[str, str]] = field(default_factory=list)
    network_volumes: dict[str, CloudVolume] = field(default_factory=dict)

    @classmethod
    def restore(cls, saved: dict[str, Any]) -> CloudState:
        pods = {ref: CloudPod(**pod) for ref, pod in saved.get("pods", {}).items()}
        volumes = saved.get("network_volumes", {})
        return cls(
            pods=pods,
            mutations=saved.get("mutations", []),
            network_volumes={ref: CloudVolume(**volume) for ref, volume in volumes.items()},
        )

    def mutation_names(self) -> list[str]:
        return [m["name"] for m in self.mutations]


class FakeRunPod(FakeCloud):
    """The cloud: its pods and the GraphQL it answers."""

    provider = "runpod"

    def __init__(self, state_file: Path, api_key: str = DEFAULT_API_KEY) -> None:
        super().__init__(state_file, api_key)
        self.state = CloudState.restore(self.saved)

    def add_pod(self, ref: str, hourly_rate_usd: str, *, name: str = "") -> None:
        with self.lock:
            if ref not in self.state.pods:
                self.state.pods[ref] = CloudPod(ref, hourly_rate_usd, now().isoformat(), name=name)
            self.save()

    def add_network_volume(
        self, pod_ref: str, volume_id: str, size_gb: int, tier: str = "STANDARD"
    ) -> None:
        """Pod `pod_ref`'s workspace on a new network volume instead of a volume disk."""
        with self.lock:
            self.state.network_volumes[volume_id] = CloudVolume(volume_id, size_gb, tier)
            pod = self.state.pods[pod_ref]
            pod.network_volume_id, pod.volume_in_gb = volume_id, 0
            self.save()

    def authorized(self, request: FakeRequest) -> bool:
        return self.api_key in (request.bearer(), request.param("api_key"))

    def errors_for(self, request: FakeRequest) -> ErrorShapes:
        """REST v2's requests fail in its words: an ErrorResponse with the HTTP status."""
        return RestErrors() if request.path.startswith("/v2/") else self

    def error(self, status: int, message: str) -> Reply:
        return Reply(status, {"errors": [{"message": message}]})

    def canned(self, kind: str, arg: str) -> Reply | None:
        if kind == "no-capacity":
            return Reply(200, _errors(NO_FREE_GPUS))
        if kind == "transient":
            return Reply(200, _errors(SOMETHING_WENT_WRONG, code="INTERNAL_SERVER_ERROR"))
        return Reply(200, _errors(arg)) if kind == "graphql" else None

    def snapshot(self) -> dict[str, Any]:
        return asdict(self.state)

    def handle(self, request: FakeRequest) -> Reply:
        if request.path == "/v2/billing/pods" and request.method == "GET":
            return self._billing(request)
        if request.path.startswith("/v2/"):
            return self._rest(request)
        if request.path != "/graphql" or request.method != "POST":
            return self.error(404, "not found")
        body = request.body if isinstance(request.body, dict) else {}
        query, variables = str(body.get("query", "")), body.get("variables") or {}
        literal = re.search(r'podId:\s*"([^"]+)"', query)
        ref = str(variables.get("podId") or (literal.group(1) if literal else ""))
        if "myself" in query:
            pods = [pod.graphql(_selected(query, "pods")) for pod in self.state.pods.values()]
            return Reply(200, {"data": {"myself": {"pods": pods}}})
        if query.lstrip().startswith("mutation"):
            return Reply(200, self._mutate(query, ref, variables))
        pod = self.state.pods.get(ref)
        return Reply(200, {"data": {"pod": pod.graphql(_selected(query, "pod")) if pod else None}})

    def _rest(self, request: FakeRequest) -> Reply:
        """`GET /v2/pods/{id}` and `GET /v2/network-volumes/{id}`; a terminated pod, as any
        unknown id, is not found."""
        errors = RestErrors()
        pod = _REST_POD.fullmatch(request.path)
        volume = _REST_VOLUME.fullmatch(request.path)
        if request.method != "GET" or (pod is None and volume is None):
            return errors.error(404, "not found")
        if pod is not None:
            found = self.state.pods.get(pod.group(1))
            if found is None or found.desired_status == "TERMINATED":
                return errors.error(404, "pod not found")
            return Reply(200, found.rest())
        assert volume is not None
        network = self.state.network_volumes.get(volume.group(1))
        if network is None:
            return errors.error(404, "network volume not found")
        return Reply(200, network.rest())

    def _billing(self, request: FakeRequest) -> Reply:
        """`listPodBilling`, as RunPod's REST v2 document has it: the records of the buckets
        (`bucketSize`, by default a day) from `startTime` snapped down to its bucket (by
        default 30 days back) to `endTime` snapped up to the end of its bucket (by default
        now's), or of the `lastN` buckets ending with the one in progress; one pod's with
        `podId`; with the resolved query, the counts and the totals."""
        errors = RestErrors()
        at, bucket = now(), request.param("bucketSize") or "day"
        size = BUCKETS.get(bucket)
        if size is None:
            return errors.error(400, f"bucketSize {bucket!r}: the fake answers hour or day")
        start, end, last = (request.param(n) for n in ("startTime", "endTime", "lastN"))
        try:
            if last is not None:
                if start is not None or end is not None:
                    raise ValueError("lastN is mutually exclusive with startTime and endTime")
                if int(last) < 1:
                    raise ValueError(f"lastN {last!r} is below 1")
                until = _bucket_of(at, size) + size
                since = until - int(last) * size
            else:
                since = _bucket_of(at - BILLING_WINDOW if start is None else _instant(start), size)
                ends = at if end is None else _instant(end)
                until = ends if _bucket_of(ends, size) == ends else _bucket_of(ends, size) + size
        except ValueError as exc:
            return errors.error(400, str(exc))
        ref = request.param("podId")
        pods = [p for p in self.state.pods.values() if ref is None or p.id == ref]
        records = [
            record for pod in pods for record in pod.billing_records(min(at, until), size, since)
        ]
        totals = _amounts(sum((r["totalAmount"] for r in records), 0.0))
        metadata = {
            "query": {
                "startTime": _rfc3339(since),
                "endTime": _rfc3339(until),
                "bucketSize": bucket,
                "podId": ref,
            },
            "recordCount": len(records),
            "uniquePodCount": len({r["podId"] for r in records}),
            "totals": totals,
        }
        return Reply(200, {"records": records, "metadata": metadata})

    def _mutate(self, query: str, ref: str, variables: dict[str, Any]) -> dict[str, Any]:
        name = (_MUTATION_FIELD.findall(query) or ["(unknown)"])[0]
        self.state.mutations.append({"name": name, "pod_id": ref, "at": now().isoformat()})
        pod = self.state.pods.get(ref)
        if pod is None or pod.desired_status == "TERMINATED":
            return _errors(f"pod not found to {name.removeprefix('pod').lower()}")
        selected = _selected(query, name)
        if name in ("podResume", "podBidResume"):
            return self._resume(pod, name, variables, selected)
        if name not in ("podStop", "podTerminate"):
            return _errors(f"{name} is not supported by the fake RunPod")
        if pod.desired_status == "RUNNING":
            pod.stopped_at = now().isoformat()
        pod.desired_status = "EXITED" if name == "podStop" else "TERMINATED"
        return {"data": {name: pod.graphql(selected) if name == "podStop" else None}}

    def _resume(
        self, pod: CloudPod, name: str, variables: dict[str, Any], selected: frozenset[str]
    ) -> dict[str, Any]:
        """podResume (on demand) or podBidResume (spot, with a bid per GPU): an exited pod
        starts again on its volume, with `gpuCount` GPUs."""
        gpu_count, bid = variables.get("gpuCount"), variables.get("bidPerGpu")
        if not isinstance(gpu_count, int) or isinstance(gpu_count, bool) or gpu_count < 0:
            return _errors(f'Variable "$gpuCount" got invalid value {gpu_count!r}; expected Int!')
        if (name == "podBidResume") != (pod.pod_type == SPOT):
            return _errors(f"{name} cannot resume a {pod.pod_type} pod")
        if name == "podBidResume" and (not isinstance(bid, int | float) or bid <= 0):
            return _errors(f'Variable "$bidPerGpu" got invalid value {bid!r}; expected Float!')
        if pod.desired_status == "EXITED":
            pod.earlier_runs.append([pod.started_at, str(pod.stopped_at)])
            pod.started_at, pod.stopped_at = now().isoformat(), None
            pod.desired_status, pod.gpu_count = "RUNNING", gpu_count
            pod.bid_per_gpu = bid
        return {"data": {name: pod.graphql(selected)}}


class RestErrors:
    """How RunPod's REST v2 words its failures: an `ErrorResponse` (title, status, detail) as
    application/problem+json, a 429 with Retry-After."""

    def error(self, status: int, message: str) -> Reply:
        body = {"title": HTTPStatus(status).phrase, "status": status, "detail": message}
        return Reply(status, body, content_type=PROBLEM)

    def rate_limited(self, retry_after: str) -> Reply:
        headers = {"Retry-After": retry_after} if retry_after else {}
        return Reply(429, self.error(429, "rate limit exceeded").body, headers, None, PROBLEM)

    def canned(self, kind: str, arg: str) -> Reply | None:
        return None


def _uptime_s(started_at: str) -> int:
    return max(0, int((now() - datetime.fromisoformat(started_at)).total_seconds()))


def _instant(text: str) -> datetime:
    """An RFC 3339 instant (with its offset, or Z) as an aware datetime; ValueError if not."""
    instant = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if instant.tzinfo is None:
        raise ValueError(f"{text!r} has no offset")
    return instant


def _bucket_of(instant: datetime, size: timedelta) -> datetime:
    """The start of the UTC-aligned bucket of `size` that `instant` lies in."""
    return EPOCH + (instant - EPOCH) // size * size


def _rfc3339(instant: datetime) -> str:
    return instant.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _amounts(compute_usd: float) -> dict[str, float]:
    """A bucket's PodBillingAmounts: its GPU compute alone (no CPU pods, no disk billed)."""
    return {
        "totalAmount": compute_usd,
        "gpuAmount": compute_usd,
        "cpuAmount": 0.0,
        "diskAmount": 0.0,
    }


def _selected(query: str, field: str) -> frozenset[str]:
    """The names `query` selects on `field` (a flat selection, as the adapter sends)."""
    found = re.search(rf"\b{field}\b\s*(?:\([^()]*\))?\s*\{{([^{{}}]*)\}}", query)
    return frozenset(found.group(1).split()) if found else frozenset()


def _errors(message: str, code: str | None = None) -> dict[str, Any]:
    error: dict[str, Any] = {"message": message}
    if code is not None:
        error["extensions"] = {"code": code}
    return {"data": None, "errors": [error]}


def main(argv: list[str] | None = None) -> None:
    http_cloud.main(FakeRunPod, DEFAULT_API_KEY, argv, path="/graphql")


if __name__ == "__main__":
    main()
