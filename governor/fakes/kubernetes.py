"""A fake Kubernetes API server holding the workloads the Kubernetes adapter governs, over
real HTTP.

The workloads of each kind in its table (`governor.fakes.kubernetes_kinds`: Jobs,
Deployments, StatefulSets, JobSets, RayJobs, PyTorchJobs) in namespaces, read with GET and
changed with PATCH as JSON merge patches (RFC 7386, `application/merge-patch+json`) on the
object or on its `scale` subresource (Deployments, StatefulSets); a
`metadata.resourceVersion` in a patch is a precondition (409 Conflict when stale). A custom
resource's spec keeps only the fields its CustomResourceDefinition names: any other in a
patch is pruned, as its API server does, silently. Each kind is also listed across all
namespaces (GET /apis/<group>/<version>/<resource>), unless it is `forbidden` to the token:
then the answer is the 403 that RBAC gives. Errors are `Status` objects with the API server's
reasons, and a bearer token is required, unless it is served over TLS (`serve_tls`) and
the client presents a certificate its CA verifies. DELETE is honoured (the workload and its pods go)
and recorded, so a test can prove it never came.

Pods: a workload that wants pods (one neither suspended nor finished, replicas above zero)
has them at once, again after a stop when it is unsuspended or scaled back up; one that no
longer does loses them `stop_delay_s` later (0 by default), as graceful termination would.
Like the real API server it accepts a resume whatever room the nodes have (pods without a
node wait, Pending), so it has no answer refusing one for capacity. Kubernetes bills nothing
itself: the fake bills the rate given at `add_pod` for every second any pod runs, as the
node under them would. Besides the canned
answers every fake cloud has, "throttled:<s>" answers 429 with `details.retryAfterSeconds`
and no Retry-After header.

    python -m governor.fakes.kubernetes --port 8766 --state cloud.json \\
        --pods 'ml/job/train-llama=3.5' [--api-key TOKEN]
"""

from __future__ import annotations

import re
import ssl
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

from governor.fakes import http_cloud
from governor.fakes.http_cloud import (
    FakeCloud,
    FakeRequest,
    FakeServer,
    Reply,
    _Handler,
    bill_runs,
)
from governor.fakes.kubernetes_kinds import KINDS, FakeKind, Seen, manifest

DEFAULT_TOKEN = "fake-kubernetes-token"
_PATH = re.compile(
    r"/apis/(?P<group>[a-z0-9.-]+)/(?P<version>v[a-z0-9]+)/namespaces/(?P<namespace>[^/]+)"
    r"/(?P<resource>[a-z]+)/(?P<name>[^/]+)(?P<scale>/scale)?"
)
_LIST = re.compile(r"/apis/(?P<group>[a-z0-9.-]+)/(?P<version>v[a-z0-9]+)/(?P<resource>[a-z]+)")
USER = "system:serviceaccount:governor:gpu-governor"  # who the token is
# Who a verified client certificate says the caller is (its common name); set by the TLS
# server only, never taken from a client.
CERT_USER = "x-fake-client-certificate-user"
KIND_FIELDS = ("apiVersion", "kind")
REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    409: "Conflict",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
}


@dataclass
class Workload:
    """One workload of a kind the server serves: its object as stored and the pods it runs."""

    kind: str
    manifest: dict[str, Any]  # apiVersion, kind, metadata and spec: everything but status
    hourly_rate_usd: str
    runs: list[list[str | None]] = field(default_factory=list)  # [from, until] with pods
    pods: int = 0  # how many pods the latest run has
    finished: str | None = None  # one that ran to its end: Complete or Failed

    @property
    def spec(self) -> dict[str, Any]:
        return self.manifest["spec"]

    @property
    def served(self) -> FakeKind:
        return KINDS[self.kind]

    def wanted(self) -> int:
        """How many pods the workload asks for now."""
        return self.served.wanted(self.spec, self.finished)

    def running(self, at: datetime) -> bool:
        if not self.runs:
            return False
        until = self.runs[-1][1]
        return until is None or datetime.fromisoformat(until) > at

    def settle(self, at: datetime, stop_delay_s: float) -> None:
        """Start pods for a workload that wants them; let them go from one that does not."""
        wanted = self.wanted()
        if wanted and self.running(at):
            self.runs[-1][1] = None  # pods on their way out are kept after all
        elif wanted:
            self.runs.append([at.isoformat(), None])
        elif self.runs and self.runs[-1][1] is None:
            self.runs[-1][1] = (at + timedelta(seconds=stop_delay_s)).isoformat()
        if wanted:
            self.pods = wanted

    def bill_usd(self, at: datetime) -> Decimal:
        """The rate for every second any pod ran, by the cloud's own clock."""
        return bill_runs(Decimal(self.hourly_rate_usd), self.runs, at)

    def obj(self, at: datetime) -> dict[str, Any]:
        return {**self.manifest, "status": self.status(at)}

    def status(self, at: datetime) -> dict[str, Any]:
        """The status its controller would write."""
        metadata = self.manifest["metadata"]
        changed = datetime.fromisoformat(metadata["creationTimestamp"].replace("Z", "+00:00"))
        for since, until in self.runs:
            ends = None if until is None else datetime.fromisoformat(until)
            changed = max(changed, datetime.fromisoformat(str(since)), min(ends or at, at))
        seen = Seen(
            self.spec,
            self.pods if self.running(at) else 0,
            self.finished,
            datetime.fromisoformat(str(self.runs[0][0])) if self.runs else None,
            changed,
            metadata["name"],
        )
        return self.served.status(seen)

    def scale(self, at: datetime) -> dict[str, Any]:
        metadata = self.manifest["metadata"]
        return {
            "kind": "Scale",
            "apiVersion": "autoscaling/v1",
            "metadata": {key: metadata[key] for key in ("name", "namespace", "uid")}
            | {"resourceVersion": metadata["resourceVersion"]},
            "spec": {"replicas": self.spec.get("replicas", 1)},
            "status": {"replicas": self.status(at).get("replicas", 0)},
        }


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge key by key, null removes a key, anything else replaces."""
    if not isinstance(patch, dict):
        return patch
    merged = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = merge_patch(merged.get(key), value)
    return merged


class FakeKubernetes(FakeCloud):
    """The API server: its workloads and the requests it answers."""

    provider = "kubernetes"

    def __init__(
        self, state_file: Path, api_key: str = DEFAULT_TOKEN, *, stop_delay_s: float = 0.0
    ) -> None:
        super().__init__(state_file, api_key)
        self.stop_delay_s = stop_delay_s
        saved = self.saved.get("workloads", {})
        self.workloads = {ref: Workload(**workload) for ref, workload in saved.items()}
        self.deletions: list[dict[str, str]] = self.saved.get("deletions", [])
        self.version = int(self.saved.get("version", 0))  # the last resourceVersion given
        self.forbidden: set[str] = set()  # resources the token may not list (jobs, ...)

    def add_pod(
        self,
        ref: str,
        hourly_rate_usd: str,
        spec: dict[str, Any] | None = None,
        labels: dict[str, str] | None = None,
    ) -> None:
        """A running workload for `ref` ("namespace/kind/name"); `spec` is merged into the
        default one (the volumes a test needs, replicas, a retention policy); `labels` are
        its own (metadata.labels)."""
        namespace, kind, name = ref.split("/")
        with self.lock:
            if ref not in self.workloads:
                self.version += 1
                obj = manifest(namespace, kind, name, self.version, self.clock())
                obj["spec"] = merge_patch(obj["spec"], spec or {})
                if labels:
                    obj["metadata"]["labels"] = dict(labels)
                self.workloads[ref] = Workload(kind, obj, hourly_rate_usd)
                self.workloads[ref].settle(self.clock(), self.stop_delay_s)
            self.save()

    def finish(self, ref: str, condition: str = "Complete") -> None:
        """A workload runs to its end (Complete or Failed): its pods exit and it makes no
        more (but a RayJob's cluster, unless it shuts down when its job finishes)."""
        with self.lock:
            workload = self.workloads[ref]
            workload.finished = condition
            workload.settle(self.clock(), 0.0)
            self.save()

    def snapshot(self) -> dict[str, Any]:
        return {
            "workloads": {ref: asdict(workload) for ref, workload in self.workloads.items()},
            "deletions": self.deletions,
            "version": self.version,
        }

    def authorized(self, request: FakeRequest) -> bool:
        """A verified client certificate, or the token as a bearer token, its scheme in any
        case as the API server takes it (the official client sends "bearer")."""
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        bearer = scheme.lower() == "bearer" and token.strip() == self.api_key
        return CERT_USER in request.headers or bearer

    def error(self, status: int, message: str, details: dict[str, Any] | None = None) -> Reply:
        body = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": message,
            "reason": REASONS.get(status, "Unknown"),
            "details": details or {},
            "code": status,
        }
        return Reply(status, body)

    def rate_limited(self, retry_after: str) -> Reply:
        headers = {"Retry-After": retry_after} if retry_after else {}
        details = {"retryAfterSeconds": int(retry_after)} if retry_after else {}
        reply = self.error(429, "Too many requests, please try again later.", details)
        return Reply(429, reply.body, headers)

    def canned(self, kind: str, arg: str) -> Reply | None:
        if kind != "throttled":
            return None
        details = {"retryAfterSeconds": int(arg)}
        return self.error(429, "Too many requests, please try again later.", details)

    def handle(self, request: FakeRequest) -> Reply:
        listing = _kind(_LIST.fullmatch(request.path))
        if listing is not None and request.method == "GET":
            return self._list(listing, self.clock())
        route = _PATH.fullmatch(request.path)
        kind = _kind(route)
        if route is None or kind is None:
            return self.error(404, "the server could not find the requested resource")
        served = KINDS[kind]
        group, resource = served.group, served.resource
        name, scale = route["name"], route["scale"] is not None
        workload = self.workloads.get(f"{route['namespace']}/{kind}/{name}")
        if scale and not served.scale:
            return self.error(404, "the server could not find the requested resource")
        if workload is None:
            details = {"name": name, "group": group, "kind": resource}
            return self.error(404, f'{resource}.{group} "{name}" not found', details)
        at = self.clock()
        if request.method == "GET":
            return Reply(200, workload.scale(at) if scale else workload.obj(at))
        if request.method == "PATCH":
            return self._patch(workload, request, scale, at)
        if request.method == "DELETE" and not scale:
            return self._delete(route["namespace"], kind, workload, at)
        return self.error(405, f"{request.method} is not supported on {request.path}")

    def _list(self, kind: str, at: datetime) -> Reply:
        """Every workload of `kind` in every namespace; like the API server's, the items
        carry no apiVersion or kind, the list does."""
        served = KINDS[kind]
        group, resource = served.group, served.resource
        if resource in self.forbidden:
            return self.error(
                403,
                f'{resource}.{group} is forbidden: User "{USER}" cannot list resource '
                f'"{resource}" in API group "{group}" at the cluster scope',
                {"group": group, "kind": resource},
            )
        items = [
            {key: value for key, value in workload.obj(at).items() if key not in KIND_FIELDS}
            for _, workload in sorted(self.workloads.items())
            if workload.kind == kind
        ]
        return Reply(
            200,
            {
                "kind": f"{served.object_kind}List",
                "apiVersion": served.api_version,
                "metadata": {"resourceVersion": str(self.version)},
                "items": items,
            },
        )

    def refused_patch(
        self, group: str, resource: str, metadata: dict[str, Any], request: FakeRequest
    ) -> Reply | None:
        """Why a merge patch of the object with this `metadata` is refused before it is
        applied (its media type, its body, a stale resourceVersion); None when it may be."""
        content_type = request.headers.get("content-type", "")
        if not content_type.startswith("application/merge-patch+json"):
            return self.error(
                415,
                f"the body of the request was in an unknown format ({content_type!r}): "
                "this server accepts application/merge-patch+json",
            )
        patch = request.body
        if not isinstance(patch, dict):
            return self.error(400, "the patch is not a JSON object")
        asked = patch.get("metadata")
        expected = asked.get("resourceVersion") if isinstance(asked, dict) else None
        if expected is not None and expected != metadata["resourceVersion"]:
            return self.error(
                409,
                f'Operation cannot be fulfilled on {resource}.{group} "{metadata["name"]}": the '
                "object has been modified; please apply your changes to the latest version and "
                "try again",
                {"name": metadata["name"], "group": group, "kind": resource},
            )
        return None

    def _patch(self, workload: Workload, request: FakeRequest, scale: bool, at: datetime) -> Reply:
        metadata = workload.manifest["metadata"]
        served = workload.served
        refused = self.refused_patch(served.group, served.resource, metadata, request)
        if refused is not None:
            return refused
        patch = request.body
        if scale:
            changes = {"spec": {"replicas": (patch.get("spec") or {}).get("replicas")}}
        else:
            changes = {key: patch[key] for key in ("metadata", "spec") if key in patch}
        spec = changes.get("spec")
        if served.fields is not None and isinstance(spec, dict):  # pruned, as its schema does
            changes["spec"] = {key: value for key, value in spec.items() if key in served.fields}
        changed = merge_patch(workload.manifest, changes)
        invalid = served.invalid(changed["spec"])
        if invalid:
            return self.error(422, invalid)
        identity = ("name", "namespace", "uid", "creationTimestamp", "generation")
        changed["metadata"] |= {key: metadata[key] for key in identity}
        if changed["spec"] != workload.manifest["spec"]:
            changed["metadata"]["generation"] = metadata["generation"] + 1
        self.version += 1
        changed["metadata"]["resourceVersion"] = str(self.version)
        workload.manifest = changed
        workload.settle(at, self.stop_delay_s)
        return Reply(200, workload.scale(at) if scale else workload.obj(at))

    def _delete(self, namespace: str, kind: str, workload: Workload, at: datetime) -> Reply:
        """Honoured, as a cluster would: the workload and its pods go, with any volume that
        dies with them. Recorded, so a test can prove it never came."""
        name = workload.manifest["metadata"]["name"]
        ref = f"{namespace}/{kind}/{name}"
        self.deletions.append({"ref": ref, "at": at.isoformat()})
        if workload.running(at):
            workload.runs[-1][1] = at.isoformat()
        del self.workloads[ref]
        details = {"name": name, "group": workload.served.group, "kind": workload.served.resource}
        return Reply(
            200, {"kind": "Status", "apiVersion": "v1", "status": "Success", "details": details}
        )


class _TlsHandler(_Handler):
    """Requests over TLS: a client certificate that verified authenticates its common name,
    as the API server's x509 client authentication does."""

    def parse_request(self) -> bool:
        if not super().parse_request():
            return False
        del self.headers[CERT_USER]
        assert isinstance(self.connection, ssl.SSLSocket)
        certificate = self.connection.getpeercert() or {}
        # The stubs type every value of the certificate's dict alike (text, or RDNs nested one
        # level or two); its "subject" is always the RDNs, each a tuple of (name, value) pairs.
        subject = dict(pair for rdn in certificate.get("subject", ()) for pair in rdn)  # type: ignore[misc]
        if "commonName" in subject:
            self.headers[CERT_USER] = subject["commonName"]
        return True


def serve_tls(cloud: FakeKubernetes, context: ssl.SSLContext) -> FakeServer:
    """`cloud` over HTTPS on any free port: `context` holds the server's certificate and,
    for clients that authenticate with one, the CA theirs must chain to (CERT_OPTIONAL)."""
    server = http_cloud.serve(cloud)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    server.RequestHandlerClass = _TlsHandler
    return server


def _kind(route: re.Match[str] | None) -> str | None:
    """The workload kind a request path is about, if it is one this server serves."""
    if route is None:
        return None
    for kind, served in KINDS.items():
        if (route["group"], route["version"], route["resource"]) == (
            served.group,
            served.version,
            served.resource,
        ):
            return kind
    return None


def main(argv: list[str] | None = None) -> None:
    http_cloud.main(FakeKubernetes, DEFAULT_TOKEN, argv)


if __name__ == "__main__":
    main()
