"""Kubernetes' validating admission webhook: the API server POSTs an `AdmissionReview`
(`admission.k8s.io/v1`) with the object being created or updated, and reads back the same
envelope with `response: {uid, allowed, status: {code, message}, warnings}`.

Judged: the creation of a workload whose pods ask for `nvidia.com/gpu` (a Pod, Deployment,
ReplicaSet, StatefulSet, Job, JobSet, RayJob, RayCluster or PyTorchJob), and an update that
unsuspends one or asks for more GPUs. Let through untouched: everything else, objects made by
a workload the webhook judged (a Job's pods, a JobSet's Jobs, a Deployment's ReplicaSet), a
suspended workload (judged when it is unsuspended) and one queued in Kueue (its admission
check judges it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from governor.domain.errors import Invalid
from governor.domain.kube_workloads import (
    KINDS,
    Kind,
    PodGroup,
    launch_request,
    pod_groups,
    requests_gpus,
)
from governor.domain.launch_gate import LaunchRequest

API_VERSION = "admission.k8s.io/v1"
KIND = "AdmissionReview"
JUDGED_OPERATIONS = frozenset({"CREATE", "UPDATE"})
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"  # a workload Kueue queues: its check judges it
# a controller's objects whose owner the webhook judged (or whose owner's owner it did)
JUDGED_OWNERS = frozenset(
    {"Job", "JobSet", "ReplicaSet", "Deployment", "StatefulSet", "RayJob", "RayCluster"}
    | {"PyTorchJob"}
)


@dataclass(frozen=True)
class Review:
    """One admission request, as much of it as the webhook reads."""

    uid: str
    operation: str
    obj: Mapping[str, Any]
    old: Mapping[str, Any]
    namespace: str | None
    user: str | None
    dry_run: bool


@dataclass(frozen=True)
class Untouched:
    """Let through without judging: why, and a warning for the user where one helps."""

    why: str
    warning: str | None = None


def read(body: Any) -> Review:
    """The review the API server sent; Invalid (400) for one it could not have sent."""
    if not isinstance(body, dict) or body.get("kind") != KIND:
        raise Invalid(f"not an {KIND}: want {{apiVersion: {API_VERSION}, kind: {KIND}, ...}}")
    if body.get("apiVersion") != API_VERSION:
        raise Invalid(f"{KIND} {body.get('apiVersion')!r:.60}: only {API_VERSION} is answered")
    request = body.get("request")
    if not isinstance(request, dict):
        raise Invalid(f"{KIND} without a request")
    uid, operation = request.get("uid"), request.get("operation")
    if not isinstance(uid, str) or not uid or len(uid) > 256:
        raise Invalid(f"{KIND} request.uid: want the request's id")
    if not isinstance(operation, str):
        raise Invalid(f"{KIND} request.operation: want CREATE, UPDATE, DELETE or CONNECT")
    obj, old = request.get("object"), request.get("oldObject")
    if not isinstance(obj, dict | None) or not isinstance(old, dict | None):
        raise Invalid(f"{KIND} request.object and oldObject: want objects")
    user = request.get("userInfo")
    username = user.get("username") if isinstance(user, dict) else None
    namespace = request.get("namespace")
    return Review(
        uid,
        operation,
        obj or {},
        old or {},
        namespace if isinstance(namespace, str) and namespace else None,
        username if isinstance(username, str) and username else None,
        request.get("dryRun") is True,
    )


def judged(review: Review) -> LaunchRequest | Untouched:
    """The launch the request asks the governor to judge, or why it is let through; Invalid
    for a workload that cannot be read (a bad annotation, a GPU count that is not one)."""
    if review.operation not in JUDGED_OPERATIONS:
        return Untouched(f"a {review.operation} is not judged")
    kind = Kind.of(review.obj)
    if kind not in KINDS:
        return Untouched(f"a {kind.kind or 'object'} is not judged")
    metadata = _metadata(review.obj)
    owner = _controller(metadata)
    if owner in JUDGED_OWNERS:
        return Untouched(f"made by its {owner}, judged when it was created")
    groups = pod_groups(review.obj)
    if not requests_gpus(groups):
        return Untouched("no pod of it asks for nvidia.com/gpu")
    labels, annotations = _strings(metadata.get("labels")), _strings(metadata.get("annotations"))
    if labels.get(QUEUE_LABEL):
        return Untouched(
            "queued in Kueue", f"governor: Kueue's admission check judges {kind.kind} when admitted"
        )
    if _suspended(review.obj):
        return Untouched("suspended", f"governor: {kind.kind} is judged when it is unsuspended")
    if review.operation == "UPDATE" and not _asks_more(review, groups):
        return Untouched("an update that asks for no more GPUs")
    name = metadata.get("name") or metadata.get("generateName")
    where = review.namespace or metadata.get("namespace")
    return launch_request(
        groups,
        labels,
        annotations,
        name=f"{kind.kind} {where}/{name}" if where else f"{kind.kind} {name}",
        user=review.user,
        project=str(where) if where else None,
    )


def response(
    uid: str, allowed: bool, message: str, *, code: int, warnings: tuple[str, ...] = ()
) -> dict[str, Any]:
    """The answer the API server reads: the review's uid, allowed or not, with the status it
    shows a refused user and the warnings it shows any user."""
    answer: dict[str, Any] = {
        "uid": uid,
        "allowed": allowed,
        "status": {"code": code, "message": message},
    }
    if warnings:
        answer["warnings"] = list(warnings)
    return {"apiVersion": API_VERSION, "kind": KIND, "response": answer}


def _metadata(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    metadata = obj.get("metadata")
    if metadata is None:
        return {}
    if not isinstance(metadata, dict):
        raise Invalid("metadata: want an object")
    return metadata


def _controller(metadata: Mapping[str, Any]) -> str | None:
    owners = metadata.get("ownerReferences")
    for owner in owners if isinstance(owners, list) else ():
        if isinstance(owner, dict) and owner.get("controller") is True:
            kind = owner.get("kind")
            return kind if isinstance(kind, str) else None
    return None


def _strings(value: Any) -> dict[str, str]:
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, dict) else {}


def _suspended(obj: Mapping[str, Any]) -> bool:
    """A Job, JobSet or RayJob's `spec.suspend`; a PyTorchJob's `spec.runPolicy.suspend`."""
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return False
    policy = spec.get("runPolicy")
    return spec.get("suspend") is True or (
        isinstance(policy, dict) and policy.get("suspend") is True
    )


def _asks_more(review: Review, groups: tuple[PodGroup, ...]) -> bool:
    """Whether an update unsuspends the workload, or asks for more GPUs in some group (more
    pods, more GPUs a pod, or another model) than the object it replaces."""
    if not review.old or _suspended(review.old):
        return True
    try:
        before = {g.name: g for g in pod_groups(review.old)}
    except Invalid:
        return True  # the old object unreadable: judge the new one whole
    for g in groups:
        was = before.get(g.name)
        if g.count * g.gpus_per_pod == 0:
            continue
        if was is None or g.gpu_models != was.gpu_models:
            return True
        if g.count * g.gpus_per_pod > was.count * was.gpus_per_pod:
            return True
    return False
