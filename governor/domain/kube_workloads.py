"""Kubernetes workloads read as the launch gate reads a launch: their pods in groups of alike
pods (a Job's parallel pods, a JobSet's replicated jobs, a RayJob's head and workers, a
PyTorchJob's master and workers, a Deployment's replicas, a Kueue Workload's pod sets), each
group's GPUs per pod and GPU model read from its pod template.

GPUs per pod are the `nvidia.com/gpu` its containers ask for (limits, else requests), by
Kubernetes' effective-request rule: the larger of the largest init container's and the sum of
the containers' (sidecars, init containers that keep running, count with the containers). The
GPU model is the `nvidia.com/gpu.product` node label the pod must land on: its node selector,
else a required node-affinity `In` term (several values: each a candidate, priced at the
dearest). Each pod is priced as a node of its GPUs at provider `kubernetes`; the rate card's
keys are `kubernetes:<gpu.product value>`.

The budget is the `governor-budget` label (or annotation); the hours the workload may run,
the `governor-max-hours` annotation (decimal hours).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from governor.domain.errors import Invalid
from governor.domain.launch_gate import Candidate, Group, LaunchRequest
from governor.domain.launch_labels import BUDGET_LABEL

GPU_RESOURCE = "nvidia.com/gpu"  # the extended resource NVIDIA's device plugin advertises
GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"  # the node label GPU feature discovery sets
MAX_HOURS_ANNOTATION = "governor-max-hours"
PROVIDER = "kubernetes"
ANY_GPU = "any GPU"  # a group whose template names no GPU model: priced by no rate
MAX_PODS = 100_000  # more pods than any one workload may ask for: a typo, refused
MAX_GPUS = 1024  # more GPUs than one pod may ask for


@dataclass(frozen=True)
class PodGroup:
    """`count` pods alike, made from `template` (a PodTemplateSpec: `{metadata, spec}`)."""

    name: str
    count: int
    template: Mapping[str, Any]

    @property
    def gpus_per_pod(self) -> int:
        return gpus_per_pod(self.template)

    @property
    def gpu_models(self) -> tuple[str, ...]:
        return gpu_models(self.template)


@dataclass(frozen=True)
class Kind:
    """A workload's kind as an admission request or a watch names it."""

    group: str  # "" for the core API
    kind: str

    @classmethod
    def of(cls, obj: Mapping[str, Any]) -> Kind:
        api_version = str(obj.get("apiVersion") or "")
        group = api_version.rpartition("/")[0]
        return cls(group, str(obj.get("kind") or ""))


def gpus_per_pod(template: Mapping[str, Any]) -> int:
    """The GPUs one pod of `template` holds, by the effective-request rule."""
    spec = _map(template.get("spec"), "template.spec")
    sidecars, inits = 0, [0]
    for c in _list(spec.get("initContainers"), "spec.initContainers"):
        if _map(c, "an init container").get("restartPolicy") == "Always":
            sidecars += _gpus(c)
        else:
            inits.append(_gpus(c))
    containers = sum(_gpus(c) for c in _list(spec.get("containers"), "spec.containers"))
    return max(max(inits), containers) + sidecars


def gpu_models(template: Mapping[str, Any]) -> tuple[str, ...]:
    """The GPU models a pod of `template` may land on (empty: it names none)."""
    spec = _map(template.get("spec"), "template.spec")
    selector = _map(spec.get("nodeSelector"), "spec.nodeSelector")
    if selector.get(GPU_PRODUCT_LABEL):
        return (str(selector[GPU_PRODUCT_LABEL]),)
    affinity = _map(_map(spec.get("affinity"), "spec.affinity").get("nodeAffinity"), "affinity")
    required = _map(
        affinity.get("requiredDuringSchedulingIgnoredDuringExecution"), "nodeAffinity.required"
    )
    models: list[str] = []
    for term in _list(required.get("nodeSelectorTerms"), "nodeSelectorTerms"):
        for e in _list(_map(term, "a node selector term").get("matchExpressions"), "expressions"):
            e = _map(e, "a match expression")
            if e.get("key") == GPU_PRODUCT_LABEL and e.get("operator") == "In":
                models += [str(v) for v in _list(e.get("values"), "values") if str(v)]
    return tuple(dict.fromkeys(models))


def pod_groups(obj: Mapping[str, Any]) -> tuple[PodGroup, ...]:
    """The pods a workload runs at once, grouped; Invalid for a kind not read here or an
    object that is not one of its kind."""
    kind = Kind.of(obj)
    reader = _READERS.get((kind.group, kind.kind))
    if reader is None:
        raise Invalid(f"not a workload the governor reads: {kind.kind} of {kind.group or 'core'}")
    return reader(_map(obj.get("spec"), "spec"), obj)


def pod_sets(workload: Mapping[str, Any]) -> tuple[PodGroup, ...]:
    """A Kueue Workload's pod sets (`spec.podSets[]`: name, count, template)."""
    groups = []
    for i, ps in enumerate(_list(_map(workload.get("spec"), "spec").get("podSets"), "podSets")):
        ps = _map(ps, "a pod set")
        name = str(ps.get("name") or f"podSets[{i}]")
        groups.append(PodGroup(name, _count(ps, "count"), _template(ps, f"{name}.template")))
    return tuple(groups)


def requests_gpus(groups: tuple[PodGroup, ...]) -> bool:
    return any(g.count > 0 and g.gpus_per_pod > 0 for g in groups)


def launch_request(
    groups: tuple[PodGroup, ...],
    labels: Mapping[str, str],
    annotations: Mapping[str, str],
    *,
    gpu_model_override: str | None = None,
    tool: str = "kubernetes",
    name: str | None = None,
    user: str | None = None,
    project: str | None = None,
) -> LaunchRequest:
    """The launch the workload is: each GPU pod a node of its GPUs, each group priced at its
    dearest GPU model (`gpu_model_override`, a Kueue flavor's, where given), summed."""
    gpu_groups = []
    for g in groups:
        gpus = g.gpus_per_pod
        if g.count == 0 or gpus == 0:
            continue
        models = (gpu_model_override,) if gpu_model_override else (g.gpu_models or (ANY_GPU,))
        candidates = tuple(Candidate(PROVIDER, m, gpus) for m in models)
        gpu_groups.append(Group(candidates, g.count, g.name))
    budget = labels.get(BUDGET_LABEL) or annotations.get(BUDGET_LABEL)
    return LaunchRequest(
        tool=tool,
        candidates=tuple(c for g in gpu_groups for c in g.candidates),
        nodes=sum(g.nodes for g in gpu_groups) or 1,
        budget_ref=str(budget) if budget else None,
        max_hours=max_hours(annotations),
        user=user,
        project=project,
        name=name,
        groups=tuple(gpu_groups) if len(gpu_groups) > 1 else (),
    )


def max_hours(annotations: Mapping[str, str]) -> Decimal | None:
    """The `governor-max-hours` annotation: positive decimal hours; None when absent."""
    raw = annotations.get(MAX_HOURS_ANNOTATION)
    if raw is None:
        return None
    try:
        hours = Decimal(str(raw).strip())
    except InvalidOperation:
        hours = Decimal("NaN")
    if not hours.is_finite() or hours <= 0 or hours > 24 * 366:
        raise Invalid(
            f"annotation {MAX_HOURS_ANNOTATION}={str(raw)[:40]!r}: want decimal hours, more "
            'than 0 and at most a year (for example "12" or "1.5")'
        )
    return hours


# --- the kinds ----------------------------------------------------------------------------

_Reader = Callable[[Mapping[str, Any], Mapping[str, Any]], tuple[PodGroup, ...]]


def _pod(spec: Mapping[str, Any], obj: Mapping[str, Any]) -> tuple[PodGroup, ...]:
    return (PodGroup("pod", 1, {"metadata": obj.get("metadata") or {}, "spec": spec}),)


def _replicated(spec: Mapping[str, Any], obj: Mapping[str, Any]) -> tuple[PodGroup, ...]:
    """Deployment, StatefulSet: `replicas` (1 when unset) of `template`."""
    name = Kind.of(obj).kind.lower()
    return (PodGroup(name, _count(spec, "replicas"), _template(spec, "spec.template")),)


def _job(spec: Mapping[str, Any], obj: Mapping[str, Any]) -> tuple[PodGroup, ...]:
    """A Job runs `parallelism` pods at once (1 when unset); its completions run in turn."""
    return (PodGroup("job", _count(spec, "parallelism"), _template(spec, "spec.template")),)


def _jobset(spec: Mapping[str, Any], obj: Mapping[str, Any]) -> tuple[PodGroup, ...]:
    """Each replicated job: `replicas` Jobs of its template's parallelism."""
    groups = []
    for i, rj in enumerate(_list(spec.get("replicatedJobs"), "spec.replicatedJobs")):
        rj = _map(rj, "a replicated job")
        job = _map(_map(rj.get("template"), "replicatedJobs[].template").get("spec"), "job spec")
        pods = _count(rj, "replicas") * _count(job, "parallelism")
        name = str(rj.get("name") or f"replicatedJobs[{i}]")
        groups.append(PodGroup(name, pods, _template(job, f"{name}.template.spec.template")))
    return tuple(groups)


def _rayjob(spec: Mapping[str, Any], obj: Mapping[str, Any]) -> tuple[PodGroup, ...]:
    """A RayJob's cluster: one head pod, and each worker group's replicas (its maximum when
    the cluster autoscales, whichever is more) times its hosts."""
    cluster = _map(spec.get("rayClusterSpec"), "spec.rayClusterSpec")
    if not cluster:
        return ()  # it runs on an existing cluster (clusterSelector): no pods of its own
    autoscales = cluster.get("enableInTreeAutoscaling") is True
    head = _map(cluster.get("headGroupSpec"), "rayClusterSpec.headGroupSpec")
    groups = [PodGroup("head", 1, _template(head, "headGroupSpec.template"))]
    for i, w in enumerate(_list(cluster.get("workerGroupSpecs"), "workerGroupSpecs")):
        w = _map(w, "a worker group")
        replicas = _count(w, "replicas")
        if autoscales:
            replicas = max(replicas, _count(w, "maxReplicas", default=replicas))
        name = str(w.get("groupName") or f"workerGroupSpecs[{i}]")
        pods = replicas * _count(w, "numOfHosts")
        groups.append(PodGroup(name, pods, _template(w, f"{name}.template")))
    return tuple(groups)


def _pytorchjob(spec: Mapping[str, Any], obj: Mapping[str, Any]) -> tuple[PodGroup, ...]:
    """Each replica type (Master, Worker): `replicas` pods (1 when unset); an elastic job's
    workers at their maximum where it is more."""
    elastic = _map(spec.get("elasticPolicy"), "spec.elasticPolicy")
    groups = []
    replica_specs = _map(spec.get("pytorchReplicaSpecs"), "spec.pytorchReplicaSpecs")
    for name, rs in sorted(replica_specs.items()):
        rs = _map(rs, f"pytorchReplicaSpecs.{name}")
        replicas = _count(rs, "replicas")
        if name == "Worker" and elastic.get("maxReplicas") is not None:
            replicas = max(replicas, _count(elastic, "maxReplicas"))
        groups.append(PodGroup(str(name), replicas, _template(rs, f"{name}.template")))
    return tuple(groups)


_READERS: dict[tuple[str, str], _Reader] = {
    ("", "Pod"): _pod,
    ("apps", "Deployment"): _replicated,
    ("apps", "StatefulSet"): _replicated,
    ("batch", "Job"): _job,
    ("jobset.x-k8s.io", "JobSet"): _jobset,
    ("ray.io", "RayJob"): _rayjob,
    ("kubeflow.org", "PyTorchJob"): _pytorchjob,
}
KINDS = frozenset(Kind(g, k) for g, k in _READERS)


# --- reading the object safely ------------------------------------------------------------


def _template(section: Mapping[str, Any], where: str) -> Mapping[str, Any]:
    template = _map(section.get("template"), where)
    _map(template.get("spec"), f"{where}.spec")
    return template


def _count(section: Mapping[str, Any], key: str, default: int = 1) -> int:
    value: object = section.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_PODS:
        raise Invalid(f"{key}: want a whole number from 0 to {MAX_PODS}, not {value!r:.40}")
    return value


def _gpus(container: Any) -> int:
    resources = _map(_map(container, "a container").get("resources"), "container.resources")
    for side in ("limits", "requests"):
        value = _map(resources.get(side), f"resources.{side}").get(GPU_RESOURCE)
        if value is None:
            continue
        text = str(value).strip()
        if isinstance(value, bool) or not text.isdigit() or int(text) > MAX_GPUS:
            raise Invalid(
                f"{side} {GPU_RESOURCE}: want a whole number of GPUs up to {MAX_GPUS}, "
                f"not {value!r:.40}"
            )
        return int(text)
    return 0


def _map(value: Any, where: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise Invalid(f"{where}: want an object, not {type(value).__name__}")
    return value


def _list(value: Any, where: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise Invalid(f"{where}: want a list, not {type(value).__name__}")
    return value
