"""Kubernetes over its API server: a Job, Deployment, StatefulSet, JobSet, RayJob or
PyTorchJob is the pod the governor stops, keeping its PersistentVolumeClaims, and resumes on
them.

A Job is suspended (`spec.suspend: true`: its controller deletes the pods and makes none
until it is resumed, `spec.suspend: false`), and so are a JobSet (`spec.suspend`: its
controller suspends its child Jobs), a RayJob (`spec.suspend`: KubeRay deletes its RayCluster
and submitter, and makes them afresh on resume) and a PyTorchJob (`spec.runPolicy.suspend`:
the training operator deletes its pods). A Deployment or StatefulSet is scaled to zero
through its `scale` subresource, after its replica count is recorded in an annotation; a
resume scales it back to that count, and refuses one the governor did not stop. Only GET
(of one workload, or of each kind across the namespaces the token may list) and JSON
merge-patch PATCH are sent; nothing is ever deleted. Volumes that die with their pods
(generic ephemeral volumes, claims a StatefulSet deletes when scaled down) make the adapter
refuse to stop rather than lose them, and so does a RayJob KubeRay would not suspend (one
without `shutdownAfterJobFinishes`, or on a shared cluster). The API server accepts a
resume even where no node has room for the pods: they wait, Pending, for one.

Kubernetes has no prices: the rate is declared at registration, and stopping saves money
only where the node goes with the pods (a cluster autoscaler, per-pod billing).

Credentials: a bearer token here (`BearerToken`, set or read from a file), or a kubeconfig or
the in-cluster service account read by the official client's loader (`kube_auth`, the
`kubernetes` extra). A call refused with 401 is sent once more after the credentials are
read afresh, where reading them again may give new ones (an exec plugin's token revoked
early).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import httpx

from governor.adapters.providers._http import ProviderHttp
from governor.domain.kube_workloads import GPU_RESOURCE
from governor.domain.model import PodState
from governor.domain.ports import (
    CallOutcome,
    CallResult,
    Listed,
    PodDescription,
    ProviderError,
)

# Where a pod's service account token is mounted: its presence means running in a cluster.
TOKEN_FILE = "/var/run/secrets/kubernetes.io/serviceaccount/token"
# Pods get terminationGracePeriodSeconds (30 s by default) to exit, after the controller acts.
STOP_LATENCY_S = 60.0
REPLICAS_ANNOTATION = "gpu-governor/replicas-before-stop"
MERGE_PATCH = {"Content-Type": "application/merge-patch+json"}


@dataclass(frozen=True)
class Kind:
    """A kind of workload in a ref: its API group/version, resource and object kind, and
    the path of the field that suspends it (None: it is scaled to zero instead); `custom`:
    defined by a CustomResourceDefinition, which a cluster may not have installed."""

    version: str
    resource: str
    object_kind: str
    suspend: tuple[str, ...] | None = None
    custom: bool = False


API = {  # the kind in a ref
    "job": Kind("batch/v1", "jobs", "Job", ("spec", "suspend")),
    "deployment": Kind("apps/v1", "deployments", "Deployment"),
    "statefulset": Kind("apps/v1", "statefulsets", "StatefulSet"),
    "jobset": Kind(
        "jobset.x-k8s.io/v1alpha2", "jobsets", "JobSet", ("spec", "suspend"), custom=True
    ),
    "rayjob": Kind("ray.io/v1", "rayjobs", "RayJob", ("spec", "suspend"), custom=True),
    "pytorchjob": Kind(
        "kubeflow.org/v1",
        "pytorchjobs",
        "PyTorchJob",
        ("spec", "runPolicy", "suspend"),
        custom=True,
    ),
}
REF_FORM = (
    "<namespace>/<kind>/<name> with kind job, deployment, statefulset, jobset, rayjob or "
    "pytorchjob (e.g. ml/job/train-llama)"
)
# The conditions of a Job that make no pod again, when their status is "True" (JobCondition:
# "Type of job condition, Complete or Failed"; status "one of True, False, Unknown").
FINISHED = ("Complete", "Failed")
# The same for each kind that says so in conditions: a JobSet's JobSetConditionType
# (Completed, Failed), a PyTorchJob's JobConditionType (Succeeded, Failed).
FINISHING = {
    "job": FINISHED,
    "jobset": ("Completed", "Failed"),
    "pytorchjob": ("Succeeded", "Failed"),
}
# A RayJob's status.jobDeploymentStatus, every value KubeRay defines ("" is New): the two it
# ends in, and those from which a suspended RayJob is on its way to Suspended (KubeRay moves
# only Initializing and Running to Suspending; New and Retrying pass through Initializing).
RAY_STATUSES = (
    "",
    "Initializing",
    "Running",
    "Complete",
    "Failed",
    "ValidationFailed",
    "Suspending",
    "Suspended",
    "Retrying",
    "Waiting",
)
RAY_FINISHED = ("Complete", "Failed")
RAY_SUSPENDING = ("", "Initializing", "Running", "Suspending", "Retrying")
_DNS_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?")  # what Kubernetes accepts in names


@dataclass(frozen=True)
class Workload:
    """What a ref names: one workload of a kind in `API` in a namespace."""

    namespace: str
    kind: str
    name: str

    @classmethod
    def parse(cls, ref: str) -> Workload:
        parts = ref.split("/")
        if (
            len(parts) == 3
            and parts[1] in API
            and len(parts[0]) <= 63
            and len(parts[2]) <= 253
            and all(_DNS_NAME.fullmatch(part) for part in (parts[0], parts[2]))
        ):
            return cls(*parts)
        raise ProviderError(f"kubernetes ref {ref!r} is not {REF_FORM}", retryable=False)

    @property
    def ref(self) -> str:
        return f"{self.namespace}/{self.kind}/{self.name}"

    @property
    def path(self) -> str:
        kind = API[self.kind]
        return f"/apis/{kind.version}/namespaces/{self.namespace}/{kind.resource}/{self.name}"

    def __str__(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"


class NoSuchWorkload(ProviderError):
    def __init__(self, workload: Workload) -> None:
        super().__init__(f"kubernetes has no such {workload}", retryable=False, status=404)


class StatusError(ProviderError):
    """A refusal the API server explained with a Status object: its `reason` (NotFound,
    Conflict, Forbidden, ...) and the name of the object it is about, when it says."""

    def __init__(self, error: ProviderError, reason: str, name: str | None) -> None:
        super().__init__(
            str(error),
            retryable=error.retryable,
            retry_after_s=error.retry_after_s,
            status=error.status,
        )
        self.reason = reason
        self.name = name


class KubernetesHttp(ProviderHttp):
    """ProviderHttp that reads the API server's Status bodies: their message in plain words,
    and the delay a 429 asks for in `details.retryAfterSeconds` when no Retry-After came."""

    def raise_for_status(self, response: httpx.Response) -> None:
        try:
            super().raise_for_status(response)
        except ProviderError as exc:
            raise self._explained(response, exc) from None

    def _explained(self, response: httpx.Response, exc: ProviderError) -> ProviderError:
        try:
            status = response.json()
        except ValueError:
            return exc
        if not isinstance(status, dict) or status.get("kind") != "Status":
            return exc
        details = status.get("details")
        details = details if isinstance(details, dict) else {}
        delay = exc.retry_after_s
        if delay is None and response.status_code == 429:
            asked = details.get("retryAfterSeconds")
            if isinstance(asked, int) and not isinstance(asked, bool) and asked > 0:
                delay = float(asked)
        reason = str(status.get("reason") or "")
        verb = "rate limited the request" if response.status_code == 429 else "answered"
        said = f"{verb}: HTTP {response.status_code} {reason}: {status.get('message', '')}"
        wait = "" if delay is None else f"; retry after {delay:g} s"
        error = self.error(
            f"{said[:400]}{wait}", exc.retryable, retry_after=delay, status=exc.status
        )
        name = details.get("name")
        return StatusError(error, reason, name if isinstance(name, str) else None)


class Credentials(Protocol):
    """Who the adapter is to one API server, and how it reaches it.

    `url` is the API server; `client()` the httpx client to call it on (trusting the
    cluster's CA, presenting any client certificate); `authorization()` the Authorization
    header valid now (None: a client certificate says who it is); `reload()` reads the
    credentials afresh after a 401, False where that cannot change them. `credential` says
    which credential it is, never the secret, for `governor providers check`.
    """

    @property
    def credential(self) -> str: ...

    @property
    def url(self) -> str: ...

    def client(self) -> httpx.Client: ...

    def authorization(self) -> str | None: ...

    def reload(self) -> bool: ...


class BearerToken:
    """A bearer token set in the settings, or a callable reading one (a token file, re-read
    at every call: Kubernetes rotates service-account tokens). `client` is built by the
    caller, trusting the cluster's CA (`verify=`)."""

    def __init__(
        self,
        client: httpx.Client,
        token: str | Callable[[], str],
        url: str,
        credential: str = "a bearer token",
    ) -> None:
        self.credential = credential
        self.url = url
        self._client = client
        self._token = token if callable(token) else lambda: token

    def client(self) -> httpx.Client:
        return self._client

    def authorization(self) -> str:
        return f"Bearer {self._token()}"

    def reload(self) -> bool:
        return False  # it is read at every call already


@dataclass(frozen=True)
class _Seen:
    """A workload as read: the object and the state it amounts to."""

    workload: Workload
    obj: dict[str, Any]
    state: PodState


class KubernetesProvider:
    """Implements StopsPreserving, Resumes and ListsPods against a cluster's API server.

    `credentials` must be allowed to get and patch jobs, deployments, statefulsets (and
    their scale subresources), jobsets, rayjobs and pytorchjobs in the namespaces it
    governs, and, for listing, to list them across the cluster.
    """

    def __init__(self, credentials: Credentials, *, stop_latency_s: float = STOP_LATENCY_S) -> None:
        self.stop_latency_s = stop_latency_s
        self.credential = credentials.credential  # which one, for `governor providers check`
        self._credentials = credentials
        self._url = credentials.url.rstrip("/")

    def describe(self, ref: str) -> PodDescription:
        return _description(self._read(Workload.parse(ref)))

    def pods(self) -> list[Listed]:
        """Every workload of each kind the token may list, stopped ones included.

        A kind the token may not list (403: RBAC grants kinds one by one; 404: the cluster
        has no such resource, its CustomResourceDefinition not installed) is left out so
        the others still show; if it may list none, the first refusal is raised."""
        listed: list[Listed] = []
        forbidden: list[StatusError] = []
        for kind, api in API.items():
            resource = api.resource
            try:
                answer = self._request("GET", f"/apis/{api.version}/{resource}")
            except StatusError as exc:
                if exc.status != 403 and not (exc.status == 404 and api.custom):
                    raise
                forbidden.append(exc)
                continue
            items = answer.get("items") if isinstance(answer, dict) else None
            if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
                raise _malformed(f"a {resource} list without items: {answer!r:.200}")
            for item in items:
                seen = _listed(kind, item)
                listed.append(_listing(seen))
        if len(forbidden) == len(API):
            raise forbidden[0]
        return listed

    def stop(self, ref: str) -> CallResult:
        try:
            workload = Workload.parse(ref)
        except ProviderError as exc:
            return CallResult.failed(exc)
        try:
            seen = self._read(workload)
            settled = _settled(seen)
            if settled is not None:
                return settled
            reason = _cannot_preserve(seen) or _cannot_suspend(seen)
            if reason is not None:
                return CallResult(
                    CallOutcome.PERMANENT, f"kubernetes: left running, because {reason}"
                )
            self._halt(seen)
        except NoSuchWorkload:
            return CallResult(CallOutcome.DONE, "already gone")
        except StatusError as exc:
            if exc.status == 409:
                return self._after_conflict(workload)
            return CallResult.failed(exc)
        except ProviderError as exc:
            return CallResult.failed(exc)
        how = "suspended" if API[workload.kind].suspend else "scaled to zero"
        return CallResult(CallOutcome.PENDING, f"{workload} {how}; its pods are exiting")

    def resume(self, ref: str) -> CallResult:
        try:
            seen = self._read(Workload.parse(ref))
            if seen.state is PodState.RUNNING:
                return CallResult(CallOutcome.DONE, "already running")
            return self._restart(seen)
        except ProviderError as exc:
            return CallResult.failed(exc)

    def _restart(self, seen: _Seen) -> CallResult:
        """Gives a stopped (or stopping) workload its pods back: one with a suspend field
        is unsuspended, a Deployment or StatefulSet scaled back to the replica count its stop
        recorded."""
        workload = seen.workload
        suspend = API[workload.kind].suspend
        if suspend is not None:
            if _finished(workload.kind, _section(seen.obj, "spec"), _section(seen.obj, "status")):
                return CallResult(
                    CallOutcome.PERMANENT, f"kubernetes: {workload} has finished; it runs no more"
                )
            self._patch(workload, workload.path, _at(suspend, False))
            return CallResult(CallOutcome.DONE, f"{workload} unsuspended")
        replicas = _replicas_before_stop(seen)
        if replicas is None:
            return CallResult(
                CallOutcome.PERMANENT,
                f"kubernetes: {workload} has no {REPLICAS_ANNOTATION} annotation: the governor "
                "did not stop it and does not know how many replicas to restore; scale it up "
                "by hand",
            )
        self._patch(workload, f"{workload.path}/scale", {"spec": {"replicas": replicas}})
        return CallResult(CallOutcome.DONE, f"{workload} scaled back to {replicas} replicas")

    def _halt(self, seen: _Seen) -> None:
        workload = seen.workload
        suspend = API[workload.kind].suspend
        if suspend is not None:
            self._patch(workload, workload.path, _at(suspend, True))
            return
        metadata = _section(seen.obj, "metadata")
        recorded: dict[str, Any] = {"annotations": {REPLICAS_ANNOTATION: str(_replicas(seen))}}
        version = metadata.get("resourceVersion")
        if isinstance(version, str):  # only if nobody changed it since it was read
            recorded["resourceVersion"] = version
        self._patch(workload, workload.path, {"metadata": recorded})
        self._patch(workload, f"{workload.path}/scale", {"spec": {"replicas": 0}})

    def _after_conflict(self, workload: Workload) -> CallResult:
        """The object changed under the patch (409): whoever changed it may have stopped it."""
        try:
            seen = self._read(workload)
        except NoSuchWorkload:
            return CallResult(CallOutcome.DONE, "already gone")
        except ProviderError as exc:
            return CallResult.failed(exc)
        return _settled(seen) or CallResult(
            CallOutcome.RETRYABLE, f"kubernetes: {workload} changed while being stopped (409)"
        )

    def _read(self, workload: Workload) -> _Seen:
        obj = self._call(workload, "GET", workload.path)
        object_kind = API[workload.kind].object_kind
        if not isinstance(obj, dict) or obj.get("kind") != object_kind:
            raise _malformed(f"not a {object_kind}: {obj!r:.200}")
        return _Seen(workload, obj, _state(workload, obj))

    def _patch(self, workload: Workload, path: str, body: dict[str, Any]) -> None:
        self._call(workload, "PATCH", path, json=body, headers=MERGE_PATCH)

    def _call(
        self,
        workload: Workload,
        method: str,
        path: str,
        *,
        json: Any = None,
        headers: dict[str, str] | None = None,
    ) -> Any:
        try:
            return self._request(method, path, json=json, headers=headers)
        except StatusError as exc:
            # Only a NotFound naming the object means it is gone: a wrong URL is also a 404.
            if exc.reason == "NotFound" and exc.name == workload.name:
                raise NoSuchWorkload(workload) from None
            raise

    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        """One call to this API server on these credentials, for another adapter of the same
        cluster (Kueue's objects): decoded JSON, or ProviderError (a StatusError where the
        server explained)."""
        return self._request(method, path, **kwargs)

    def _request(self, method: str, path: str, **kwargs: Any) -> Any:
        """One API call; refused with 401, it is sent once more on credentials read afresh
        (a refused call changed nothing), where reading them again may give new ones."""
        try:
            return self._http().request(method, self._url + path, **kwargs)
        except ProviderError as exc:
            if exc.status != 401 or not self._credentials.reload():
                raise
        return self._http().request(method, self._url + path, **kwargs)

    def _http(self) -> KubernetesHttp:
        """A client with the credentials valid now, whose secret is masked in its errors."""
        authorization = self._credentials.authorization()
        if authorization is None:
            return KubernetesHttp(self._credentials.client(), "kubernetes", "", {})
        _scheme, _, secret = authorization.partition(" ")
        headers = {"Authorization": authorization}
        return KubernetesHttp(self._credentials.client(), "kubernetes", secret, headers)


def _listed(kind: str, item: dict[str, Any]) -> _Seen:
    """One item of a list answer (items carry no `kind`: the list says it)."""
    metadata = _section(item, "metadata")
    namespace, name = metadata.get("namespace"), metadata.get("name")
    if not isinstance(namespace, str) or not isinstance(name, str):
        raise _malformed(f"metadata without a namespace and name: {metadata!r:.200}")
    workload = Workload(namespace, kind, name)
    return _Seen(workload, item, _state(workload, item))


def _description(seen: _Seen) -> PodDescription:
    """A RayJob's state is its jobDeploymentStatus as KubeRay spells it (known: one KubeRay
    defines); the other kinds have no single word for it."""
    word = None
    if seen.workload.kind == "rayjob":
        said = _section(seen.obj, "status").get("jobDeploymentStatus") or ""
        word = said if isinstance(said, str) else str(said)
    return PodDescription(
        seen.state,
        None,
        None,
        cannot_preserve=_cannot_preserve(seen),
        provider_state=word or None,
        state_known=word is None or word in RAY_STATUSES,
    )


def _settled(seen: _Seen) -> CallResult | None:
    """What a stop amounts to for a workload that is no longer running; None if it is."""
    if seen.state is PodState.STOPPED:
        return CallResult(CallOutcome.DONE, "already stopped")
    if seen.state is PodState.STOPPING:
        return CallResult(CallOutcome.PENDING, f"{seen.workload} is stopping; pods still exiting")
    return None


def _state(workload: Workload, obj: dict[str, Any]) -> PodState:
    """RUNNING while the workload wants pods; then STOPPING until the last one has exited."""
    spec, status = _section(obj, "spec"), _section(obj, "status")
    kind = workload.kind
    suspend = API[kind].suspend
    if kind == "rayjob":
        return _ray_state(spec, status)
    if suspend is None:
        wants_pods = _count(spec, "replicas", default=1) > 0
        pods = _count(status, "replicas") + _count(status, "terminatingReplicas")
    else:
        suspended = _section(obj, suspend[0])
        for key in suspend[1:-1]:
            suspended = _section(suspended, key)
        wants_pods = suspended.get(suspend[-1]) is not True and not _finished(kind, spec, status)
        pods = _pods(kind, status)
    if wants_pods:
        return PodState.RUNNING
    return PodState.STOPPING if pods else PodState.STOPPED


def _pods(kind: str, status: dict[str, Any]) -> int:
    """How many pods a suspendable workload's status says it has: a Job's active and
    terminating ones, a JobSet's child Jobs with a pod running or pending (each of its
    replicatedJobsStatus' `active`), a PyTorchJob's running pods (each of its
    replicaStatuses' `active`)."""
    if kind == "job":
        return _count(status, "active") + _count(status, "terminating")
    if kind == "jobset":
        replicated = status.get("replicatedJobsStatus")
        return sum(
            _count(each, "active")
            for each in (replicated if isinstance(replicated, list) else [])
            if isinstance(each, dict)
        )
    replicas = _section(status, "replicaStatuses")
    return sum(_count(each, "active") for each in replicas.values() if isinstance(each, dict))


def _ray_state(spec: dict[str, Any], status: dict[str, Any]) -> PodState:
    """A RayJob by its status.jobDeploymentStatus: Suspended has no pods; Suspending, or
    suspended on the way to it, is STOPPING; Complete or Failed is STOPPED only where KubeRay
    deletes the cluster when it finishes (spec.shutdownAfterJobFinishes), else its cluster
    runs on. Anything else runs: metering on is the safe mistake."""
    deployment = status.get("jobDeploymentStatus") or ""
    if deployment == "Suspended":
        return PodState.STOPPED
    if deployment in RAY_FINISHED:
        return (
            PodState.STOPPED if spec.get("shutdownAfterJobFinishes") is True else PodState.RUNNING
        )
    if deployment == "Suspending" or (spec.get("suspend") is True and deployment in RAY_SUSPENDING):
        return PodState.STOPPING
    return PodState.RUNNING


def _finished(kind: str, spec: dict[str, Any], status: dict[str, Any]) -> bool:
    """A workload that will make no pod again: its finishing condition "True" (a Job that
    is Complete or Failed, a JobSet Completed or Failed, a PyTorchJob Succeeded or Failed),
    a Job with all the successes it asks for, a RayJob Complete or Failed."""
    if kind == "rayjob":
        return status.get("jobDeploymentStatus") in RAY_FINISHED
    conditions = status.get("conditions")
    for condition in conditions if isinstance(conditions, list) else []:
        if (
            isinstance(condition, dict)
            and condition.get("type") in FINISHING[kind]
            and condition.get("status") == "True"
        ):
            return True
    completions = spec.get("completions")
    return (
        kind == "job"
        and isinstance(completions, int)
        and _count(status, "succeeded") >= completions
    )


def _at(path: tuple[str, ...], value: Any) -> dict[str, Any]:
    """A merge patch setting the field at `path` ("spec", "suspend") to `value`."""
    patch: Any = value
    for key in reversed(path):
        patch = {key: patch}
    return dict(patch)


def _replicas(seen: _Seen) -> int:
    return _count(_section(seen.obj, "spec"), "replicas", default=1)


def _replicas_before_stop(seen: _Seen) -> int | None:
    """The replica count the governor's stop recorded; None without a usable record."""
    annotations = _section(_section(seen.obj, "metadata"), "annotations")
    recorded = annotations.get(REPLICAS_ANNOTATION)
    if not isinstance(recorded, str) or not (recorded.isascii() and recorded.isdigit()):
        return None
    return int(recorded) or None  # a stop never records zero: that workload was not running


def _cannot_preserve(seen: _Seen) -> str | None:
    """Why stopping would lose data kept in volumes, None if it would not."""
    spec = _section(seen.obj, "spec")
    reasons = []
    for where, template, _ in _templates(seen):
        volumes = _section(template, "spec").get("volumes")
        reasons += [
            f"its volume {volume.get('name')!r}{where} is a generic ephemeral volume, whose "
            "PersistentVolumeClaim is deleted with the pod"
            for volume in (volumes if isinstance(volumes, list) else [])
            if isinstance(volume, dict) and volume.get("ephemeral") is not None
        ]
    policy = _section(spec, "persistentVolumeClaimRetentionPolicy")
    if seen.workload.kind == "statefulset" and policy.get("whenScaled") == "Delete":
        reasons.append(
            "its persistentVolumeClaimRetentionPolicy.whenScaled is Delete, so scaling it "
            "to zero deletes its PersistentVolumeClaims"
        )
    if not reasons:
        return None
    return f"stopping {seen.workload} would lose data: " + "; ".join(reasons) + "."


def _cannot_suspend(seen: _Seen) -> str | None:
    """Why KubeRay would not suspend a RayJob (it marks it ValidationFailed and leaves its
    cluster running), None where it would or the workload is no RayJob."""
    if seen.workload.kind != "rayjob":
        return None
    spec = _section(seen.obj, "spec")
    if spec.get("clusterSelector"):
        return (
            f"{seen.workload} runs on an existing RayCluster (spec.clusterSelector), which "
            "KubeRay does not suspend; stop that cluster by hand."
        )
    if spec.get("shutdownAfterJobFinishes") is not True:
        return (
            f"KubeRay suspends a RayJob only if its spec.shutdownAfterJobFinishes is true, "
            f"and {seen.workload}'s is not; set it, or stop the job by hand."
        )
    return None


def _templates(seen: _Seen) -> list[tuple[str, dict[str, Any], int]]:
    """The pod templates of a workload: where each is (" in <role>", "" for a kind with one
    template), the template, and how many pods are made from it (1 for a Job, Deployment or
    StatefulSet: one of its pods; a JobSet's replicatedJob's replicas times its Job's
    parallelism; a RayJob's head, each worker group's replicas times its numOfHosts; a
    PyTorchJob's replica type's replicas)."""
    spec = _section(seen.obj, "spec")
    kind = seen.workload.kind
    if kind == "jobset":
        found = []
        for each in _items(spec.get("replicatedJobs")):
            job = _section(_section(each, "template"), "spec")
            pods = _count(each, "replicas", default=1) * _count(job, "parallelism", default=1)
            found.append(
                (f" in replicatedJob {each.get('name')!r}", _section(job, "template"), pods)
            )
        return found
    if kind == "rayjob":
        cluster = _section(spec, "rayClusterSpec")
        head = _section(cluster, "headGroupSpec")
        found = [(" in the Ray head", _section(head, "template"), 1)]
        for group in _items(cluster.get("workerGroupSpecs")):
            pods = _count(group, "replicas", default=_count(group, "minReplicas")) * _count(
                group, "numOfHosts", default=1
            )
            where = f" in Ray worker group {group.get('groupName')!r}"
            found.append((where, _section(group, "template"), pods))
        if "submitterPodTemplate" in spec:
            found.append((" in the submitter", _section(spec, "submitterPodTemplate"), 1))
        return found
    if kind == "pytorchjob":
        return [
            (f" in {role}", _section(each, "template"), _count(each, "replicas", default=1))
            for role, each in _section(spec, "pytorchReplicaSpecs").items()
            if isinstance(each, dict)
        ]
    return [("", _section(spec, "template"), 1)]


def _items(value: Any) -> list[dict[str, Any]]:
    return [each for each in value if isinstance(each, dict)] if isinstance(value, list) else []


def _section(obj: dict[str, Any], key: str) -> dict[str, Any]:
    value = obj.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _malformed(f"{key}: {value!r:.200}")
    return value


def _count(section: dict[str, Any], key: str, default: int = 0) -> int:
    """A count the API server omits when it is zero (or when it is the default)."""
    value = section.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise _malformed(f"{key}: {value!r:.200}")
    return value


def _malformed(what: str) -> ProviderError:
    return ProviderError(f"kubernetes answered a malformed object ({what})", retryable=True)


def _listing(seen: _Seen) -> Listed:
    """A workload as listed: its `metadata.name` and `metadata.labels`, and the GPUs its pod
    templates ask for (the `nvidia.com/gpu` limits of their containers): for a Job,
    Deployment or StatefulSet one of its pods', for a JobSet, RayJob or PyTorchJob, whose
    pods have different roles, all of its pods' together; the API names no GPU model."""
    metadata = seen.obj.get("metadata")
    metadata = metadata if isinstance(metadata, dict) else {}
    labels, name = metadata.get("labels"), metadata.get("name")
    asked = []
    for _, template, pods in _templates(seen):
        containers = _section(template, "spec").get("containers")
        gpus = [
            _whole(((c.get("resources") or {}).get("limits") or {}).get(GPU_RESOURCE))
            for c in _items(containers)
        ]
        asked += [g * pods for g in gpus if g is not None]
    return Listed(
        seen.workload.ref,
        _description(seen),
        name=name if isinstance(name, str) else None,
        labels={str(k): str(v) for k, v in labels.items()} if isinstance(labels, dict) else {},
        gpu_count=sum(asked) if asked else None,
    )


def _whole(value: Any) -> int | None:
    """A whole-number resource quantity (GPUs are asked for in whole numbers)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and value.isdigit():
        return int(value)
    return None
