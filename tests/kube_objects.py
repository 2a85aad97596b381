"""Kubernetes workloads as a cluster user writes them: the core, batch and apps kinds built with
the official client's models and serialised as the client sends them; the CRD kinds (JobSet,
RayJob, PyTorchJob) as plain objects of their published shape, their pod templates the
client's."""

from __future__ import annotations

from typing import Any

from kubernetes import client

GPU = "nvidia.com/gpu"
PRODUCT = "nvidia.com/gpu.product"

_API = client.ApiClient()


def serialised(model: object) -> dict[str, Any]:
    found = _API.sanitize_for_serialization(model)
    assert isinstance(found, dict)
    return found


def container(name: str = "train", gpus: int = 0, *, requests_only: bool = False) -> Any:
    resources = None
    if gpus:
        quantity = {GPU: str(gpus)}
        resources = (
            client.V1ResourceRequirements(requests=quantity)
            if requests_only
            else client.V1ResourceRequirements(limits=quantity)
        )
    return client.V1Container(name=name, image="trainer:1", resources=resources)


def pod_spec(
    gpus: int = 0,
    *,
    model: str | None = None,
    affinity_models: list[str] | None = None,
    containers: list[Any] | None = None,
    init_containers: list[Any] | None = None,
) -> Any:
    affinity = None
    if affinity_models:
        affinity = client.V1Affinity(
            node_affinity=client.V1NodeAffinity(
                required_during_scheduling_ignored_during_execution=client.V1NodeSelector(
                    node_selector_terms=[
                        client.V1NodeSelectorTerm(
                            match_expressions=[
                                client.V1NodeSelectorRequirement(
                                    key=PRODUCT, operator="In", values=affinity_models
                                )
                            ]
                        )
                    ]
                )
            )
        )
    return client.V1PodSpec(
        containers=containers or [container(gpus=gpus)],
        init_containers=init_containers,
        node_selector={PRODUCT: model} if model else None,
        affinity=affinity,
        restart_policy="Never",
    )


def template(gpus: int = 0, **kwargs: Any) -> Any:
    return client.V1PodTemplateSpec(
        metadata=client.V1ObjectMeta(labels={"app": "train"}), spec=pod_spec(gpus, **kwargs)
    )


def meta(
    name: str, labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None
) -> Any:
    return client.V1ObjectMeta(
        name=name, namespace="ml", labels=labels or None, annotations=annotations or None
    )


def job(
    name: str = "train",
    gpus: int = 1,
    *,
    parallelism: int | None = None,
    completions: int | None = None,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    **kwargs: Any,
) -> dict[str, Any]:
    return serialised(
        client.V1Job(
            api_version="batch/v1",
            kind="Job",
            metadata=meta(name, labels, annotations),
            spec=client.V1JobSpec(
                parallelism=parallelism,
                completions=completions,
                template=template(gpus, **kwargs),
            ),
        )
    )


def pod(
    name: str = "notebook",
    gpus: int = 1,
    *,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    **kwargs: Any,
) -> dict[str, Any]:
    return serialised(
        client.V1Pod(
            api_version="v1",
            kind="Pod",
            metadata=meta(name, labels, annotations),
            spec=pod_spec(gpus, **kwargs),
        )
    )


def deployment(
    name: str = "serve",
    gpus: int = 1,
    *,
    replicas: int | None = None,
    kind: str = "Deployment",
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    **kwargs: Any,
) -> dict[str, Any]:
    models = {
        "Deployment": (client.V1Deployment, client.V1DeploymentSpec),
        "StatefulSet": (client.V1StatefulSet, client.V1StatefulSetSpec),
    }
    obj, spec = models[kind]
    tpl = template(gpus, **kwargs)
    tpl.spec.restart_policy = "Always"
    extra = {"service_name": name} if kind == "StatefulSet" else {}
    return serialised(
        obj(
            api_version="apps/v1",
            kind=kind,
            metadata=meta(name, labels, annotations),
            spec=spec(
                replicas=replicas,
                selector=client.V1LabelSelector(match_labels={"app": "train"}),
                template=tpl,
                **extra,
            ),
        )
    )


def jobset(
    name: str,
    replicated: list[tuple[str, int, int, int]],  # (name, replicas, parallelism, gpus)
    *,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    **kwargs: Any,
) -> dict[str, Any]:
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": serialised(meta(name, labels, annotations)),
        "spec": {
            "replicatedJobs": [
                {
                    "name": rj,
                    "replicas": replicas,
                    "template": serialised(
                        client.V1JobTemplateSpec(
                            spec=client.V1JobSpec(
                                parallelism=parallelism,
                                completions=parallelism,
                                template=template(gpus, **kwargs),
                            )
                        )
                    ),
                }
                for rj, replicas, parallelism, gpus in replicated
            ]
        },
    }


def rayjob(
    name: str,
    head_gpus: int,
    workers: list[dict[str, Any]],  # {groupName, replicas, gpus, [minReplicas, maxReplicas]}
    *,
    autoscaling: bool = False,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    **kwargs: Any,
) -> dict[str, Any]:
    def group(w: dict[str, Any]) -> dict[str, Any]:
        found = {k: v for k, v in w.items() if k != "gpus"}
        tpl = serialised(template(w["gpus"], **kwargs))
        return {**found, "rayStartParams": {}, "template": tpl}

    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": serialised(meta(name, labels, annotations)),
        "spec": {
            "entrypoint": "python train.py",
            "rayClusterSpec": {
                "enableInTreeAutoscaling": autoscaling,
                "headGroupSpec": {
                    "rayStartParams": {},
                    "template": serialised(template(head_gpus, **kwargs)),
                },
                "workerGroupSpecs": [group(w) for w in workers],
            },
        },
    }


def pytorchjob(
    name: str,
    replicas: dict[str, tuple[int, int]],  # type -> (replicas, gpus)
    *,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    **kwargs: Any,
) -> dict[str, Any]:
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": serialised(meta(name, labels, annotations)),
        "spec": {
            "pytorchReplicaSpecs": {
                kind: {
                    "replicas": count,
                    "restartPolicy": "OnFailure",
                    "template": serialised(template(gpus, **kwargs)),
                }
                for kind, (count, gpus) in replicas.items()
            }
        },
    }
