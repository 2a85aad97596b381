"""The Kubernetes adapter against the fake API server, over real HTTP on a thread.

Jobs are suspended, Deployments and StatefulSets scaled to zero after their replica count
is recorded, and resumed (unsuspended, scaled back to that count; a workload the governor did
not stop, or a finished Job, is refused); a workload whose volumes die with its pods is
refused; every answer the API
server can give is classified (NotFound, Conflict, 429 with Retry-After or only
`retryAfterSeconds`, 5xx, timeouts, bodies that are not JSON, a refused token); listing
shows every kind RBAC lets the token list. (JobSets, RayJobs and PyTorchJobs:
test_kubernetes_training.py.) Whatever happens, nothing is deleted and the token
never appears in an error or a log line.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import pytest

from governor.adapters.providers.kubernetes import (
    REPLICAS_ANNOTATION,
    STOP_LATENCY_S,
    BearerToken,
    KubernetesProvider,
)
from governor.domain.model import PodState
from governor.domain.ports import (
    CallOutcome,
    ListsPods,
    ProviderError,
    Resumes,
    StopsPreserving,
)
from governor.fakes.http_cloud import HOLD, FakeRequest, now, running
from governor.fakes.kubernetes import FakeKubernetes
from tests.clock import FrozenClock
from tests.fake_clouds import TIMEOUT_S, Served

TOKEN = "eyJhbGciOiJSUzI1NiJ9.UNIT_TEST_SECRET_TOKEN.c2lnbmF0dXJl"
JOB = "ml/job/train-llama"
DEPLOYMENT = "ml/deployment/notebook"
STATEFULSET = "ml/statefulset/trainer"
EPHEMERAL = {
    "template": {
        "spec": {
            "volumes": [
                {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}},
            ]
        }
    }
}


class Cluster(Served[FakeKubernetes]):
    def patches(self) -> list[str]:
        return self.fake.calls("PATCH")

    def spec(self, ref: str) -> dict[str, Any]:
        return self.fake.workloads[ref].spec

    def patch(self, path: str, body: dict[str, Any], content_type: str) -> httpx.Response:
        """A change made by someone else (kubectl, a GitOps controller)."""
        headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": content_type}
        return httpx.patch(f"{self.url}{path}", json=body, headers=headers, timeout=TIMEOUT_S)


def _serve(fake: FakeKubernetes) -> Iterator[Cluster]:
    fake.add_pod(JOB, "2.50")
    fake.add_pod(DEPLOYMENT, "1.20", {"replicas": 2})
    fake.add_pod(STATEFULSET, "3600")
    with running(fake) as server:
        yield Cluster(fake, server.url)
    assert fake.calls("DELETE") == [] and fake.deletions == []


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    yield from _serve(FakeKubernetes(tmp_path / "kubernetes.json", TOKEN))


@pytest.fixture
def slow_cluster(tmp_path: Path, near_now: FrozenClock) -> Iterator[Cluster]:
    """Pods take 0.3 s of the cluster's clock (`near_now`) to exit after they are told to."""
    fake = FakeKubernetes(tmp_path / "kubernetes.json", TOKEN, stop_delay_s=0.3)
    fake.clock = near_now.now
    yield from _serve(fake)


@pytest.fixture
def kubernetes(cluster: Cluster) -> Iterator[KubernetesProvider]:
    with cluster.client() as client:
        yield KubernetesProvider(BearerToken(client, TOKEN, cluster.url))


@pytest.mark.parametrize("ref", [JOB, DEPLOYMENT, STATEFULSET])
def test_describe_a_running_workload(kubernetes: KubernetesProvider, ref: str) -> None:
    pod = kubernetes.describe(ref)
    assert pod.state is PodState.RUNNING
    assert pod.hourly_rate_usd is None and pod.storage is None  # Kubernetes has no prices
    assert pod.cannot_preserve is None
    assert kubernetes.stop_latency_s == STOP_LATENCY_S == 60.0
    assert isinstance(kubernetes, StopsPreserving) and not hasattr(kubernetes, "delete")
    assert isinstance(kubernetes, ListsPods)


def test_stopping_a_job_suspends_it(kubernetes: KubernetesProvider, cluster: Cluster) -> None:
    first = kubernetes.stop(JOB)
    assert first.outcome is CallOutcome.PENDING and "suspended" in first.detail
    assert cluster.spec(JOB)["suspend"] is True
    assert cluster.patches() == ["PATCH /apis/batch/v1/namespaces/ml/jobs/train-llama"]
    assert kubernetes.stop(JOB).outcome is CallOutcome.DONE  # its pods have exited
    assert kubernetes.describe(JOB).state is PodState.STOPPED
    again = kubernetes.stop(JOB)
    assert again.outcome is CallOutcome.DONE and "already stopped" in again.detail
    assert len(cluster.patches()) == 1  # never sent again


@pytest.mark.parametrize(("ref", "replicas"), [(DEPLOYMENT, "2"), (STATEFULSET, "1")])
def test_stopping_a_deployment_or_statefulset_scales_it_to_zero(
    kubernetes: KubernetesProvider, cluster: Cluster, ref: str, replicas: str
) -> None:
    namespace, kind, name = ref.split("/")
    first = kubernetes.stop(ref)
    assert first.outcome is CallOutcome.PENDING and "scaled to zero" in first.detail
    path = f"/apis/apps/v1/namespaces/{namespace}/{kind}s/{name}"
    assert cluster.patches() == [f"PATCH {path}", f"PATCH {path}/scale"]
    metadata = cluster.fake.workloads[ref].manifest["metadata"]
    assert metadata["annotations"] == {REPLICAS_ANNOTATION: replicas}  # to restore it later
    assert cluster.spec(ref)["replicas"] == 0
    assert kubernetes.stop(ref).outcome is CallOutcome.DONE
    assert kubernetes.stop(ref).outcome is CallOutcome.DONE
    assert len(cluster.patches()) == 2


@pytest.mark.parametrize(("ref", "patches"), [(JOB, 1), (DEPLOYMENT, 2)])
def test_pods_still_exiting_are_pending_and_not_asked_again(
    slow_cluster: Cluster, near_now: FrozenClock, ref: str, patches: int
) -> None:
    with slow_cluster.client() as client:
        kubernetes = KubernetesProvider(BearerToken(client, TOKEN, slow_cluster.url))
        assert kubernetes.stop(ref).outcome is CallOutcome.PENDING
        assert kubernetes.describe(ref).state is PodState.STOPPING
        waiting = kubernetes.stop(ref)
        assert waiting.outcome is CallOutcome.PENDING and "still exiting" in waiting.detail
        assert len(slow_cluster.patches()) == patches  # asked once
        near_now.advance(0.35)
        assert kubernetes.stop(ref).outcome is CallOutcome.DONE
        assert kubernetes.describe(ref).state is PodState.STOPPED


def test_the_bill_stops_when_the_pods_stop(
    kubernetes: KubernetesProvider, cluster: Cluster
) -> None:
    assert kubernetes.stop(STATEFULSET).outcome is CallOutcome.PENDING
    workload = cluster.fake.workloads[STATEFULSET]
    ended = workload.runs[-1][1]
    assert ended is not None
    stopped_at = datetime.fromisoformat(ended)
    later = stopped_at + timedelta(hours=1)
    assert workload.bill_usd(later) == workload.bill_usd(stopped_at) > Decimal(0)


@pytest.mark.parametrize("condition", ["Complete", "Failed"])
def test_a_finished_job_is_stopped(
    kubernetes: KubernetesProvider, cluster: Cluster, condition: str
) -> None:
    cluster.fake.finish(JOB, condition)
    assert kubernetes.describe(JOB).state is PodState.STOPPED
    assert kubernetes.stop(JOB).outcome is CallOutcome.DONE
    assert cluster.patches() == []


def test_a_generic_ephemeral_volume_is_refused(
    kubernetes: KubernetesProvider, cluster: Cluster
) -> None:
    cluster.fake.add_pod("ml/job/scratchy", "1", EPHEMERAL)
    said = kubernetes.describe("ml/job/scratchy").cannot_preserve
    assert said is not None and "'scratch'" in said and "generic ephemeral volume" in said
    result = kubernetes.stop("ml/job/scratchy")
    assert result.outcome is CallOutcome.PERMANENT and "'scratch'" in result.detail
    assert cluster.patches() == []


def test_a_statefulset_deleting_its_claims_on_scale_down_is_refused(
    kubernetes: KubernetesProvider, cluster: Cluster
) -> None:
    policy = {"persistentVolumeClaimRetentionPolicy": {"whenScaled": "Delete"}}
    cluster.fake.add_pod("ml/statefulset/db", "1", policy)
    said = kubernetes.describe("ml/statefulset/db").cannot_preserve
    assert said is not None and "whenScaled is Delete" in said
    assert kubernetes.stop("ml/statefulset/db").outcome is CallOutcome.PERMANENT
    assert cluster.patches() == [] and cluster.spec("ml/statefulset/db")["replicas"] == 1


@pytest.mark.parametrize("ref", ["ml/job/nope", "ml/deployment/nope", "other/statefulset/x"])
def test_a_workload_that_is_not_there(
    kubernetes: KubernetesProvider, cluster: Cluster, ref: str
) -> None:
    with pytest.raises(ProviderError, match=f"no such {ref.split('/')[1]}") as caught:
        kubernetes.describe(ref)
    assert caught.value.retryable is False
    result = kubernetes.stop(ref)
    assert result.outcome is CallOutcome.DONE and "gone" in result.detail
    assert cluster.patches() == []


def test_a_404_that_names_no_object_is_not_taken_for_gone(cluster: Cluster) -> None:
    """A wrong URL answers 404 too: the pod is not stopped, so that must not read as done."""
    with cluster.client() as client:
        result = KubernetesProvider(BearerToken(client, TOKEN, f"{cluster.url}/wrong")).stop(JOB)
    assert result.outcome is CallOutcome.PERMANENT and "HTTP 404" in result.detail


@pytest.mark.parametrize(
    "ref", ["train-llama", "ml/pod/x", "ml/job/", "ml/job/x/y", "../job/x", "ML/job/x", "ml/Job/x"]
)
def test_a_malformed_ref_names_the_expected_form(
    kubernetes: KubernetesProvider, cluster: Cluster, ref: str
) -> None:
    with pytest.raises(ProviderError, match="<namespace>/<kind>/<name>") as caught:
        kubernetes.describe(ref)
    assert caught.value.retryable is False
    result = kubernetes.stop(ref)
    assert result.outcome is CallOutcome.PERMANENT and "ml/job/train-llama" in result.detail
    assert cluster.fake.calls() == []


def test_a_conflict_whose_cause_stopped_the_workload_is_done(cluster: Cluster) -> None:
    """Between the adapter's read and its patch someone else scales the deployment to zero:
    the annotation's resourceVersion no longer matches (409), and the re-read finds it stopped."""

    def meanwhile(request: httpx.Request) -> None:
        if request.method == "PATCH" and not cluster.patches():
            scale = "/apis/apps/v1/namespaces/ml/deployments/notebook/scale"
            body = {"spec": {"replicas": 0}}
            assert cluster.patch(scale, body, "application/merge-patch+json").status_code == 200

    with cluster.client(event_hooks={"request": [meanwhile]}) as client:
        result = KubernetesProvider(BearerToken(client, TOKEN, cluster.url)).stop(DEPLOYMENT)
    assert result.outcome is CallOutcome.DONE, result
    assert "annotations" not in cluster.fake.workloads[DEPLOYMENT].manifest["metadata"]


def test_a_conflict_on_a_workload_still_running_is_retryable(
    kubernetes: KubernetesProvider, cluster: Cluster
) -> None:
    cluster.answer_next("", "status:409")
    result = kubernetes.stop(JOB)
    assert result.outcome is CallOutcome.RETRYABLE and "409" in result.detail
    assert kubernetes.stop(JOB).outcome is CallOutcome.PENDING  # the next try goes through


@pytest.mark.parametrize(
    ("answer", "outcome", "says", "retry_after_s"),
    [
        ("429", CallOutcome.RETRYABLE, "rate limited", None),
        ("429:7", CallOutcome.RETRYABLE, "retry after 7 s", 7.0),
        ("throttled:5", CallOutcome.RETRYABLE, "retry after 5 s", 5.0),
        ("500", CallOutcome.RETRYABLE, "HTTP 500 InternalError", None),
        ("status:503", CallOutcome.RETRYABLE, "HTTP 503 ServiceUnavailable", None),
        (HOLD, CallOutcome.RETRYABLE, "timed out", None),
        ("malformed", CallOutcome.RETRYABLE, "not JSON", None),
        ("status:403", CallOutcome.PERMANENT, "HTTP 403 Forbidden: canned HTTP 403", None),
        ("status:401", CallOutcome.PERMANENT, "HTTP 401 Unauthorized", None),
    ],
)
def test_failed_stops_are_classified(
    kubernetes: KubernetesProvider,
    cluster: Cluster,
    answer: str,
    outcome: CallOutcome,
    says: str,
    retry_after_s: float | None,
) -> None:
    cluster.answer_next(answer)
    result = kubernetes.stop(JOB)
    assert result.outcome is outcome, result
    assert says in result.detail and result.detail.startswith("kubernetes ")
    assert result.retry_after_s == retry_after_s
    assert TOKEN not in result.detail
    assert kubernetes.stop(JOB).outcome is CallOutcome.PENDING  # the next try goes through


def test_a_failed_patch_is_classified_too(kubernetes: KubernetesProvider, cluster: Cluster) -> None:
    cluster.answer_next("", "", "status:500")  # the read, the annotation, then the scale
    assert kubernetes.stop(DEPLOYMENT).outcome is CallOutcome.RETRYABLE
    assert kubernetes.stop(DEPLOYMENT).outcome is CallOutcome.PENDING
    assert cluster.spec(DEPLOYMENT)["replicas"] == 0
    annotations = cluster.fake.workloads[DEPLOYMENT].manifest["metadata"]["annotations"]
    assert annotations == {REPLICAS_ANNOTATION: "2"}  # recorded again, unchanged


def test_resuming_a_suspended_job_unsuspends_it(
    kubernetes: KubernetesProvider, cluster: Cluster
) -> None:
    assert isinstance(kubernetes, Resumes)
    kubernetes.stop(JOB)
    assert kubernetes.describe(JOB).state is PodState.STOPPED
    result = kubernetes.resume(JOB)
    assert result.outcome is CallOutcome.DONE, result
    assert cluster.spec(JOB)["suspend"] is False
    assert cluster.patches() == ["PATCH /apis/batch/v1/namespaces/ml/jobs/train-llama"] * 2
    assert kubernetes.describe(JOB).state is PodState.RUNNING
    assert len(cluster.fake.workloads[JOB].runs) == 2  # its pods run, and bill, again
    again = kubernetes.resume(JOB)
    assert again.outcome is CallOutcome.DONE and "already running" in again.detail
    assert len(cluster.patches()) == 2


@pytest.mark.parametrize(("ref", "replicas"), [(DEPLOYMENT, 2), (STATEFULSET, 1)])
def test_resuming_scales_back_to_the_replicas_the_stop_recorded(
    kubernetes: KubernetesProvider, cluster: Cluster, ref: str, replicas: int
) -> None:
    namespace, kind, name = ref.split("/")
    kubernetes.stop(ref)
    result = kubernetes.resume(ref)
    assert result.outcome is CallOutcome.DONE and f"{replicas} replicas" in result.detail
    scale = f"PATCH /apis/apps/v1/namespaces/{namespace}/{kind}s/{name}/scale"
    assert cluster.patches()[-1] == scale and len(cluster.patches()) == 3
    assert cluster.spec(ref)["replicas"] == replicas
    assert kubernetes.describe(ref).state is PodState.RUNNING


@pytest.mark.parametrize("recorded", [None, "two", "0"])
def test_a_workload_scaled_down_by_someone_else_is_not_resumed(
    kubernetes: KubernetesProvider, cluster: Cluster, recorded: str | None
) -> None:
    path = "/apis/apps/v1/namespaces/ml/deployments/notebook"
    annotations = {} if recorded is None else {REPLICAS_ANNOTATION: recorded}
    cluster.patch(path, {"metadata": {"annotations": annotations}}, "application/merge-patch+json")
    cluster.patch(f"{path}/scale", {"spec": {"replicas": 0}}, "application/merge-patch+json")
    result = kubernetes.resume(DEPLOYMENT)
    assert result.outcome is CallOutcome.PERMANENT, result
    assert REPLICAS_ANNOTATION in result.detail and "did not stop it" in result.detail
    assert len(cluster.patches()) == 2  # only the two made by someone else
    assert cluster.spec(DEPLOYMENT)["replicas"] == 0


def test_a_finished_job_cannot_resume(kubernetes: KubernetesProvider, cluster: Cluster) -> None:
    cluster.fake.finish(JOB)
    result = kubernetes.resume(JOB)
    assert result.outcome is CallOutcome.PERMANENT and "finished" in result.detail
    assert cluster.patches() == []


def test_resuming_a_workload_that_is_not_there_is_permanent(
    kubernetes: KubernetesProvider, cluster: Cluster
) -> None:
    result = kubernetes.resume("ml/job/nope")
    assert result.outcome is CallOutcome.PERMANENT and "no such job ml/nope" in result.detail
    assert kubernetes.resume("ml/pod/x").outcome is CallOutcome.PERMANENT  # not a ref
    assert cluster.patches() == []


@pytest.mark.parametrize(
    ("answer", "outcome", "says"),
    [
        ("429", CallOutcome.RETRYABLE, "rate limited"),
        ("500", CallOutcome.RETRYABLE, "HTTP 500"),
        ("malformed", CallOutcome.RETRYABLE, "not JSON"),
        ("status:403", CallOutcome.PERMANENT, "HTTP 403 Forbidden"),
    ],
)
def test_failed_resumes_are_classified(
    kubernetes: KubernetesProvider, cluster: Cluster, answer: str, outcome: CallOutcome, says: str
) -> None:
    kubernetes.stop(DEPLOYMENT)
    cluster.answer_next("", answer)  # the read goes through, the scale fails
    result = kubernetes.resume(DEPLOYMENT)
    assert result.outcome is outcome, result
    assert says in result.detail and TOKEN not in result.detail
    assert cluster.spec(DEPLOYMENT)["replicas"] == 0
    assert kubernetes.resume(DEPLOYMENT).outcome is CallOutcome.DONE  # the next try goes through


def test_a_json_answer_that_is_not_the_workload_is_retryable(
    kubernetes: KubernetesProvider, cluster: Cluster
) -> None:
    cluster.fake.workloads[JOB].manifest["kind"] = "Pod"
    with pytest.raises(ProviderError, match="not a Job") as caught:
        kubernetes.describe(JOB)
    assert caught.value.retryable is True
    assert kubernetes.stop(JOB).outcome is CallOutcome.RETRYABLE
    assert cluster.patches() == []


def test_429_on_describe_carries_the_delay(
    kubernetes: KubernetesProvider, cluster: Cluster
) -> None:
    cluster.answer_next("throttled:4")
    with pytest.raises(ProviderError) as caught:
        kubernetes.describe(JOB)
    assert caught.value.retryable and caught.value.retry_after_s == 4.0


def test_a_wrong_token_is_permanent_and_never_echoed(cluster: Cluster) -> None:
    wrong = "eyJ_WRONG_TOKEN_987"
    with cluster.client() as client:
        result = KubernetesProvider(BearerToken(client, wrong, cluster.url)).stop(JOB)
    assert result.outcome is CallOutcome.PERMANENT and "HTTP 401 Unauthorized" in result.detail
    assert wrong not in result.detail
    assert cluster.spec(JOB)["suspend"] is False


def test_the_fake_takes_only_merge_patches_and_records_deletes(tmp_path: Path) -> None:
    """What makes the tests above able to fail: a plain JSON patch is refused, as a real API
    server refuses it, and a DELETE is honoured and recorded."""
    fake = FakeKubernetes(tmp_path / "kubernetes.json", TOKEN)
    fake.add_pod(JOB, "2.50")
    path = "/apis/batch/v1/namespaces/ml/jobs/train-llama"
    auth = {"authorization": f"Bearer {TOKEN}"}
    plain = {**auth, "content-type": "application/json"}
    refused = fake.serve_request(FakeRequest("PATCH", path, {}, plain, {"spec": {"suspend": True}}))
    assert refused.status == 415 and refused.body["reason"] == "UnsupportedMediaType"
    assert fake.workloads[JOB].spec["suspend"] is False
    assert fake.serve_request(FakeRequest("DELETE", path, {}, {}, None)).status == 401
    deleted = fake.serve_request(FakeRequest("DELETE", path, {}, auth, None))
    assert deleted.status == 200 and JOB not in fake.workloads
    assert [d["ref"] for d in fake.deletions] == [JOB] and fake.calls("DELETE") == [
        f"DELETE {path}"
    ]


def test_no_log_line_carries_the_token(
    kubernetes: KubernetesProvider, cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    cluster.answer_next("429", "500", "malformed", "status:403", HOLD)
    for _ in range(6):
        kubernetes.stop(DEPLOYMENT)
    kubernetes.describe(DEPLOYMENT)
    assert caplog.records, "expected the HTTP client to log its requests"
    assert TOKEN not in caplog.text


LISTS = [
    "/apis/batch/v1/jobs",
    "/apis/apps/v1/deployments",
    "/apis/apps/v1/statefulsets",
    "/apis/jobset.x-k8s.io/v1alpha2/jobsets",
    "/apis/ray.io/v1/rayjobs",
    "/apis/kubeflow.org/v1/pytorchjobs",
]


def test_pods_lists_every_workload_across_namespaces(
    kubernetes: KubernetesProvider, cluster: Cluster
) -> None:
    cluster.fake.add_pod("research/deployment/lab", "1")
    cluster.fake.add_pod("ml/job/scratchy", "1", EPHEMERAL)
    kubernetes.stop(DEPLOYMENT)
    cluster.fake.finish(JOB)
    calls = len(cluster.fake.calls())
    listed = {pod.ref: pod.description for pod in kubernetes.pods()}
    assert cluster.fake.calls()[calls:] == [f"GET {path}" for path in LISTS]
    assert set(listed) == {
        JOB,
        DEPLOYMENT,
        STATEFULSET,
        "research/deployment/lab",
        "ml/job/scratchy",
    }
    assert listed[JOB].state is PodState.STOPPED
    assert listed[DEPLOYMENT].state is PodState.STOPPED  # scaled to zero, claims kept
    assert listed[STATEFULSET].state is PodState.RUNNING
    said = listed["ml/job/scratchy"].cannot_preserve
    assert said is not None and "generic ephemeral volume" in said
    assert listed == {ref: kubernetes.describe(ref) for ref in listed}


def test_pods_leaves_out_a_kind_rbac_forbids(
    kubernetes: KubernetesProvider, cluster: Cluster
) -> None:
    cluster.fake.forbidden = {"jobs", "statefulsets"}
    assert [pod.ref for pod in kubernetes.pods()] == [DEPLOYMENT]


def test_pods_with_every_kind_forbidden_is_the_permanent_refusal(
    kubernetes: KubernetesProvider, cluster: Cluster
) -> None:
    cluster.fake.forbidden = {f"{path.rpartition('/')[2]}" for path in LISTS}
    with pytest.raises(ProviderError, match=r"403 Forbidden: jobs\.batch is forbidden") as caught:
        kubernetes.pods()
    assert caught.value.retryable is False and caught.value.status == 403


@pytest.mark.parametrize(
    ("answers", "retryable", "says"),
    [
        (["throttled:4"], True, "retry after 4 s"),
        (["", "429"], True, "rate limited"),  # the deployments, after the jobs were listed
        (["", "", "500"], True, "HTTP 500 InternalError"),
        (["status:404"], False, "HTTP 404 NotFound"),
        (["malformed"], True, "not JSON"),
    ],
)
def test_failed_lists_are_classified(
    kubernetes: KubernetesProvider,
    cluster: Cluster,
    answers: list[str],
    retryable: bool,
    says: str,
) -> None:
    cluster.answer_next(*answers)
    with pytest.raises(ProviderError, match=says) as caught:
        kubernetes.pods()
    assert caught.value.retryable is retryable and TOKEN not in str(caught.value)


def test_a_listed_workload_without_a_namespace_is_malformed(
    kubernetes: KubernetesProvider, cluster: Cluster
) -> None:
    cluster.fake.workloads[JOB].manifest["metadata"].pop("namespace")
    with pytest.raises(ProviderError, match="without a namespace") as caught:
        kubernetes.pods()
    assert caught.value.retryable


def test_listing_with_a_wrong_token_is_permanent_and_never_echoed(cluster: Cluster) -> None:
    wrong = "eyJ_WRONG_TOKEN_987"
    with (
        cluster.client() as client,
        pytest.raises(ProviderError, match="HTTP 401 Unauthorized") as caught,
    ):
        KubernetesProvider(BearerToken(client, wrong, cluster.url)).pods()
    assert caught.value.retryable is False and wrong not in str(caught.value)


def test_the_fake_runs_from_its_state_file(tmp_path: Path) -> None:
    state = tmp_path / "kubernetes.json"
    FakeKubernetes(state, TOKEN).add_pod(JOB, "2.50")
    again = FakeKubernetes(state, TOKEN)
    assert again.workloads[JOB].running(now())
