"""Which admission requests the webhook judges and which it lets through untouched, the reviews
it refuses to read, and its answer's envelope."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from governor.api.gates.kubernetes import Review, Untouched, judged, read, response
from governor.domain.errors import Invalid
from governor.domain.launch_gate import LaunchRequest
from tests import kube_objects as k

ENVELOPE = Draft202012Validator(
    json.loads(
        (Path(__file__).resolve().parents[2] / "specs/kubernetes/admission-review-v1.json")
        .read_text()
    )
)  # fmt: skip
H100 = "NVIDIA-H100-80GB-HBM3"
LABELS = {"labels": {"governor-budget": "research"}}


def _review(
    obj: dict[str, Any], *, operation: str = "CREATE", old: dict[str, Any] | None = None
) -> Review:
    return Review("uid-1", operation, obj, old or {}, "ml", "alice", False)


def test_a_gpu_job_is_judged_as_a_launch_of_its_namespace_and_user() -> None:
    found = judged(_review(k.job("train", 8, parallelism=2, model=H100, **LABELS)))
    assert isinstance(found, LaunchRequest)
    assert found.name == "Job ml/train" and found.user == "alice" and found.project == "ml"
    assert found.budget_ref == "research" and found.nodes == 2


@pytest.mark.parametrize(
    ("obj", "why"),
    [
        (k.deployment("web", 0, replicas=9), "no pod of it asks for nvidia.com/gpu"),
        (k.job("zero", 4, parallelism=0), "no pod of it asks for nvidia.com/gpu"),
        ({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}}, "a ConfigMap is not judged"),
    ],
)
def test_what_asks_for_no_gpu_is_let_through(obj: dict[str, Any], why: str) -> None:
    assert judged(_review(obj)) == Untouched(why)


def test_objects_made_by_a_judged_workload_are_let_through() -> None:
    pod = k.pod("train-x1", 8, model=H100)
    pod["metadata"]["ownerReferences"] = [
        {"apiVersion": "batch/v1", "kind": "Job", "name": "train", "uid": "u", "controller": True}
    ]
    found = judged(_review(pod))
    assert isinstance(found, Untouched) and "Job" in found.why
    pod["metadata"]["ownerReferences"][0]["kind"] = "Workflow"  # not one the webhook judges
    assert isinstance(judged(_review(pod)), LaunchRequest)


def test_suspended_and_kueue_queued_workloads_are_left_to_their_unsuspension() -> None:
    job = k.job("train", 8, model=H100, **LABELS)
    job["spec"]["suspend"] = True
    found = judged(_review(job))
    assert isinstance(found, Untouched) and found.warning and "unsuspended" in found.warning
    queued = k.job("q", 8, model=H100, labels={"kueue.x-k8s.io/queue-name": "team-a"})
    found = judged(_review(queued))
    assert isinstance(found, Untouched) and found.warning and "Kueue" in found.warning
    pytorch = k.pytorchjob("pt", {"Worker": (2, 8)})
    pytorch["spec"]["runPolicy"] = {"suspend": True}
    assert isinstance(judged(_review(pytorch)), Untouched)


def test_an_update_is_judged_when_it_unsuspends_or_asks_for_more_gpus() -> None:
    old = k.job("train", 8, parallelism=2, model=H100, **LABELS)
    suspended = copy.deepcopy(old)
    suspended["spec"]["suspend"] = True
    same = copy.deepcopy(old)
    same["metadata"]["annotations"] = {"note": "relabelled"}
    more = k.job("train", 8, parallelism=3, model=H100, **LABELS)
    fewer = k.job("train", 8, parallelism=1, model=H100, **LABELS)
    other_model = k.job("train", 8, parallelism=2, model="NVIDIA-B200", **LABELS)
    assert isinstance(judged(_review(old, operation="UPDATE", old=suspended)), LaunchRequest)
    assert isinstance(judged(_review(more, operation="UPDATE", old=old)), LaunchRequest)
    assert isinstance(judged(_review(other_model, operation="UPDATE", old=old)), LaunchRequest)
    assert isinstance(judged(_review(same, operation="UPDATE", old=old)), Untouched)
    assert isinstance(judged(_review(fewer, operation="UPDATE", old=old)), Untouched)
    assert judged(_review(old, operation="DELETE")) == Untouched("a DELETE is not judged")


def test_an_unreadable_workload_is_invalid() -> None:
    bad = k.job("train", 1, model=H100, annotations={"governor-max-hours": "-2"})
    with pytest.raises(Invalid, match="governor-max-hours"):
        judged(_review(bad))


@pytest.mark.parametrize(
    "body",
    [
        [],
        {"kind": "AdmissionReview"},
        {"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview", "request": {}},
        {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"},
        {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {"uid": 1}},
        {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {"uid": "u", "operation": "CREATE", "object": "a string"},
        },
    ],
)
def test_a_review_the_api_server_could_not_have_sent_is_invalid(body: Any) -> None:
    with pytest.raises(Invalid):
        read(body)


def test_the_answer_is_an_admission_review_response() -> None:
    allowed = response("u-1", True, "governor: allowed", code=200, warnings=("budget x: ...",))
    denied = response("u-2", False, "governor: denied", code=403)
    for body in (allowed, denied):
        ENVELOPE.validate(body)
    assert denied["response"] == {
        "uid": "u-2",
        "allowed": False,
        "status": {"code": 403, "message": "governor: denied"},
    }
