"""Kueue on a cluster's API server: the Workloads, AdmissionChecks and ResourceFlavors the
governor's admission check controller reads and answers, and the preserving stop of a
Workload Kueue admitted.

A Workload registered as a pod is named by its owner, `<namespace>/<kind>/<name>` (a Job,
JobSet, RayJob, PyTorchJob, Deployment or StatefulSet), as the Kubernetes adapter names
workloads. Kueue owns such a workload's suspension (it unsuspends what it admitted), so it
is stopped the way Kueue evicts: the governor's admission check on its Workload is set to
`Retry`. Kueue then evicts it (its pods are deleted, its PersistentVolumeClaims kept), gives
its quota back and queues it again, where the check is the governor's to answer anew. It is
running while admitted, stopping while evicted and still admitted, stopped once its quota is
released or it finished. Its resume activates a Workload deactivated while it was stopped
(`spec.active: true`). Only GET and JSON merge-patch PATCH are sent; nothing is deleted.
"""

from __future__ import annotations

from typing import Any

from governor.adapters.providers.kubernetes import (
    MERGE_PATCH,
    STOP_LATENCY_S,
    KubernetesProvider,
    StatusError,
)
from governor.domain import kueue
from governor.domain.kueue import CheckState, Owner
from governor.domain.model import PodState
from governor.domain.ports import CallOutcome, CallResult, Clock, PodDescription, ProviderError

BASE = f"/apis/{kueue.API_VERSION}"
PLURALS = {  # an owner kind's resource, to read its labels
    "Job": "jobs",
    "JobSet": "jobsets",
    "RayJob": "rayjobs",
    "PyTorchJob": "pytorchjobs",
    "Deployment": "deployments",
    "StatefulSet": "statefulsets",
}
KINDS = {kind: object_kind for object_kind, kind in kueue.REGISTRABLE.items()}
REF_FORM = (
    "<namespace>/<kind>/<name> with kind job, jobset, rayjob, pytorchjob, deployment or "
    "statefulset: the owner of a Workload Kueue admitted"
)


class KueueProvider:
    """Implements KueueApi, StopsPreserving and Resumes over a cluster's API server (`cluster`'s
    credentials, which must be allowed to get, list and patch workloads, patch the status of
    workloads and admissionchecks, list resourceflavors, and get the owners' kinds)."""

    def __init__(
        self,
        cluster: KubernetesProvider,
        controller: str,
        clock: Clock,
        *,
        stop_latency_s: float = STOP_LATENCY_S,
    ) -> None:
        self.stop_latency_s = stop_latency_s
        self.controller = controller
        self._clock = clock
        self.credential = cluster.credential
        self._cluster = cluster

    # KueueApi ------------------------------------------------------------------------------

    def admission_checks(self) -> list[dict[str, Any]]:
        return self._items(f"{BASE}/admissionchecks")

    def patch_admission_check_status(self, name: str, patch: dict[str, Any]) -> None:
        path = f"{BASE}/admissionchecks/{name}/status"
        self._cluster.request("PATCH", path, json=patch, headers=MERGE_PATCH)

    def workloads(self) -> list[dict[str, Any]]:
        return self._items(f"{BASE}/workloads")

    def patch_workload_status(self, namespace: str, name: str, patch: dict[str, Any]) -> None:
        path = f"{BASE}/namespaces/{namespace}/workloads/{name}/status"
        self._cluster.request("PATCH", path, json=patch, headers=MERGE_PATCH)

    def resource_flavors(self) -> list[dict[str, Any]]:
        return self._items(f"{BASE}/resourceflavors")

    def owner_metadata(self, namespace: str, owner: Owner) -> tuple[dict[str, str], dict[str, str]]:
        plural = PLURALS.get(owner.kind)
        if plural is None or "/" not in owner.api_version:
            return {}, {}
        path = f"/apis/{owner.api_version}/namespaces/{namespace}/{plural}/{owner.name}"
        try:
            obj = self._cluster.request("GET", path)
        except StatusError as exc:
            if exc.reason == "NotFound":
                return {}, {}
            raise
        metadata = obj.get("metadata") if isinstance(obj, dict) else None
        metadata = metadata if isinstance(metadata, dict) else {}
        return _strings(metadata.get("labels")), _strings(metadata.get("annotations"))

    # StopsPreserving -----------------------------------------------------------------------

    def describe(self, ref: str) -> PodDescription:
        workload = self._workload_of(ref)
        if workload is None:
            raise ProviderError(f"kueue has no Workload owned by {ref}", retryable=False)
        state = _state(workload)
        return PodDescription(state, None, provider_state=_spelled(workload))

    def stop(self, ref: str) -> CallResult:
        try:
            workload = self._workload_of(ref)
            if workload is None:
                return CallResult(CallOutcome.DONE, "already gone")
            state = _state(workload)
            if state is PodState.STOPPED:
                return CallResult(CallOutcome.DONE, "already stopped")
            ours = [str(c["name"]) for c in workload.checks if str(c.get("name")) in self._checks()]
            if not ours:
                return CallResult(
                    CallOutcome.PERMANENT,
                    f"kueue: {workload} has no admission check of {self.controller}'s to evict it "
                    "by",
                )
            if all(workload.state(name) is CheckState.RETRY for name in ours):
                return CallResult(CallOutcome.PENDING, f"{workload} is being evicted")
            message = (
                f"{self.controller}: evicted to stop it, keeping its volumes: its budget's stop "
                "order (the governor's events say why); it was told to checkpoint first"
            )
            patch = kueue.check_patch(
                workload, {n: (CheckState.RETRY, message) for n in ours}, self._clock.now()
            )
            self.patch_workload_status(workload.namespace, workload.name, patch)
        except StatusError as exc:
            if exc.status == 409:
                return CallResult(CallOutcome.RETRYABLE, f"kueue: {ref} changed while stopped")
            return CallResult.failed(exc)
        except ProviderError as exc:
            return CallResult.failed(exc)
        return CallResult(
            CallOutcome.PENDING, f"{workload}: check set to Retry; Kueue evicts its pods"
        )

    # Resumes -------------------------------------------------------------------------------

    def resume(self, ref: str) -> CallResult:
        """A Workload the governor stopped runs again: deactivated (its check Rejected while
        it was stopped), it is activated again (`spec.active: true`), and Kueue queues it;
        the governor's check admits it as its resumed pod."""
        try:
            workload = self._workload_of(ref)
            if workload is None:
                return CallResult(CallOutcome.PERMANENT, f"kueue: no Workload is owned by {ref}")
            if workload.admitted and not workload.evicted:
                return CallResult(CallOutcome.DONE, "already running")
            if workload.active:
                return CallResult(CallOutcome.DONE, f"{workload} is queued; Kueue admits it")
            path = f"{BASE}/namespaces/{workload.namespace}/workloads/{workload.name}"
            patch = {
                "metadata": {"resourceVersion": workload.resource_version},
                "spec": {"active": True},
            }
            self._cluster.request("PATCH", path, json=patch, headers=MERGE_PATCH)
        except StatusError as exc:
            if exc.status == 409:
                return CallResult(CallOutcome.RETRYABLE, f"kueue: {ref} changed while resumed")
            return CallResult.failed(exc)
        except ProviderError as exc:
            return CallResult.failed(exc)
        return CallResult(CallOutcome.DONE, f"{workload} activated again; Kueue queues it")

    # ---------------------------------------------------------------------------------------

    def _checks(self) -> set[str]:
        checks = kueue.controller_checks(self.admission_checks(), self.controller)
        return {str(c.get("metadata", {}).get("name")) for c in checks}

    def _workload_of(self, ref: str) -> kueue.Workload | None:
        """The Workload `ref` owns (the latest unfinished one, where it was made again)."""
        parts = ref.split("/")
        if len(parts) != 3 or parts[1] not in KINDS or not parts[0] or not parts[2]:
            raise ProviderError(f"kueue ref {ref!r} is not {REF_FORM}", retryable=False)
        namespace, kind, name = parts
        found = []
        for obj in self._items(f"{BASE}/namespaces/{namespace}/workloads"):
            try:
                workload = kueue.read_workload(obj)
            except kueue.Malformed as exc:
                raise ProviderError(
                    f"kueue answered a malformed Workload: {exc}", retryable=True
                ) from None
            owner = workload.owner
            if owner is not None and (owner.kind, owner.name) == (KINDS[kind], name):
                found.append(workload)
        found.sort(key=lambda w: not w.finished)  # stable: the API server's order kept
        return found[-1] if found else None

    def _items(self, path: str) -> list[dict[str, Any]]:
        answer = self._cluster.request("GET", path)
        items = answer.get("items") if isinstance(answer, dict) else None
        if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
            raise ProviderError(
                f"kueue answered a list without items: {answer!r:.200}", retryable=True
            )
        return items


def _strings(value: Any) -> dict[str, str]:
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, dict) else {}


def _state(workload: kueue.Workload) -> PodState:
    if workload.finished or not workload.admitted:
        return PodState.STOPPED
    return PodState.STOPPING if workload.evicted else PodState.RUNNING


def _spelled(workload: kueue.Workload) -> str:
    if workload.finished:
        return "Finished"
    if workload.admitted:
        return "Evicted" if workload.evicted else "Admitted"
    return "QuotaReserved" if workload.quota_reserved else "Pending"
