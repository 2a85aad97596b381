"""Workloads read into pod groups and priced as launches: every kind the admission webhook sees
and a Kueue Workload's pod sets; GPUs per pod by the effective-request rule; the GPU model from
the node selector or a required node affinity."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import kubernetes_validate
import pytest

from governor.domain.errors import Invalid
from governor.domain.kube_workloads import (
    MAX_HOURS_ANNOTATION,
    PodGroup,
    gpu_models,
    gpus_per_pod,
    launch_request,
    pod_groups,
    pod_sets,
    requests_gpus,
)
from governor.domain.launch_gate import Candidate, price
from governor.domain.rate_card import Rate, RateCard
from tests import kube_objects as k

H100 = "NVIDIA-H100-80GB-HBM3"
A100 = "NVIDIA-A100-SXM4-80GB"
CARD = RateCard.of({f"kubernetes:{H100}": "4.00", f"kubernetes:{A100}": "2.50"})


def _rates(c: Candidate) -> Rate | None:
    assert c.accelerator is not None
    return CARD.rate(c.provider, c.accelerator, spot=c.spot, region=c.region)


def _counts(obj: dict[str, Any]) -> list[tuple[str, int, int]]:
    return [(g.name, g.count, g.gpus_per_pod) for g in pod_groups(obj)]


def _tpl(model: object) -> dict[str, Any]:
    return k.serialised(model)


def test_a_job_runs_its_parallelism_at_once_whatever_its_completions() -> None:
    assert _counts(k.job(gpus=2)) == [("job", 1, 2)]
    assert _counts(k.job(gpus=8, parallelism=4, completions=100)) == [("job", 4, 8)]
    assert _counts(k.job(gpus=8, parallelism=0)) == [("job", 0, 8)]


def test_a_pod_a_deployment_and_a_statefulset() -> None:
    assert _counts(k.pod(gpus=1)) == [("pod", 1, 1)]
    assert _counts(k.deployment(gpus=2)) == [("deployment", 1, 2)]  # replicas default to 1
    assert _counts(k.deployment(gpus=2, replicas=3)) == [("deployment", 3, 2)]
    assert _counts(k.deployment(gpus=4, replicas=2, kind="StatefulSet")) == [("statefulset", 2, 4)]


def test_a_jobset_is_replicas_times_each_jobs_parallelism() -> None:
    found = _counts(k.jobset("js", [("driver", 1, 1, 0), ("workers", 3, 4, 8)]))
    assert found == [("driver", 1, 0), ("workers", 12, 8)]


def test_a_rayjob_is_its_head_and_its_workers_at_their_maximum_when_it_autoscales() -> None:
    workers = [
        {"groupName": "gpu", "replicas": 2, "minReplicas": 1, "maxReplicas": 6, "gpus": 1},
        {"groupName": "multi", "replicas": 1, "numOfHosts": 4, "gpus": 8},
    ]
    fixed = _counts(k.rayjob("rj", 0, workers))
    assert fixed == [("head", 1, 0), ("gpu", 2, 1), ("multi", 4, 8)]
    scaling = _counts(k.rayjob("rj", 0, workers, autoscaling=True))
    assert scaling == [("head", 1, 0), ("gpu", 6, 1), ("multi", 4, 8)]
    on_an_existing_cluster = {"apiVersion": "ray.io/v1", "kind": "RayJob", "spec": {}}
    assert pod_groups(on_an_existing_cluster) == ()


def test_a_pytorchjob_is_each_replica_type() -> None:
    found = _counts(k.pytorchjob("pt", {"Master": (1, 8), "Worker": (3, 8)}))
    assert found == [("Master", 1, 8), ("Worker", 3, 8)]
    elastic = k.pytorchjob("pt", {"Worker": (2, 1)})
    elastic["spec"]["elasticPolicy"] = {"minReplicas": 1, "maxReplicas": 5}
    assert _counts(elastic) == [("Worker", 5, 1)]


def test_a_kueue_workloads_pod_sets_are_pod_groups() -> None:
    workload = {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "Workload",
        "spec": {
            "podSets": [
                {"name": "main", "count": 4, "template": _tpl(k.template(2, model=H100))},
                {"name": "launcher", "count": 1, "template": _tpl(k.template(0))},
            ]
        },
    }
    groups = pod_sets(workload)
    assert [(g.name, g.count, g.gpus_per_pod, g.gpu_models) for g in groups] == [
        ("main", 4, 2, (H100,)),
        ("launcher", 1, 0, ()),
    ]


def test_gpus_per_pod_follow_the_effective_request_rule() -> None:
    two_containers = k.template(
        containers=[k.container("a", 2), k.container("b", 1, requests_only=True)]
    )
    assert gpus_per_pod(_tpl(two_containers)) == 3
    big_init = k.template(1, init_containers=[k.container("warm", 4)])
    assert gpus_per_pod(_tpl(big_init)) == 4  # the init container's 4 > the containers' 1
    small_init = k.template(4, init_containers=[k.container("warm", 1)])
    assert gpus_per_pod(_tpl(small_init)) == 4
    sidecar = k.container("sidecar", 1)
    sidecar.restart_policy = "Always"
    assert gpus_per_pod(_tpl(k.template(2, init_containers=[sidecar]))) == 3
    assert gpus_per_pod(_tpl(k.template(0))) == 0


def test_the_gpu_model_from_the_node_selector_or_a_required_affinity() -> None:
    assert gpu_models(_tpl(k.template(1, model=H100))) == (H100,)
    assert gpu_models(_tpl(k.template(1, affinity_models=[A100]))) == (A100,)
    assert gpu_models(_tpl(k.template(1, affinity_models=[A100, H100]))) == (A100, H100)
    assert gpu_models(_tpl(k.template(1))) == ()
    preferred_only = _tpl(k.template(1))
    preferred_only["spec"]["affinity"] = {
        "nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 1,
                    "preference": {
                        "matchExpressions": [{"key": k.PRODUCT, "operator": "In", "values": [H100]}]
                    },
                }
            ]
        }
    }
    assert gpu_models(preferred_only) == ()  # a preference binds nothing


def test_one_group_is_priced_as_its_pods_at_the_dearest_model() -> None:
    job = k.job(gpus=8, parallelism=2, affinity_models=[A100, H100])
    meta = job["metadata"]
    request = launch_request(
        pod_groups(job), {"governor-budget": "research"}, {MAX_HOURS_ANNOTATION: "1.5"}
    )
    assert request.budget_ref == "research"
    assert request.max_hours == Decimal("1.5")
    assert request.tool == "kubernetes" and request.nodes == 2 and meta["name"] == "train"
    priced = price(request, Decimal("1.5"), _rates)
    assert priced.per_hour == Decimal("64.00")  # 8 x $4.00 x 2 pods, H100 the dearer
    assert priced.total == Decimal("96.00")
    assert priced.arithmetic.startswith(f"8 x {H100} at $4.00/h per GPU")


def test_several_groups_are_summed_each_at_its_own_model() -> None:
    rj = k.rayjob("rj", 0, [{"groupName": "big", "replicas": 2, "gpus": 8}], model=H100)
    rj["spec"]["rayClusterSpec"]["workerGroupSpecs"].append(
        {
            "groupName": "small",
            "replicas": 4,
            "rayStartParams": {},
            "template": _tpl(k.template(1, model=A100)),
        }
    )
    request = launch_request(pod_groups(rj), {}, {"governor-budget": "research"})
    assert request.budget_ref == "research"  # an annotation names it as well as a label
    assert request.max_hours is None and request.nodes == 6
    priced = price(request, Decimal(2), _rates)
    assert priced.per_hour == Decimal("74.00")  # 2 x 8 x $4.00 + 4 x 1 x $2.50
    assert priced.total == Decimal("148.00")
    assert priced.arithmetic == (
        f"(big: 8 x {H100} at $4.00/h per GPU (rate card kubernetes:{H100.lower()}) x 2 nodes"
        f" + small: 1 x {A100} at $2.50/h per GPU (rate card kubernetes:{A100.lower()}) x 4"
        " nodes) x 2 h = $148.00"
    )


def test_a_kueue_flavor_names_the_model_and_an_unnamed_model_is_unpriced() -> None:
    groups = (PodGroup("main", 2, _tpl(k.template(4))),)
    flavored = launch_request(groups, {}, {}, gpu_model_override=A100, tool="kueue")
    assert flavored.tool == "kueue"
    assert price(flavored, Decimal(1), _rates).total == Decimal("20.00")
    unnamed = price(launch_request(groups, {}, {}), Decimal(1), _rates)
    assert unnamed.total == Decimal(0)
    assert [c.accelerator for c in unnamed.unpriced] == ["any GPU"]


def test_a_workload_without_gpus_asks_for_none() -> None:
    assert not requests_gpus(pod_groups(k.deployment(gpus=0, replicas=5)))
    assert not requests_gpus(pod_groups(k.job(gpus=4, parallelism=0)))
    assert requests_gpus(pod_groups(k.job(gpus=1)))
    request = launch_request(pod_groups(k.pod(gpus=0)), {}, {})
    assert request.candidates == () and price(request, Decimal(1), _rates).total == 0


@pytest.mark.parametrize("hours", ["0", "-1", "abc", "NaN", "Infinity", "10000"])
def test_a_bad_max_hours_annotation_is_refused_saying_what_to_write(hours: str) -> None:
    with pytest.raises(Invalid, match=r"governor-max-hours.*decimal hours"):
        launch_request(pod_groups(k.job()), {}, {MAX_HOURS_ANNOTATION: hours})


def test_malformed_objects_are_invalid_not_crashes() -> None:
    bad_gpus = k.job()
    bad_gpus["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"][k.GPU] = "1.5"
    bad = [
        bad_gpus,
        {**k.job(), "spec": {"parallelism": "two", "template": {"spec": {}}}},
        {**k.job(), "spec": {"template": {"spec": {"containers": {"a": 1}}}}},
        {**k.deployment(), "spec": []},
        {"apiVersion": "v1", "kind": "Service", "spec": {}},
        {"apiVersion": "ray.io/v1", "kind": "RayJob", "spec": {"rayClusterSpec": 3}},
    ]
    for obj in bad:
        with pytest.raises(Invalid):
            groups = pod_groups(obj)
            launch_request(groups, {}, {})


def test_objects_built_with_the_client_validate_against_kubernetes() -> None:
    built = (k.job(gpus=2, model=H100), k.pod(), k.deployment(), k.deployment(kind="StatefulSet"))
    for obj in built:
        kubernetes_validate.validate(obj, "1.37.0", strict=True)
