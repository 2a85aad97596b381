"""The fake Kubernetes API server with Kueue installed (kueue.x-k8s.io/v1beta2, its storage
version): Workloads, AdmissionChecks, ResourceFlavors and ClusterQueues, read with GET and
their status changed with JSON merge patches on the `status` subresource, and Kueue's own
part played where a test says so.

What Kueue does here, as its documentation says it does: `reserve_quota` reserves a
Workload's quota in its ClusterQueue (condition QuotaReserved, `status.admission`) and sets
each of the queue's admission checks `Pending`; once every check is `Ready` the Workload is
admitted (condition Admitted) and its owner Job unsuspended; a check set to `Retry` on an
admitted Workload evicts it (Evicted, reason AdmissionCheck: its owner suspended, its quota
released, its checks back to Pending); `Rejected` deactivates it (`spec.active: false`), and a
patch of `spec.active: true` on the Workload activates it again (its checks back to Pending).

A `metadata.resourceVersion` in a patch is a precondition (409 Conflict when stale). Every
object after a patch is checked by `validate` (a test passes one made from Kueue's CRD
schemas); what it refuses is answered 422 Invalid, as the API server answers a patch its
schema refuses, and nothing is changed.
"""

from __future__ import annotations

import copy
import re
import uuid
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from governor.fakes.http_cloud import FakeRequest, Reply
from governor.fakes.kubernetes import DEFAULT_TOKEN, FakeKubernetes, merge_patch
from governor.fakes.kubernetes_kinds import timestamp

GROUP = "kueue.x-k8s.io"
VERSION = "v1beta2"
_NAMESPACED = re.compile(
    rf"/apis/{GROUP}/{VERSION}/namespaces/(?P<namespace>[^/]+)/workloads"
    r"(?:/(?P<name>[^/]+)(?P<status>/status)?)?"
)
_CLUSTER = re.compile(
    rf"/apis/{GROUP}/{VERSION}/(?P<resource>workloads|admissionchecks|resourceflavors|"
    r"clusterqueues)(?:/(?P<name>[^/]+)(?P<status>/status)?)?"
)
KINDS = {
    "workloads": "Workload",
    "admissionchecks": "AdmissionCheck",
    "resourceflavors": "ResourceFlavor",
    "clusterqueues": "ClusterQueue",
}
# Why an object is invalid by its kind's schema (None: valid), given its kind and the object
Validate = Callable[[str, dict[str, Any]], str | None]


def _condition(kind: str, status: bool, reason: str, message: str, at: datetime) -> dict[str, Any]:
    return {
        "type": kind,
        "status": "True" if status else "False",
        "reason": reason,
        "message": message,
        "lastTransitionTime": timestamp(at),
    }


class FakeKueue(FakeKubernetes):
    """The API server with Kueue: the workloads of FakeKubernetes and Kueue's objects."""

    def __init__(
        self,
        state_file: Path,
        api_key: str = DEFAULT_TOKEN,
        *,
        validate: Validate | None = None,
        stop_delay_s: float = 0.0,
    ) -> None:
        super().__init__(state_file, api_key, stop_delay_s=stop_delay_s)
        self.validate = validate
        saved = self.saved.get("kueue", {})
        self.objects: dict[str, dict[str, dict[str, Any]]] = {
            resource: saved.get(resource, {}) for resource in KINDS
        }  # resource -> key ("namespace/name" for Workloads, else the name) -> object
        self.status_patches: dict[str, list[dict[str, Any]]] = {}  # key -> patches taken

    def snapshot(self) -> dict[str, Any]:
        return {**super().snapshot(), "kueue": self.objects}

    # What a test sets up ------------------------------------------------------------------

    def _new(self, resource: str, name: str, namespace: str | None = None) -> dict[str, Any]:
        self.version += 1
        metadata: dict[str, Any] = {
            "name": name,
            "uid": str(uuid.uuid4()),
            "resourceVersion": str(self.version),
            "generation": 1,
            "creationTimestamp": timestamp(self.clock()),
        }
        if namespace is not None:
            metadata["namespace"] = namespace
        return {"apiVersion": f"{GROUP}/{VERSION}", "kind": KINDS[resource], "metadata": metadata}

    def _put(self, resource: str, key: str, obj: dict[str, Any]) -> None:
        problem = self.validate(KINDS[resource], obj) if self.validate else None
        if problem is not None:
            raise ValueError(f"the fake's own {KINDS[resource]} is invalid: {problem}")
        self.objects[resource][key] = obj
        self.save()

    def add_admission_check(self, name: str, controller: str) -> None:
        with self.lock:
            obj = self._new("admissionchecks", name) | {"spec": {"controllerName": controller}}
            self._put("admissionchecks", name, obj)

    def add_flavor(self, name: str, node_labels: dict[str, str] | None = None) -> None:
        with self.lock:
            obj = self._new("resourceflavors", name) | {"spec": {"nodeLabels": node_labels or {}}}
            self._put("resourceflavors", name, obj)

    def add_cluster_queue(self, name: str, checks: list[str], flavor: str, gpus: int) -> None:
        with self.lock:
            spec = {
                "namespaceSelector": {},
                "admissionChecksStrategy": {"admissionChecks": [{"name": c} for c in checks]},
                "resourceGroups": [
                    {
                        "coveredResources": ["nvidia.com/gpu"],
                        "flavors": [
                            {
                                "name": flavor,
                                "resources": [{"name": "nvidia.com/gpu", "nominalQuota": gpus}],
                            }
                        ],
                    }
                ],
            }
            self._put("clusterqueues", name, self._new("clusterqueues", name) | {"spec": spec})

    def add_workload(
        self,
        owner: str,
        queue: str,
        pod_sets: list[dict[str, Any]],
        *,
        labels: dict[str, str] | None = None,
        max_seconds: int | None = None,
        rate_usd: str = "0",
    ) -> str:
        """A job submitted to a LocalQueue: its owner (`namespace/job/name`, with `labels`,
        kept suspended as Kueue keeps it) and its Workload, as Kueue makes it; returns the
        Workload's "namespace/name"."""
        namespace, _, name = owner.split("/")
        self.add_pod(owner, rate_usd, {"suspend": True}, labels)
        with self.lock:
            job = self.workloads[owner].manifest["metadata"]
            obj = self._new("workloads", f"job-{name}", namespace)
            obj["metadata"]["labels"] = {"kueue.x-k8s.io/job-uid": job["uid"]}
            obj["metadata"]["ownerReferences"] = [
                {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "name": name,
                    "uid": job["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ]
            spec: dict[str, Any] = {"queueName": queue, "podSets": pod_sets, "active": True}
            if max_seconds is not None:
                spec["maximumExecutionTimeSeconds"] = max_seconds
            obj["spec"] = spec
            key = f"{namespace}/job-{name}"
            self._put("workloads", key, obj)
            return key

    def reserve_quota(self, key: str, queue: str, flavor: str) -> None:
        """Kueue reserves the Workload's quota in `queue` on `flavor` and runs its checks."""
        with self.lock:
            obj = self.objects["workloads"][key]
            at = self.clock()
            checks = self.objects["clusterqueues"][queue]["spec"]["admissionChecksStrategy"]
            status = obj.setdefault("status", {})
            status["admission"] = {
                "clusterQueue": queue,
                "podSetAssignments": [
                    {
                        "name": pod_set["name"],
                        "count": pod_set.get("count", 1),
                        "flavors": {"nvidia.com/gpu": flavor},
                    }
                    for pod_set in obj["spec"]["podSets"]
                ],
            }
            status["admissionChecks"] = [
                {
                    "name": c["name"],
                    "state": "Pending",
                    "message": "",
                    "lastTransitionTime": timestamp(at),
                }
                for c in checks["admissionChecks"]
            ]
            self._set_condition(
                obj,
                _condition(
                    "QuotaReserved",
                    True,
                    "QuotaReserved",
                    f"Quota reserved in ClusterQueue {queue}",
                    at,
                ),
            )
            if any(c["type"] == "Evicted" for c in status.get("conditions", [])):
                # as Kueue's reservation does: an earlier eviction is over
                self._set_condition(obj, _condition("Evicted", False, "QuotaReserved", "", at))
            self._bump(obj)
            self._put("workloads", key, obj)

    def workload(self, key: str) -> dict[str, Any]:
        with self.lock:
            return copy.deepcopy(self.objects["workloads"][key])

    def check_state(self, key: str, check: str) -> str | None:
        for entry in self.workload(key).get("status", {}).get("admissionChecks", []):
            if entry["name"] == check:
                return str(entry["state"])
        return None

    def condition(self, key: str, kind: str) -> bool:
        conditions = self.workload(key).get("status", {}).get("conditions", [])
        return any(c["type"] == kind and c["status"] == "True" for c in conditions)

    # The API ---------------------------------------------------------------------------------

    def handle(self, request: FakeRequest) -> Reply:
        route = _NAMESPACED.fullmatch(request.path)
        if route is not None:
            namespace, name = route["namespace"], route["name"]
            if name is None:
                return (
                    self._listed("workloads", namespace)
                    if request.method == "GET"
                    else self._405(request)
                )
            return self._one("workloads", f"{namespace}/{name}", name, route["status"], request)
        route = _CLUSTER.fullmatch(request.path)
        if route is None:
            return super().handle(request)
        resource, name = route["resource"], route["name"]
        if name is None:
            return self._listed(resource, None) if request.method == "GET" else self._405(request)
        if resource == "workloads":
            return self.error(404, "the server could not find the requested resource")
        return self._one(resource, name, name, route["status"], request)

    def _405(self, request: FakeRequest) -> Reply:
        return self.error(405, f"{request.method} is not supported on {request.path}")

    def _listed(self, resource: str, namespace: str | None) -> Reply:
        items = [
            {k: v for k, v in copy.deepcopy(obj).items() if k not in ("apiVersion", "kind")}
            for key, obj in sorted(self.objects[resource].items())
            if namespace is None or key.startswith(f"{namespace}/")
        ]
        return Reply(
            200,
            {
                "kind": f"{KINDS[resource]}List",
                "apiVersion": f"{GROUP}/{VERSION}",
                "metadata": {"resourceVersion": str(self.version)},
                "items": items,
            },
        )

    def _one(
        self, resource: str, key: str, name: str, status: str | None, request: FakeRequest
    ) -> Reply:
        obj = self.objects[resource].get(key)
        if obj is None:
            details = {"name": name, "group": GROUP, "kind": resource}
            return self.error(404, f'{resource}.{GROUP} "{name}" not found', details)
        if request.method == "GET":
            return Reply(200, copy.deepcopy(obj))
        if request.method == "PATCH" and status is not None:
            return self._patch_status(resource, key, obj, request)
        if request.method == "PATCH" and resource == "workloads":
            return self._patch_active(key, obj, request)
        return self._405(request)

    def _patch_active(self, key: str, obj: dict[str, Any], request: FakeRequest) -> Reply:
        """A patch of a Workload's spec: `active` alone here (activated again, Kueue queues
        it: its checks back to Pending)."""
        refused = self.refused_patch(GROUP, "workloads", obj["metadata"], request)
        if refused is not None:
            return refused
        spec = request.body.get("spec") if isinstance(request.body, dict) else None
        if not isinstance(spec, dict) or set(spec) != {"active"}:
            return self.error(422, "this server changes a Workload's spec.active alone")
        changed = copy.deepcopy(obj)
        changed["spec"]["active"] = spec["active"]
        problem = self.validate("Workload", changed) if self.validate else None
        if problem is not None:
            return self.error(
                422, f'Workload.{GROUP} "{obj["metadata"]["name"]}" is invalid: {problem}'
            )
        if spec["active"] is True and obj["spec"].get("active") is False:
            for check in changed.get("status", {}).get("admissionChecks", []):
                check.update(state="Pending", message="Reset to Pending after reactivation")
        self._bump(changed)
        self.objects["workloads"][key] = changed
        self.save()
        return Reply(200, copy.deepcopy(changed))

    def _patch_status(
        self, resource: str, key: str, obj: dict[str, Any], request: FakeRequest
    ) -> Reply:
        refused = self.refused_patch(GROUP, resource, obj["metadata"], request)
        if refused is not None:
            return refused
        patch = request.body
        metadata = obj["metadata"]
        # the status subresource changes the status alone
        changed = copy.deepcopy(obj)
        changed["status"] = merge_patch(
            obj.get("status", {}), copy.deepcopy(patch.get("status", {}))
        )
        problem = self.validate(KINDS[resource], changed) if self.validate else None
        if problem is not None:
            return self.error(
                422, f'{KINDS[resource]}.{GROUP} "{metadata["name"]}" is invalid: {problem}'
            )
        self.status_patches.setdefault(key, []).append(patch)
        if resource == "workloads":
            self._kueue_reacts(changed, self.clock())
        self._bump(changed)
        self.objects[resource][key] = changed
        self.save()
        return Reply(200, copy.deepcopy(changed))

    # Kueue's part ------------------------------------------------------------------------------

    def _bump(self, obj: dict[str, Any]) -> None:
        self.version += 1
        obj["metadata"]["resourceVersion"] = str(self.version)

    @staticmethod
    def _set_condition(obj: dict[str, Any], condition: dict[str, Any]) -> None:
        status = obj.setdefault("status", {})
        kept = [c for c in status.get("conditions", []) if c["type"] != condition["type"]]
        status["conditions"] = [*kept, condition]

    def _owner(self, obj: dict[str, Any]) -> str:
        owner = obj["metadata"]["ownerReferences"][0]
        return f"{obj['metadata']['namespace']}/job/{owner['name']}"

    def _suspend(self, obj: dict[str, Any], suspend: bool, at: datetime) -> None:
        job = self.workloads.get(self._owner(obj))
        if job is not None:
            job.manifest["spec"]["suspend"] = suspend
            job.settle(at, self.stop_delay_s)

    def _kueue_reacts(self, obj: dict[str, Any], at: datetime) -> None:
        """What Kueue does once a check's state changed."""
        status = obj.get("status", {})
        states = {c["state"] for c in status.get("admissionChecks", [])}
        conditions = {c["type"]: c["status"] == "True" for c in status.get("conditions", [])}
        admitted = conditions.get("Admitted", False)
        if "Rejected" in states:
            obj["spec"]["active"] = False
            self._evict(obj, "AdmissionCheck", "At least one admission check is Rejected", at)
        elif "Retry" in states and (admitted or conditions.get("QuotaReserved", False)):
            self._evict(obj, "AdmissionCheck", "At least one admission check is false", at)
            for check in status.get("admissionChecks", []):
                check.update(state="Pending", message="Reset to Pending after eviction")
        elif states == {"Ready"} and conditions.get("QuotaReserved") and not admitted:
            self._set_condition(
                obj, _condition("Admitted", True, "Admitted", "The workload is admitted", at)
            )
            self._suspend(obj, False, at)

    def _evict(self, obj: dict[str, Any], reason: str, message: str, at: datetime) -> None:
        self._set_condition(obj, _condition("Evicted", True, reason, message, at))
        self._set_condition(
            obj,
            _condition("Admitted", False, "NoReservation", "The workload has no reservation", at),
        )
        self._set_condition(obj, _condition("QuotaReserved", False, "Pending", message, at))
        obj["status"].pop("admission", None)
        self._suspend(obj, True, at)
