"""A fake GCP Compute Engine project speaking the REST subset the GCP adapter uses, over
real HTTP.

    GET    /compute/v1/projects/{p}/zones/{z}/instances/{name}
    POST   /compute/v1/projects/{p}/zones/{z}/instances/{name}/stop?discardLocalSsd=&requestId=
    POST   /compute/v1/projects/{p}/zones/{z}/instances/{name}/start?requestId=
    DELETE /compute/v1/projects/{p}/zones/{z}/instances/{name}     (destroys its disks)
    GET    /compute/v1/projects/{p}/zones/{z}/disks/{disk}
    GET    /compute/v1/projects/{p}/zones/{z}/operations/{operation}
    GET    /compute/v1/projects/{p}/aggregated/{instances|disks}?maxResults=&pageToken=
    POST   /bigquery/v2/projects/{p}/queries   GET .../queries/{jobId}   (the billing export)
    GET    /computeMetadata/v1/instance/service-accounts/default/token  (Metadata-Flavor: Google)
    POST   /token   grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer&assertion=<JWT>

Compute calls need `Authorization: Bearer <token>`: the fixed one, which the metadata
server hands out, or one the token endpoint issued and that has not expired. The token
endpoint is Google's OAuth2 one for service accounts: a key file's `token_uri` points at it,
and it takes a JWT signed (RS256) with the key of a service account added with
`add_service_account`, issuing tokens that live `sa_token_expires_in_s` (tests shorten it
to count refreshes without waiting).

A stop answers a zonal Operation and the VM is STOPPING for `stop_delay_s`, then
TERMINATED; a start answers one too and the VM is RUNNING again (a STOPPING one is not
ready to start). It bills its rate for every second it runs, by this process's clock. Every
request is logged, so a test can prove a DELETE never came. Errors are Google's
`{"error": {"code", "message", "errors": [{"domain", "reason", "message"}]}}`. Besides the
canned answers every fake cloud has, "reason:<status>:<reason>" answers the next call with
that error (e.g. "reason:403:rateLimitExceeded"), "operation-error:<CODE>" with an
Operation that failed with that code, and "no-capacity[:<zone>]" with the Operation of a
start that failed for want of machines in the zone (ZONE_RESOURCE_POOL_EXHAUSTED; zone
us-central1-a unless named). `fail_next_operations(code)` makes the next stop or start
accepted (its Operation PENDING, the VM left as it is) and its Operation, when read, DONE
with that error code, as an Operation that fails after it was accepted. Aggregated lists
come in pages of `page_size` items (Google's default maxResults, 500, unless a test lowers
it), every zone of the project present on each page: with its items, or with Google's
NO_RESULTS_ON_PAGE warning.

Once `export_billing` is called, the project keeps its Cloud Billing export in a fake
BigQuery (see governor.fakes.bigquery): every VM and disk billed hour by hour.

    python -m governor.fakes.gcp --port 8765 --state cloud.json \\
        --pods 'us-central1-a/pod-1=3.67' [--api-key TOKEN]

Pods started from the command line are a2-highgpu-1g VMs in project "fake-project".
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs
from uuid import uuid4

from governor.fakes import http_cloud
from governor.fakes.bigquery import BillingExport, Metered, disk_rate
from governor.fakes.http_cloud import FakeCloud, FakeRequest, Reply, bill_runs

DEFAULT_TOKEN = "fake-gcp-token"
DEFAULT_PROJECT = "fake-project"
DEFAULT_MACHINE_TYPE = "a2-highgpu-1g"
DEFAULT_ZONE = "us-central1-a"
TOKEN_PATH = "/computeMetadata/v1/instance/service-accounts/default/token"
SA_TOKEN_PATH = "/token"  # where a service-account key file's token_uri points
JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
API = "https://www.googleapis.com/compute/v1"  # how Google spells its resource URLs
REASONS = {
    400: "invalid",
    401: "authError",
    403: "forbidden",
    404: "notFound",
    409: "conflict",
    429: "rateLimitExceeded",
}
UNAUTHENTICATED = (
    "Request had invalid authentication credentials. Expected OAuth 2 access token, "
    "login cookie or other valid authentication credential."
)
_COMPUTE_PATH = re.compile(
    r"/compute/v1/projects/(?P<project>[^/]+)/zones/(?P<zone>[^/]+)/"
    r"(?P<collection>instances|disks|operations)/(?P<name>[^/]+)(?:/(?P<verb>stop|start))?"
)
_BIGQUERY_PATH = re.compile(r"/bigquery/v2/projects/(?P<project>[^/]+)/queries(?:/(?P<job>[^/]+))?")
_AGGREGATED_PATH = re.compile(
    r"/compute/v1/projects/(?P<project>[^/]+)/aggregated/(?P<collection>instances|disks)"
)


@dataclass
class CloudDisk:
    zone: str
    name: str
    type: str
    size_gb: int


@dataclass
class CloudInstance:
    zone: str
    name: str
    machine_type: str
    hourly_rate_usd: str
    started_at: str
    disks: list[str]  # its persistent disks as "zone/name", boot disk first
    spot: bool = False
    accelerators: dict[str, int] = field(default_factory=dict)
    local_ssds: int = 0
    labels: dict[str, str] = field(default_factory=dict)
    stopped_at: str | None = None  # when it is (or will be) TERMINATED
    earlier_runs: list[list[str]] = field(default_factory=list)  # [from, until] before a start

    def status(self, at: datetime) -> str:
        if self.stopped_at is None:
            return "RUNNING"
        return "STOPPING" if at < datetime.fromisoformat(self.stopped_at) else "TERMINATED"

    def bill_usd(self, at: datetime) -> Decimal:
        """Its rate for every second it ran until TERMINATED, by the cloud's own clock."""
        runs: list[Sequence[str | None]] = [*self.earlier_runs, [self.started_at, self.stopped_at]]
        return bill_runs(Decimal(self.hourly_rate_usd), runs, at)


@dataclass
class CloudOperation:
    zone: str
    name: str
    type: str  # "stop", "start" or "delete"
    instance: str
    request_id: str | None
    discard_local_ssd: str | None
    inserted_at: str
    error: str | None = None  # the code it ends DONE with, having done nothing


@dataclass
class CloudState:
    instances: dict[str, CloudInstance] = field(default_factory=dict)
    disks: dict[str, CloudDisk] = field(default_factory=dict)
    operations: dict[str, CloudOperation] = field(default_factory=dict)

    @classmethod
    def restore(cls, saved: dict[str, Any]) -> CloudState:
        return cls(
            instances={k: CloudInstance(**v) for k, v in saved.get("instances", {}).items()},
            disks={k: CloudDisk(**v) for k, v in saved.get("disks", {}).items()},
            operations={k: CloudOperation(**v) for k, v in saved.get("operations", {}).items()},
        )


class FakeGcp(FakeCloud):
    """One project: its VMs, their disks, the operations on them and the metadata server."""

    provider = "gcp"

    def __init__(
        self,
        state_file: Path,
        api_key: str = DEFAULT_TOKEN,
        *,
        project: str = DEFAULT_PROJECT,
        stop_delay_s: float = 0.0,
    ) -> None:
        super().__init__(state_file, api_key)
        self.project = project
        self.stop_delay_s = stop_delay_s
        self.token_expires_in_s = 3599  # what the metadata server says of each token
        self.page_size = 500  # the most items an aggregated list answers per page
        self.sa_token_expires_in_s = 3600  # what the token endpoint says of each token
        self.service_accounts: dict[str, str] = {}  # client_email -> public key (PEM)
        self.issued: dict[str, datetime] = {}  # token endpoint's tokens -> when they expire
        self.export: BillingExport | None = None  # BigQuery's billing export, once enabled
        self.failing_operations: list[str] = []  # error codes the next operations end with
        self.state = CloudState.restore(self.saved)

    def export_billing(self, table: str, factor: str = "1", lag_s: float = 0.0) -> BillingExport:
        """Keeps the project's Cloud Billing export in BigQuery, as table `table`, billing
        `factor` times the truth and `lag_s` late."""
        self.export = BillingExport(table, Decimal(factor), lag_s)
        return self.export

    def metered(self) -> list[Metered]:
        """What each VM and each of its persistent disks bill, and while what runs."""
        found = []
        for instance in self.state.instances.values():
            stopped = instance.stopped_at
            spans: list[tuple[datetime, datetime | None]] = [
                (_instant(a), _instant(b)) for a, b in instance.earlier_runs
            ]
            spans.append(
                (_instant(instance.started_at), None if stopped is None else _instant(stopped))
            )
            rate = Decimal(instance.hourly_rate_usd)
            found.append(Metered(instance.zone, instance.name, rate, spans))
            for key in instance.disks:
                disk = self.state.disks[key]
                owned = [(spans[0][0], None)]  # from the VM's creation on, running or not
                found.append(
                    Metered(disk.zone, disk.name, disk_rate(disk.type, disk.size_gb), owned)
                )
        return found

    def fail_next_operations(self, *codes: str) -> None:
        """The next stops or starts are accepted and then fail, one with each code."""
        with self.lock:
            self.failing_operations += codes

    def add_service_account(self, email: str, public_key_pem: str) -> None:
        """A service account whose key (the private half of `public_key_pem`) signs JWTs
        the token endpoint accepts."""
        self.service_accounts[email] = public_key_pem

    def add_pod(
        self,
        ref: str,
        hourly_rate_usd: str,
        *,
        machine_type: str = DEFAULT_MACHINE_TYPE,
        spot: bool = False,
        disks: Sequence[tuple[str, int]] = (("pd-balanced", 100),),
        accelerators: Mapping[str, int] | None = None,
        local_ssds: int = 0,
        labels: Mapping[str, str] | None = None,
    ) -> None:
        """A running VM "zone/name" with persistent `disks` (type, GB), the first one its
        boot disk, `local_ssds` 375 GB local SSDs and `labels`."""
        zone, _, name = ref.partition("/")
        with self.lock:
            if ref not in self.state.instances:
                names = [name] + [f"{name}-data-{i}" for i in range(1, len(disks))]
                for disk_name, (kind, gb) in zip(names, disks, strict=True):
                    self.state.disks[f"{zone}/{disk_name}"] = CloudDisk(zone, disk_name, kind, gb)
                self.state.instances[ref] = CloudInstance(
                    zone,
                    name,
                    machine_type,
                    hourly_rate_usd,
                    started_at=self.clock().isoformat(),
                    disks=[f"{zone}/{n}" for n in names],
                    spot=spot,
                    accelerators=dict(accelerators or {}),
                    local_ssds=local_ssds,
                    labels=dict(labels or {}),
                )
            self.save()

    def authorized(self, request: FakeRequest) -> bool:
        if request.path in (TOKEN_PATH, SA_TOKEN_PATH) or request.bearer() == self.api_key:
            return True
        expires = self.issued.get(request.bearer())
        return expires is not None and self.clock() < expires

    def error(self, status: int, message: str) -> Reply:
        return _google_error(status, REASONS.get(status, "backendError"), message)

    def canned(self, kind: str, arg: str) -> Reply | None:
        if kind == "reason":
            status, _, reason = arg.partition(":")
            return _google_error(int(status), reason, f"canned {reason}")
        if kind == "operation-error":
            body = {"kind": "compute#operation", "name": f"operation-{uuid4().hex[:12]}"}
            errors = [{"code": arg, "message": f"canned {arg}"}]
            return Reply(200, {**body, "status": "DONE", "error": {"errors": errors}})
        if kind == "no-capacity":
            zone = f"projects/{self.project}/zones/{arg or DEFAULT_ZONE}"
            message = (
                f"The zone '{zone}' does not have enough resources available to fulfill the "
                "request.  Try a different zone, or try again later."
            )
            errors = [{"code": "ZONE_RESOURCE_POOL_EXHAUSTED", "message": message}]
            body = {"kind": "compute#operation", "name": f"operation-{uuid4().hex[:12]}"}
            return Reply(200, {**body, "status": "DONE", "error": {"errors": errors}})
        return None

    def snapshot(self) -> dict[str, Any]:
        return asdict(self.state)

    def handle(self, request: FakeRequest) -> Reply:
        if request.path == TOKEN_PATH:
            return self._token(request)
        if request.path == SA_TOKEN_PATH and request.method == "POST":
            return self._mint(request)
        if (query := _BIGQUERY_PATH.fullmatch(request.path)) and self.export is not None:
            return self._bigquery(request, self.export, query["project"], query["job"])
        if request.method == "GET" and (listing := _AGGREGATED_PATH.fullmatch(request.path)):
            if listing["project"] != self.project:
                return self._missing_project(listing["project"])
            return self._aggregated(request, listing["collection"])
        match = _COMPUTE_PATH.fullmatch(request.path)
        if match is None:
            return self.error(404, f"The requested URL {request.path} was not found")
        if match["project"] != self.project:
            return self._missing_project(match["project"])
        zone, name, collection = match["zone"], match["name"], match["collection"]
        key = f"{zone}/{name}"
        route = (request.method, collection, match["verb"])
        if route == ("GET", "instances", None):
            found = self.state.instances.get(key)
            return Reply(200, self._instance(found)) if found else self._missing(key, collection)
        if route in (
            ("POST", "instances", "stop"),
            ("POST", "instances", "start"),
            ("DELETE", "instances", None),
        ):
            return self._act(request, key, match["verb"] or "delete")
        if route == ("GET", "disks", None):
            disk = self.state.disks.get(key)
            return Reply(200, self._disk(disk)) if disk else self._missing(key, collection)
        if route == ("GET", "operations", None):
            operation = self.state.operations.get(key)
            if operation is None:
                return self._missing(key, collection)
            return Reply(200, self._operation(operation))
        return self.error(400, f"{request.method} {request.path} is not supported by the fake")

    def _bigquery(
        self, request: FakeRequest, export: BillingExport, project: str, job: str | None
    ) -> Reply:
        if project != self.project:
            return self._missing_project(project)
        if request.method == "POST" and job is None:
            rows = partial(export.rows, self.project, self.metered(), self.clock())
            return Reply(*export.query(request.body, rows))
        if request.method == "GET" and job is not None:
            return Reply(*export.results(job, request.param("pageToken")))
        return self.error(400, f"{request.method} {request.path} is not supported by the fake")

    def _token(self, request: FakeRequest) -> Reply:
        if request.headers.get("metadata-flavor") != "Google":
            page = "Missing Metadata-Flavor:Google header."
            return Reply(403, text=page, content_type="text/html")
        token = {"access_token": self.api_key, "expires_in": self.token_expires_in_s}
        return Reply(200, {**token, "token_type": "Bearer"})

    def _mint(self, request: FakeRequest) -> Reply:
        """An access token for a service account's signed JWT (Google's JWT bearer grant)."""
        form = parse_qs(request.body) if isinstance(request.body, str) else {}
        if form.get("grant_type") != [JWT_BEARER]:
            return _oauth_error("unsupported_grant_type", "Invalid grant_type.")
        claims = self._verified(form.get("assertion", [""])[0])
        if claims is None:
            return _oauth_error("invalid_grant", "Invalid JWT Signature.")
        if not (claims.get("aud", "").endswith(SA_TOKEN_PATH) and claims.get("scope")):
            return _oauth_error("invalid_scope", "Invalid audience or no scope.")
        if float(claims.get("exp", 0)) <= self.clock().timestamp():
            return _oauth_error("invalid_grant", "Invalid JWT: Token must be a short-lived token")
        token = f"ya29.fake-sa-{uuid4().hex}"
        self.issued[token] = self.clock() + timedelta(seconds=self.sa_token_expires_in_s)
        body = {"access_token": token, "expires_in": self.sa_token_expires_in_s}
        return Reply(200, {**body, "token_type": "Bearer"})

    def _verified(self, assertion: str) -> dict[str, Any] | None:
        """The JWT's claims if a known service account's key signed it; None otherwise."""
        from cryptography.exceptions import InvalidSignature  # google-auth brings it
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import padding, rsa

        try:
            header, payload, signature = assertion.split(".")
            claims = json.loads(_unbase64(payload))
            pem = self.service_accounts[str(claims.get("iss"))]
            key = serialization.load_pem_public_key(pem.encode())
            assert isinstance(key, rsa.RSAPublicKey)
            signed = f"{header}.{payload}".encode()
            key.verify(_unbase64(signature), signed, padding.PKCS1v15(), hashes.SHA256())
        except (ValueError, KeyError, InvalidSignature):
            return None
        return claims if isinstance(claims, dict) else None

    def _act(self, request: FakeRequest, key: str, kind: str) -> Reply:
        """instances.stop (the VM goes STOPPING, then TERMINATED), instances.start (a
        TERMINATED VM is RUNNING again) or instances.delete."""
        instance = self.state.instances.get(key)
        if instance is None:
            return self._missing(key, "instances")
        request_id, discard = request.param("requestId"), request.param("discardLocalSsd")
        for operation in self.state.operations.values():
            if request_id and operation.request_id == request_id:  # a retry: the same answer
                return Reply(200, self._operation(operation))
        if kind == "stop" and instance.local_ssds and discard not in ("true", "false"):
            message = "The instance has a local SSD attached: say whether to discard it"
            return self.error(400, f"Invalid value for field 'discardLocalSsd': {message}")
        status = instance.status(self.clock())
        if kind == "start" and status == "STOPPING":
            resource = f"projects/{self.project}/zones/{instance.zone}/instances/{instance.name}"
            return _google_error(400, "resourceNotReady", f"The resource '{resource}' is not ready")
        failing = None
        if kind != "delete" and self.failing_operations:
            failing = self.failing_operations.pop(0)  # accepted, and then it does nothing
        elif kind == "delete":
            del self.state.instances[key]
            for disk in instance.disks:
                self.state.disks.pop(disk, None)
        elif kind == "stop" and instance.stopped_at is None:
            instance.stopped_at = (self.clock() + timedelta(seconds=self.stop_delay_s)).isoformat()
        elif kind == "start" and status == "TERMINATED":
            instance.earlier_runs.append([instance.started_at, str(instance.stopped_at)])
            instance.started_at, instance.stopped_at = self.clock().isoformat(), None
        name = f"operation-{uuid4().hex[:16]}"
        operation = CloudOperation(
            instance.zone, name, kind, key, request_id, discard, self.clock().isoformat(), failing
        )
        self.state.operations[f"{instance.zone}/{name}"] = operation
        return Reply(200, self._operation(operation, accepted=True))

    def _aggregated(self, request: FakeRequest, collection: str) -> Reply:
        """One page of `collection` across the project's zones; the page token is the offset
        of the page's first item."""
        if collection == "instances":
            every = [(i.zone, self._instance(i)) for i in self.state.instances.values()]
        else:
            every = [(d.zone, self._disk(d)) for d in self.state.disks.values()]
        size = min(self.page_size, int(request.param("maxResults") or self.page_size))
        start = int(request.param("pageToken") or 0)
        on_page: dict[str, list[dict[str, Any]]] = {}
        for zone, body in every[start : start + size]:
            on_page.setdefault(f"zones/{zone}", []).append(body)
        zones = {i.zone for i in self.state.instances.values()}
        zones.update(d.zone for d in self.state.disks.values())
        items = {
            scope: {collection: on_page[scope]} if scope in on_page else _no_results(scope)
            for scope in sorted(f"zones/{zone}" for zone in zones)
        }
        more = {"nextPageToken": str(start + size)} if start + size < len(every) else {}
        return Reply(
            200,
            {
                "kind": f"compute#{collection[:-1]}AggregatedList",
                "id": f"projects/{self.project}/aggregated/{collection}",
                "items": items,
                **more,
                "selfLink": f"{API}/projects/{self.project}/aggregated/{collection}",
            },
        )

    def _missing_project(self, project: str) -> Reply:
        return self.error(404, f"The resource 'projects/{project}' was not found")

    def _missing(self, key: str, collection: str) -> Reply:
        zone, _, name = key.partition("/")
        resource = f"projects/{self.project}/zones/{zone}/{collection}/{name}"
        return self.error(404, f"The resource '{resource}' was not found")

    def _zone_url(self, zone: str) -> str:
        return f"{API}/projects/{self.project}/zones/{zone}"

    def _instance(self, instance: CloudInstance) -> dict[str, Any]:
        zone_url = self._zone_url(instance.zone)
        status = instance.status(self.clock())
        disks = [
            {
                "type": "PERSISTENT",
                "mode": "READ_WRITE",
                "source": f"{zone_url}/disks/{self.state.disks[key].name}",
                "deviceName": self.state.disks[key].name,
                "boot": index == 0,
                "autoDelete": index == 0,
                "diskSizeGb": str(self.state.disks[key].size_gb),
            }
            for index, key in enumerate(instance.disks)
        ]
        disks += [
            {"type": "SCRATCH", "interface": "NVME", "autoDelete": True, "diskSizeGb": "375"}
            for _ in range(instance.local_ssds)
        ]
        accelerators = [
            {"acceleratorType": f"{zone_url}/acceleratorTypes/{kind}", "acceleratorCount": count}
            for kind, count in instance.accelerators.items()
        ]
        return {
            "kind": "compute#instance",
            "name": instance.name,
            "zone": zone_url,
            "machineType": f"{zone_url}/machineTypes/{instance.machine_type}",
            "status": status,
            "scheduling": {
                "provisioningModel": "SPOT" if instance.spot else "STANDARD",
                "preemptible": instance.spot,
                "automaticRestart": not instance.spot,
            },
            "disks": disks,
            "guestAccelerators": accelerators,
            **({"labels": dict(instance.labels)} if instance.labels else {}),
            "lastStartTimestamp": instance.started_at,
            **({"lastStopTimestamp": instance.stopped_at} if status == "TERMINATED" else {}),
            "selfLink": f"{zone_url}/instances/{instance.name}",
        }

    def _disk(self, disk: CloudDisk) -> dict[str, Any]:
        zone_url = self._zone_url(disk.zone)
        return {
            "kind": "compute#disk",
            "name": disk.name,
            "zone": zone_url,
            "sizeGb": str(disk.size_gb),
            "type": f"{zone_url}/diskTypes/{disk.type}",
            "status": "READY",
            "selfLink": f"{zone_url}/disks/{disk.name}",
        }

    def _operation(self, operation: CloudOperation, accepted: bool = False) -> dict[str, Any]:
        """DONE once the VM is where the operation takes it (RUNNING for a start, TERMINATED
        for a stop, gone for a delete); RUNNING until then. One that fails is PENDING as it
        is `accepted`, then DONE with its error."""
        instance = self.state.instances.get(operation.instance)
        reached = "RUNNING" if operation.type == "start" else "TERMINATED"
        if operation.error is not None:
            done = not accepted
        else:
            done = instance is None or instance.status(self.clock()) == reached
        zone_url = self._zone_url(operation.zone)
        failed = (
            {
                "error": {
                    "errors": [{"code": operation.error, "message": f"canned {operation.error}"}]
                }
            }
            if operation.error is not None and done
            else {}
        )
        return {
            "kind": "compute#operation",
            "name": operation.name,
            "zone": zone_url,
            "operationType": operation.type,
            "targetLink": f"{zone_url}/instances/{operation.instance.partition('/')[2]}",
            "status": "DONE" if done else ("PENDING" if operation.error else "RUNNING"),
            "progress": 100 if done else 0,
            "insertTime": operation.inserted_at,
            **failed,
            "selfLink": f"{zone_url}/operations/{operation.name}",
        }


def _instant(text: str) -> datetime:
    return datetime.fromisoformat(text)


def _no_results(scope: str) -> dict[str, Any]:
    """What an aggregated list says of a zone with nothing on the page."""
    message = f"There are no results for scope '{scope}' on this page."
    data = [{"key": "scope", "value": scope}]
    return {"warning": {"code": "NO_RESULTS_ON_PAGE", "message": message, "data": data}}


def _unbase64(part: str) -> bytes:
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))


def _oauth_error(error: str, description: str) -> Reply:
    """Google's OAuth2 token endpoint's refusal."""
    return Reply(400, {"error": error, "error_description": description})


def _google_error(status: int, reason: str, message: str) -> Reply:
    if status == 401:
        message = UNAUTHENTICATED
    domain = "usageLimits" if "ratelimit" in reason.lower() else "global"
    detail = {"domain": domain, "reason": reason, "message": message}
    return Reply(status, {"error": {"code": status, "message": message, "errors": [detail]}})


def main(argv: list[str] | None = None) -> None:
    http_cloud.main(FakeGcp, DEFAULT_TOKEN, argv, path="/compute/v1")


if __name__ == "__main__":
    main()
