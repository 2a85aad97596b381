"""The kinds of object the fake Kubernetes API server serves, one table: for each, its API
group, version and resource, the object a user would create, how many pods it wants, and
the status its controller would write. Jobs (batch/v1), Deployments and StatefulSets
(apps/v1) are Kubernetes' own; JobSets (jobset.x-k8s.io/v1alpha2), RayJobs (ray.io/v1, from
KubeRay) and PyTorchJobs (kubeflow.org/v1, from the Kubeflow training operator) are custom
resources, shaped by their published CustomResourceDefinitions and controllers.

Another kind joins with `register` (its module imported before the server is made): a
subclass of `FakeKind` saying what it serves.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

# A finished workload's condition or status as its controller writes it, by the word a test
# finishes it with (FakeKubernetes.finish): "Complete" or "Failed".
FINISHES = ("Complete", "Failed")


def timestamp(at: datetime) -> str:
    """A time as the API server writes it: RFC 3339 in UTC, to the second."""
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class Seen:
    """A workload as its controller sees it when writing its status: its spec, the pods it
    has now (0 once they have exited), how it finished (None, "Complete" or "Failed"), when
    it first had pods, when its pods last changed, and its name."""

    spec: dict[str, Any]
    pods: int
    finished: str | None
    started: datetime | None
    changed: datetime
    name: str


@dataclass(frozen=True)
class FakeKind:
    """A kind the server serves: `ref` is its word in a ref, `scale` whether it has a scale
    subresource the server serves, `fields` the fields its spec may hold (a custom resource's
    API server prunes any other from a patch, as its structural schema makes it; None: all
    kept)."""

    ref: str
    group: str
    version: str
    resource: str
    object_kind: str
    scale: bool = False
    fields: frozenset[str] | None = None

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"

    def spec(self, name: str, template: dict[str, Any]) -> dict[str, Any]:
        """The spec a user would write, its pods made from `template` (one GPU container
        writing to a persistent claim)."""
        raise NotImplementedError

    def wanted(self, spec: dict[str, Any], finished: str | None) -> int:
        """How many pods a workload with `spec` asks for now."""
        raise NotImplementedError

    def status(self, seen: Seen) -> dict[str, Any]:
        """The status its controller would write; counts of zero are left out, as theirs are."""
        raise NotImplementedError

    def invalid(self, spec: dict[str, Any]) -> str | None:
        """Why the API server would reject a patched spec (422), None if it would not."""
        return None

    def container(self) -> str:
        """The name its GPU container has."""
        return "train"


class JobKind(FakeKind):
    def spec(self, name: str, template: dict[str, Any]) -> dict[str, Any]:
        template["spec"]["restartPolicy"] = "Never"
        return {
            "template": template,
            "parallelism": 1,
            "completions": 1,
            "backoffLimit": 6,
            "suspend": False,
        }

    def wanted(self, spec: dict[str, Any], finished: str | None) -> int:
        return 0 if spec.get("suspend") or finished else int(spec.get("parallelism", 1))

    def status(self, seen: Seen) -> dict[str, Any]:
        status: dict[str, Any] = {"active": seen.pods} if seen.pods else {}
        if seen.started is not None:
            status["startTime"] = timestamp(seen.started)
        if seen.finished:
            count = "succeeded" if seen.finished == "Complete" else "failed"
            status[count] = seen.spec.get("completions") or 1
            status["conditions"] = [{"type": seen.finished, "status": "True"}]
        elif seen.spec.get("suspend"):
            status["conditions"] = [
                {"type": "Suspended", "status": "True", "reason": "JobSuspended"}
            ]
        return status

    def invalid(self, spec: dict[str, Any]) -> str | None:
        return _not_boolean(spec, "suspend")


class ReplicatedKind(FakeKind):
    """A Deployment or StatefulSet: `spec.replicas` pods, scaled through `scale`."""

    def spec(self, name: str, template: dict[str, Any]) -> dict[str, Any]:
        spec: dict[str, Any] = {
            "template": template,
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
        }
        if self.ref == "deployment":
            return spec
        del template["spec"]["volumes"]  # a StatefulSet's claim comes from its template
        return spec | {
            "serviceName": name,
            "volumeClaimTemplates": [
                {
                    "metadata": {"name": "workspace"},
                    "spec": {
                        "accessModes": ["ReadWriteOnce"],
                        "resources": {"requests": {"storage": "100Gi"}},
                    },
                }
            ],
            "persistentVolumeClaimRetentionPolicy": {
                "whenDeleted": "Retain",
                "whenScaled": "Retain",
            },
        }

    def wanted(self, spec: dict[str, Any], finished: str | None) -> int:
        return int(spec.get("replicas", 1))

    def status(self, seen: Seen) -> dict[str, Any]:
        pods = seen.pods
        status = {"replicas": pods, "readyReplicas": pods, "availableReplicas": pods}
        # A StatefulSet's status always has its replicas (its schema requires them).
        kept = ("replicas",) if self.ref == "statefulset" else ()
        return {key: value for key, value in status.items() if value or key in kept}

    def invalid(self, spec: dict[str, Any]) -> str | None:
        replicas = spec.get("replicas", 1)
        if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
            return f"spec.replicas: Invalid value: {replicas!r}: must be greater than or equal to 0"
        return None


class JobSetKind(FakeKind):
    """JobSet: `spec.suspend` suspends its child Jobs (their pods go); its status counts
    child Jobs per replicatedJob and says Completed, Failed or Suspended in conditions
    (jobset.x-k8s.io/v1alpha2: JobSetConditionType, the controller's reasons)."""

    def spec(self, name: str, template: dict[str, Any]) -> dict[str, Any]:
        template["spec"]["restartPolicy"] = "Never"
        job = {"parallelism": 1, "completions": 1, "backoffLimit": 0, "template": template}
        return {
            "replicatedJobs": [{"name": "workers", "replicas": 1, "template": {"spec": job}}],
            "suspend": False,
        }

    def wanted(self, spec: dict[str, Any], finished: str | None) -> int:
        if spec.get("suspend") or finished:
            return 0
        return sum(
            int(each.get("replicas", 1))
            * int(each.get("template", {}).get("spec", {}).get("parallelism", 1))
            for each in spec.get("replicatedJobs", [])
        )

    def status(self, seen: Seen) -> dict[str, Any]:
        suspended = bool(seen.spec.get("suspend")) and not seen.finished
        replicated = []
        for each in seen.spec.get("replicatedJobs", []):
            jobs = int(each.get("replicas", 1))
            replicated.append(
                {
                    "name": each["name"],
                    "active": jobs if seen.pods else 0,
                    "ready": jobs if seen.pods else 0,
                    "succeeded": jobs if seen.finished == "Complete" else 0,
                    "failed": 1 if seen.finished == "Failed" else 0,
                    "suspended": jobs if suspended else 0,
                }
            )
        status: dict[str, Any] = {"replicatedJobsStatus": replicated, "restarts": 0}
        if seen.finished:
            word = "Completed" if seen.finished == "Complete" else "Failed"
            reason, message = (
                ("AllJobsCompleted", "jobset completed successfully")
                if word == "Completed"
                else ("FailedJobs", "jobset failed due to one or more job failures")
            )
            status["terminalState"] = word
            status["conditions"] = [_condition(word, "True", reason, message, seen.changed)]
        elif suspended:
            status["conditions"] = [
                _condition(
                    "Suspended", "True", "SuspendedJobs", "jobset is suspended", seen.changed
                )
            ]
        return status

    def invalid(self, spec: dict[str, Any]) -> str | None:
        return _not_boolean(spec, "suspend")


class RayJobKind(FakeKind):
    """RayJob (KubeRay): `spec.suspend` deletes its RayCluster, whose head and workers are
    its pods, and its status.jobDeploymentStatus goes Suspending, then Suspended; unsuspended
    it makes them afresh (Running again). KubeRay refuses to suspend one whose
    `shutdownAfterJobFinishes` is not true; a finished one's cluster goes only where it is."""

    def spec(self, name: str, template: dict[str, Any]) -> dict[str, Any]:
        head = {"spec": {"containers": [{"name": "ray-head", "image": "rayproject/ray:2.46.0"}]}}
        worker = {
            "groupName": "gpu",
            "replicas": 1,
            "minReplicas": 1,
            "maxReplicas": 1,
            "rayStartParams": {},
            "template": template,
        }
        return {
            "entrypoint": "python /workspace/train.py",
            "shutdownAfterJobFinishes": True,
            "suspend": False,
            "rayClusterSpec": {
                "rayVersion": "2.46.0",
                "headGroupSpec": {"rayStartParams": {}, "template": head},
                "workerGroupSpecs": [worker],
            },
        }

    def wanted(self, spec: dict[str, Any], finished: str | None) -> int:
        if spec.get("suspend") or (finished and spec.get("shutdownAfterJobFinishes")):
            return 0
        cluster = spec.get("rayClusterSpec", {})
        return 1 + sum(
            int(group.get("replicas", group.get("minReplicas", 0)))
            * int(group.get("numOfHosts", 1))
            for group in cluster.get("workerGroupSpecs", [])
        )

    def status(self, seen: Seen) -> dict[str, Any]:
        status: dict[str, Any] = {}
        if seen.started is not None:
            status["startTime"] = timestamp(seen.started)
        if seen.finished:
            status["jobDeploymentStatus"] = seen.finished
            status["jobStatus"] = "SUCCEEDED" if seen.finished == "Complete" else "FAILED"
            status["endTime"] = timestamp(seen.changed)
        elif seen.spec.get("suspend"):
            status["jobDeploymentStatus"] = "Suspending" if seen.pods else "Suspended"
        elif seen.pods:
            status |= {
                "jobDeploymentStatus": "Running",
                "jobStatus": "RUNNING",
                "jobId": f"{seen.name}-job",
                "rayClusterName": f"{seen.name}-raycluster",
            }
        return status

    def invalid(self, spec: dict[str, Any]) -> str | None:
        if spec.get("suspend") is True and spec.get("shutdownAfterJobFinishes") is not True:
            return (
                "The RayJob spec is invalid: a RayJob with shutdownAfterJobFinishes set to "
                "false is not allowed to be suspended"
            )
        return _not_boolean(spec, "suspend")


class PyTorchJobKind(FakeKind):
    """PyTorchJob (Kubeflow training operator, kubeflow.org/v1): `spec.runPolicy.suspend`
    deletes its pods; its status says Created, Running, Suspended, Succeeded or Failed in
    conditions (JobConditionType) and counts active pods per replica type."""

    def spec(self, name: str, template: dict[str, Any]) -> dict[str, Any]:
        master = {"replicas": 1, "restartPolicy": "OnFailure", "template": template}
        return {"pytorchReplicaSpecs": {"Master": master}, "runPolicy": {"suspend": False}}

    def container(self) -> str:
        return "pytorch"  # the training operator finds its container by this name

    def wanted(self, spec: dict[str, Any], finished: str | None) -> int:
        if spec.get("runPolicy", {}).get("suspend") or finished:
            return 0
        return sum(int(each.get("replicas", 1)) for each in spec["pytorchReplicaSpecs"].values())

    def status(self, seen: Seen) -> dict[str, Any]:
        name, at = seen.name, seen.changed
        created = _condition(
            "Created", "True", "PyTorchJobCreated", f"PyTorchJob {name} is created.", at
        )
        conditions = [created]
        suspended = bool(seen.spec.get("runPolicy", {}).get("suspend"))
        if seen.finished:
            word = "Succeeded" if seen.finished == "Complete" else "Failed"
            ended = "successfully completed" if word == "Succeeded" else "failed"
            said = f"PyTorchJob {name} is {ended}."
            conditions += [
                _condition("Running", "False", f"PyTorchJob{word}", said, at),
                _condition(word, "True", f"PyTorchJob{word}", said, at),
            ]
        elif suspended:
            said = f"PyTorchJob {name} is suspended."
            conditions += [
                _condition("Running", "False", "PyTorchJobSuspended", said, at),
                _condition("Suspended", "True", "PyTorchJobSuspended", said, at),
            ]
        elif seen.pods:
            said = f"PyTorchJob {name} is running."
            conditions.append(_condition("Running", "True", "PyTorchJobRunning", said, at))
        replicas = {
            role: ({"active": int(each.get("replicas", 1))} if seen.pods else {})
            for role, each in seen.spec["pytorchReplicaSpecs"].items()
        }
        status: dict[str, Any] = {"conditions": conditions, "replicaStatuses": replicas}
        if seen.started is not None:
            status["startTime"] = timestamp(seen.started)
        return status

    def invalid(self, spec: dict[str, Any]) -> str | None:
        run_policy = spec.get("runPolicy", {})
        if not isinstance(run_policy, dict):
            return f"spec.runPolicy: Invalid value: {run_policy!r}: must be an object"
        return _not_boolean(run_policy, "suspend", "spec.runPolicy")


KINDS: dict[str, FakeKind] = {}


def register(kind: FakeKind) -> FakeKind:
    """Serves `kind` from every fake API server made from now on."""
    KINDS[kind.ref] = kind
    return kind


for _kind in (
    JobKind("job", "batch", "v1", "jobs", "Job"),
    ReplicatedKind("deployment", "apps", "v1", "deployments", "Deployment", scale=True),
    ReplicatedKind("statefulset", "apps", "v1", "statefulsets", "StatefulSet", scale=True),
    # The top-level fields of each custom resource's spec in its CustomResourceDefinition.
    JobSetKind(
        "jobset",
        "jobset.x-k8s.io",
        "v1alpha2",
        "jobsets",
        "JobSet",
        fields=frozenset(
            [
                "coordinator",
                "failurePolicy",
                "managedBy",
                "network",
                "replicatedJobs",
                "startupPolicy",
                "successPolicy",
                "suspend",
                "ttlSecondsAfterFinished",
                "volumeClaimPolicies",
            ]
        ),
    ),
    RayJobKind(
        "rayjob",
        "ray.io",
        "v1",
        "rayjobs",
        "RayJob",
        fields=frozenset(
            [
                "activeDeadlineSeconds",
                "backoffLimit",
                "clusterSelector",
                "deletionStrategy",
                "entrypoint",
                "entrypointNumCpus",
                "entrypointNumGpus",
                "entrypointResources",
                "jobId",
                "managedBy",
                "metadata",
                "preRunningDeadlineSeconds",
                "rayClusterSpec",
                "runtimeEnvYAML",
                "shutdownAfterJobFinishes",
                "submissionMode",
                "submitterConfig",
                "submitterPodTemplate",
                "suspend",
                "ttlSecondsAfterFinished",
            ]
        ),
    ),
    PyTorchJobKind(
        "pytorchjob",
        "kubeflow.org",
        "v1",
        "pytorchjobs",
        "PyTorchJob",
        fields=frozenset({"elasticPolicy", "nprocPerNode", "pytorchReplicaSpecs", "runPolicy"}),
    ),
):
    register(_kind)


def manifest(namespace: str, kind: str, name: str, version: int, at: datetime) -> dict[str, Any]:
    """A workload as a user would create it: one GPU container writing to a persistent
    claim mounted at /workspace."""
    served = KINDS[kind]
    container = {
        "name": served.container(),
        "image": "trainer:latest",
        "resources": {"limits": {"nvidia.com/gpu": 1}},
        "volumeMounts": [{"name": "workspace", "mountPath": "/workspace"}],
    }
    volumes = [{"name": "workspace", "persistentVolumeClaim": {"claimName": f"{name}-workspace"}}]
    template: dict[str, Any] = {
        "metadata": {"labels": {"app": name}},
        "spec": {"volumes": volumes, "containers": [container]},
    }
    return {
        "apiVersion": served.api_version,
        "kind": served.object_kind,
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": str(uuid.uuid4()),
            "resourceVersion": str(version),
            "generation": 1,
            "creationTimestamp": timestamp(at),
        },
        "spec": served.spec(name, template),
    }


def _condition(kind: str, status: str, reason: str, message: str, at: datetime) -> dict[str, Any]:
    return {
        "type": kind,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": timestamp(at),
    }


def _not_boolean(section: dict[str, Any], key: str, where: str = "spec") -> str | None:
    if not isinstance(section.get(key, False), bool):
        return f"{where}.{key}: Invalid value: {section[key]!r}: must be a boolean"
    return None
