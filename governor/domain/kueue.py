"""Kueue's Workloads and AdmissionChecks (kueue.x-k8s.io/v1beta2, the storage version) as an
admission check controller reads and answers them.

Kueue runs a ClusterQueue's admission checks once a Workload's quota is reserved; a Workload
is admitted when every check is `Ready`. Its controller answers each check of its own with a
state: `Ready`, `Retry` (on an admitted Workload: evicted, its quota released, queued again)
or `Rejected` (deactivated). It must keep its AdmissionCheck's `Active` condition True:
a ClusterQueue whose check is not Active admits nothing (fail closed).

Status is written with JSON merge patches, which replace a list whole: a patch carries every
check (or condition) as read, with ours changed, and the object's `resourceVersion`, so that
a change by Kueue in between makes the API server refuse it (409) rather than lose Kueue's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from decimal import Decimal
from enum import StrEnum
from typing import Any, Protocol, runtime_checkable

from governor.domain import kube_workloads
from governor.domain.errors import Invalid
from governor.domain.kube_workloads import GPU_PRODUCT_LABEL, GPU_RESOURCE, PodGroup
from governor.domain.launch_gate import LaunchRequest

API_VERSION = "kueue.x-k8s.io/v1beta2"
ACTIVE = "Active"  # the AdmissionCheck condition Kueue reads
MESSAGE_MAX = 32768  # a check state's and a condition's message, at most (the CRD's maxLength)
# The owner kinds whose Workloads are registered as pods: the ref the Kubernetes adapters use
REGISTRABLE = {
    "Job": "job",
    "JobSet": "jobset",
    "RayJob": "rayjob",
    "PyTorchJob": "pytorchjob",
    "Deployment": "deployment",
    "StatefulSet": "statefulset",
}


class CheckState(StrEnum):
    PENDING = "Pending"
    READY = "Ready"
    RETRY = "Retry"
    REJECTED = "Rejected"


class Malformed(ValueError):
    """An object that is not what Kueue's schema says it is."""


@dataclass(frozen=True)
class Owner:
    """The object a Workload was made for (its controller owner reference)."""

    api_version: str
    kind: str
    name: str

    def ref(self, namespace: str) -> str | None:
        """`<namespace>/<kind>/<name>` for a kind the governor registers; None otherwise."""
        kind = REGISTRABLE.get(self.kind)
        return None if kind is None else f"{namespace}/{kind}/{self.name}"


@dataclass(frozen=True)
class Workload:
    """What the controller needs of one Workload."""

    namespace: str
    name: str
    uid: str
    resource_version: str
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    owner: Owner | None
    groups: tuple[PodGroup, ...]  # its pod sets
    flavors: Mapping[str, str]  # pod set -> the flavor Kueue assigned its GPUs
    checks: tuple[Mapping[str, Any], ...]  # status.admissionChecks as read
    conditions: Mapping[str, bool]  # condition type -> status is "True"
    max_seconds: int | None  # spec.maximumExecutionTimeSeconds
    active: bool = True  # spec.active: False once deactivated (a Rejected check)

    def state(self, check: str) -> CheckState | None:
        for entry in self.checks:
            if entry.get("name") == check:
                return CheckState(entry["state"])
        return None

    @property
    def quota_reserved(self) -> bool:
        return self.conditions.get("QuotaReserved", False)

    @property
    def admitted(self) -> bool:
        return self.conditions.get("Admitted", False)

    @property
    def evicted(self) -> bool:
        return self.conditions.get("Evicted", False)

    @property
    def finished(self) -> bool:
        return self.conditions.get("Finished", False)

    @property
    def gpus(self) -> int:
        return sum(g.count * g.gpus_per_pod for g in self.groups)

    def __str__(self) -> str:
        return f"Workload {self.namespace}/{self.name}"


@runtime_checkable
class KueueApi(Protocol):
    """A cluster's Kueue objects, as its API server serves them (raw objects; `ProviderError`
    when a call fails). A patch is a JSON merge patch of the object's status subresource."""

    def admission_checks(self) -> list[dict[str, Any]]: ...

    def patch_admission_check_status(self, name: str, patch: dict[str, Any]) -> None: ...

    def workloads(self) -> list[dict[str, Any]]: ...

    def patch_workload_status(self, namespace: str, name: str, patch: dict[str, Any]) -> None: ...

    def resource_flavors(self) -> list[dict[str, Any]]: ...

    def owner_metadata(self, namespace: str, owner: Owner) -> tuple[dict[str, str], dict[str, str]]:
        """The owner's own labels and annotations (a registrable kind's; none for another)."""
        ...


def _dict(value: Any, what: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise Malformed(f"{what} is not an object: {value!r:.200}")
    return value


def _list(value: Any, what: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise Malformed(f"{what} is not a list: {value!r:.200}")
    return value


def _text(value: Any, what: str) -> str:
    if not isinstance(value, str) or not value:
        raise Malformed(f"{what} is missing")
    return value


def controller_checks(objects: list[dict[str, Any]], controller: str) -> list[dict[str, Any]]:
    """The AdmissionChecks whose `spec.controllerName` is `controller`."""
    return [
        obj for obj in objects if _dict(obj.get("spec"), "spec").get("controllerName") == controller
    ]


def read_workload(obj: dict[str, Any]) -> Workload:
    """A Workload object read (Malformed where it is not one)."""
    metadata = _dict(obj.get("metadata"), "metadata")
    spec, status = _dict(obj.get("spec"), "spec"), _dict(obj.get("status"), "status")
    owner = None
    for ref in _list(metadata.get("ownerReferences"), "metadata.ownerReferences"):
        ref = _dict(ref, "an owner reference")
        if ref.get("controller") is True or owner is None:
            owner = Owner(
                str(ref.get("apiVersion", "")), str(ref.get("kind", "")), str(ref.get("name", ""))
            )
    admission = _dict(status.get("admission"), "status.admission")
    flavors = {
        str(a.get("name")): str(_dict(a.get("flavors"), "flavors").get(GPU_RESOURCE))
        for a in _list(admission.get("podSetAssignments"), "podSetAssignments")
        if isinstance(a, dict) and GPU_RESOURCE in _dict(a.get("flavors"), "flavors")
    }
    try:
        groups = kube_workloads.pod_sets(obj)
    except Invalid as exc:
        raise Malformed(str(exc)) from None
    checks = tuple(
        _dict(c, "an admission check state")
        for c in _list(status.get("admissionChecks"), "status.admissionChecks")
    )
    for check in checks:
        if check.get("state") not in tuple(CheckState):
            raise Malformed(f"admission check state {check.get('state')!r}")
    conditions = {
        str(c.get("type")): c.get("status") == "True"
        for c in _list(status.get("conditions"), "status.conditions")
        if isinstance(c, dict)
    }
    seconds = spec.get("maximumExecutionTimeSeconds")
    return Workload(
        namespace=_text(metadata.get("namespace"), "metadata.namespace"),
        name=_text(metadata.get("name"), "metadata.name"),
        uid=_text(metadata.get("uid"), "metadata.uid"),
        resource_version=str(metadata.get("resourceVersion", "")),
        labels=_strings(metadata.get("labels"), "labels"),
        annotations=_strings(metadata.get("annotations"), "annotations"),
        owner=owner,
        groups=groups,
        flavors=flavors,
        checks=checks,
        conditions=conditions,
        max_seconds=seconds if isinstance(seconds, int) and seconds > 0 else None,
        active=spec.get("active") is not False,
    )


def _strings(value: Any, what: str) -> dict[str, str]:
    return {str(k): str(v) for k, v in _dict(value, what).items()}


def flavor_models(flavors: list[dict[str, Any]]) -> dict[str, str]:
    """ResourceFlavor name -> the GPU model its nodes carry (`spec.nodeLabels`), where said."""
    models: dict[str, str] = {}
    for flavor in flavors:
        name = _dict(flavor.get("metadata"), "metadata").get("name")
        labels = _dict(_dict(flavor.get("spec"), "spec").get("nodeLabels"), "nodeLabels")
        if isinstance(name, str) and isinstance(labels.get(GPU_PRODUCT_LABEL), str):
            models[name] = labels[GPU_PRODUCT_LABEL]
    return models


def launch_request(
    workload: Workload,
    labels: Mapping[str, str],
    annotations: Mapping[str, str],
    models: Mapping[str, str],
) -> LaunchRequest:
    """The Workload as a launch to judge (`kube_workloads.launch_request`), its GPU model the
    one its assigned flavor's nodes carry where Kueue assigned one flavor of a known model,
    else its pod templates'; its hours the governor-max-hours annotation, else the Workload's
    maximum execution time. Invalid where an annotation is."""
    assigned = {
        models[flavor]
        for group, flavor in workload.flavors.items()
        if flavor in models and any(g.name == group and g.gpus_per_pod for g in workload.groups)
    }
    request = kube_workloads.launch_request(
        workload.groups,
        labels,
        annotations,
        gpu_model_override=assigned.pop() if len(assigned) == 1 else None,
        tool="kueue",
        name=f"{workload.namespace}/{workload.name}",
        project=workload.namespace,
    )
    if request.max_hours is None and workload.max_seconds is not None:
        request = replace(request, max_hours=Decimal(workload.max_seconds) / 3600)
    return request


def timestamp(at: datetime) -> str:
    """A time as the API server writes it: RFC 3339 in UTC, to the second."""
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


def _clip(message: str) -> str:
    return message if len(message) <= MESSAGE_MAX else message[: MESSAGE_MAX - 1] + "…"


def check_patch(
    workload: Workload, states: Mapping[str, tuple[CheckState, str]], at: datetime
) -> dict[str, Any]:
    """A merge patch of the Workload's status setting these checks (name -> state, message),
    every other check kept as read, guarded by the resourceVersion read."""
    checks: list[dict[str, Any]] = []
    for entry in workload.checks:
        name = str(entry.get("name"))
        if name in states:
            state, message = states[name]
            changed = entry.get("state") != state.value
            entry = {
                **entry,
                "state": state.value,
                "message": _clip(message),
                "lastTransitionTime": timestamp(at) if changed else entry["lastTransitionTime"],
            }
        checks.append(dict(entry))
    return {
        "metadata": {"resourceVersion": workload.resource_version},
        "status": {"admissionChecks": checks},
    }


def active_patch(check: dict[str, Any], controller: str, at: datetime) -> dict[str, Any] | None:
    """A merge patch of an AdmissionCheck's status marking it Active for its generation; None
    where it already is."""
    metadata = _dict(check.get("metadata"), "metadata")
    generation = metadata.get("generation")
    conditions = [
        _dict(c, "a condition")
        for c in _list(_dict(check.get("status"), "status").get("conditions"), "conditions")
    ]
    current = next((c for c in conditions if c.get("type") == ACTIVE), None)
    if (
        current is not None
        and current.get("status") == "True"
        and current.get("observedGeneration") == generation
    ):
        return None
    active: dict[str, Any] = {
        "type": ACTIVE,
        "status": "True",
        "reason": "Active",
        "message": f"{controller} is running: Workloads are priced against their budgets",
        "lastTransitionTime": (
            current["lastTransitionTime"]
            if current is not None and current.get("status") == "True"
            else timestamp(at)
        ),
    }
    if isinstance(generation, int):
        active["observedGeneration"] = generation
    kept = [c for c in conditions if c.get("type") != ACTIVE]
    return {
        "metadata": {"resourceVersion": str(metadata.get("resourceVersion", ""))},
        "status": {"conditions": [*kept, active]},
    }
