"""A Kueue Workload read by the admission check controller: its owner's ref, its pod sets'
GPUs, the GPU model from its assigned flavor (else its templates), its hours; and the
AdmissionCheck's Active condition, sent only when it is not current."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pytest

from governor.domain import kueue
from governor.domain.kueue import CheckState, Owner

AT = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
H100, A100 = "NVIDIA-H100-80GB-HBM3", "NVIDIA-A100-SXM4-80GB"
MODELS = {"h100": H100, "a100": A100}


def template(gpus: int, model: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": gpus}}}]
    }
    if model:
        spec["nodeSelector"] = {"nvidia.com/gpu.product": model}
    return {"spec": spec}


def workload(
    pod_sets: list[dict[str, Any]],
    flavors: dict[str, str] | None = None,
    owner_kind: str = "Job",
    **spec: Any,
) -> dict[str, Any]:
    status: dict[str, Any] = {
        "admissionChecks": [
            {"name": "budget", "state": "Pending", "message": "", "lastTransitionTime": "t0"}
        ],
        "conditions": [{"type": "QuotaReserved", "status": "True"}],
    }
    if flavors is not None:
        status["admission"] = {
            "clusterQueue": "q",
            "podSetAssignments": [
                {"name": name, "flavors": {"nvidia.com/gpu": flavor}}
                for name, flavor in flavors.items()
            ],
        }
    return {
        "metadata": {
            "name": "job-train",
            "namespace": "ml",
            "uid": "u-1",
            "resourceVersion": "7",
            "ownerReferences": [
                {"apiVersion": "batch/v1", "kind": owner_kind, "name": "train", "controller": True}
            ],
        },
        "spec": {"podSets": pod_sets, **spec},
        "status": status,
    }


def test_a_workload_is_read_with_its_owner_gpus_and_check_states() -> None:
    w = kueue.read_workload(workload([{"name": "main", "count": 3, "template": template(2)}]))
    assert w.owner == Owner("batch/v1", "Job", "train")
    assert w.owner.ref(w.namespace) == "ml/job/train"
    assert w.gpus == 6 and w.quota_reserved and not w.admitted
    assert w.state("budget") is CheckState.PENDING and w.state("other") is None


@pytest.mark.parametrize(
    ("kind", "ref"),
    [("JobSet", "ml/jobset/train"), ("RayJob", "ml/rayjob/train"), ("Pod", None)],
)
def test_only_the_registrable_owner_kinds_have_a_ref(kind: str, ref: str | None) -> None:
    w = kueue.read_workload(workload([], owner_kind=kind))
    assert w.owner is not None and w.owner.ref(w.namespace) == ref


@pytest.mark.parametrize(
    "broken",
    [
        {"status": {"admissionChecks": [{"name": "budget", "state": "Maybe"}]}},
        {"spec": {"podSets": "main"}},
        {"metadata": {"name": "x"}},
    ],
    ids=["unknown-state", "pod-sets-not-a-list", "no-namespace"],
)
def test_a_workload_that_is_not_one_is_malformed(broken: dict[str, Any]) -> None:
    with pytest.raises(kueue.Malformed):
        kueue.read_workload({**workload([]), **broken})


def test_the_assigned_flavors_gpu_model_prices_it_over_its_templates_selector() -> None:
    obj = workload([{"name": "main", "count": 2, "template": template(4, A100)}], {"main": "h100"})
    request = kueue.launch_request(kueue.read_workload(obj), {"governor-budget": "b"}, {}, MODELS)
    assert [(c.accelerator, c.count) for c in request.candidates] == [(H100, 4)]
    assert (request.nodes, request.budget_ref, request.tool) == (2, "b", "kueue")


def test_a_flavor_of_no_known_model_leaves_the_templates_model() -> None:
    obj = workload([{"name": "main", "template": template(1, A100)}], {"main": "cpu-only"})
    request = kueue.launch_request(kueue.read_workload(obj), {}, {}, MODELS)
    assert [c.accelerator for c in request.candidates] == [A100]


def test_its_hours_are_the_annotation_else_its_maximum_execution_time() -> None:
    obj = workload([{"name": "main", "template": template(1)}], maximumExecutionTimeSeconds=5400)
    read = kueue.read_workload(obj)
    assert kueue.launch_request(read, {}, {}, MODELS).max_hours == Decimal("1.5")
    annotated = kueue.launch_request(read, {}, {"governor-max-hours": "3"}, MODELS)
    assert annotated.max_hours == Decimal(3)


def test_a_check_patch_changes_its_own_checks_and_keeps_the_others_and_the_version() -> None:
    obj = workload([])
    obj["status"]["admissionChecks"].append(
        {"name": "other", "state": "Ready", "message": "ok", "lastTransitionTime": "t1"}
    )
    patch = kueue.check_patch(kueue.read_workload(obj), {"budget": (CheckState.READY, "fits")}, AT)
    assert patch["metadata"] == {"resourceVersion": "7"}
    budget, other = patch["status"]["admissionChecks"]
    assert budget == {
        "name": "budget",
        "state": "Ready",
        "message": "fits",
        "lastTransitionTime": "2026-01-01T12:00:00Z",
    }
    assert other == obj["status"]["admissionChecks"][1]


def test_active_is_sent_when_missing_false_or_of_an_older_generation_only() -> None:
    check: dict[str, Any] = {"metadata": {"name": "budget", "generation": 3}, "spec": {}}
    patch = kueue.active_patch(check, "gpu-governor.io/budget", AT)
    assert patch is not None
    (active,) = patch["status"]["conditions"]
    assert (active["status"], active["observedGeneration"]) == ("True", 3)
    current = {**check, "status": patch["status"]}
    assert kueue.active_patch(current, "gpu-governor.io/budget", AT) is None
    current["metadata"] = {"name": "budget", "generation": 4}
    assert kueue.active_patch(current, "gpu-governor.io/budget", AT) is not None
