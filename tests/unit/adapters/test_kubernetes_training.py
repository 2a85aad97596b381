"""The Kubernetes adapter's JobSets, RayJobs and PyTorchJobs against the fake API server,
over real HTTP on a thread.

Each is suspended through its own field and resumed; one whose pods are still exiting is
stopping; one that finished is not resumed; volumes that die with the pods (in any of its
pod templates) make the adapter refuse; a RayJob KubeRay would not suspend is refused
before anything is sent; listing counts the GPUs of all its pods and leaves out a custom
resource the cluster has not installed. Nothing is ever deleted.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from governor.adapters.providers.kubernetes import BearerToken, KubernetesProvider
from governor.domain.model import PodState
from governor.domain.ports import CallOutcome, ProviderError
from governor.fakes.http_cloud import running
from governor.fakes.kubernetes import FakeKubernetes
from tests.clock import FrozenClock
from tests.fake_clouds import Served

TOKEN = "eyJhbGciOiJSUzI1NiJ9.TRAINING_KINDS_SECRET.c2lnbmF0dXJl"
JOBSET = "ml/jobset/sweep"
RAYJOB = "ml/rayjob/tune"
PYTORCHJOB = "ml/pytorchjob/ddp"
PATHS = {
    JOBSET: "/apis/jobset.x-k8s.io/v1alpha2/namespaces/ml/jobsets/sweep",
    RAYJOB: "/apis/ray.io/v1/namespaces/ml/rayjobs/tune",
    PYTORCHJOB: "/apis/kubeflow.org/v1/namespaces/ml/pytorchjobs/ddp",
}
SCRATCH = {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}}


def _gpu_pod(gpus: int, *volumes: dict[str, Any]) -> dict[str, Any]:
    container = {"name": "pytorch", "resources": {"limits": {"nvidia.com/gpu": gpus}}}
    return {"spec": {"containers": [container], "volumes": list(volumes)}}


class Cluster(Served[FakeKubernetes]):
    def patches(self) -> list[str]:
        return self.fake.calls("PATCH")


def _serve(fake: FakeKubernetes) -> Iterator[Cluster]:
    for ref in PATHS:
        fake.add_pod(ref, "8.00")
    with running(fake) as server:
        yield Cluster(fake, server.url)
    assert fake.calls("DELETE") == [] and fake.deletions == []


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    yield from _serve(FakeKubernetes(tmp_path / "kubernetes.json", TOKEN))


@pytest.fixture
def kubernetes(cluster: Cluster) -> Iterator[KubernetesProvider]:
    with cluster.client() as client:
        yield KubernetesProvider(BearerToken(client, TOKEN, cluster.url))


@pytest.mark.parametrize(
    ("ref", "field"),
    [
        (JOBSET, ("suspend",)),
        (RAYJOB, ("suspend",)),
        (PYTORCHJOB, ("runPolicy", "suspend")),
    ],
)
def test_each_is_suspended_through_its_own_field_and_resumed(
    kubernetes: KubernetesProvider, cluster: Cluster, ref: str, field: tuple[str, ...]
) -> None:
    def suspended() -> Any:
        spec = cluster.fake.workloads[ref].spec
        for key in field:
            spec = spec[key]
        return spec

    first = kubernetes.stop(ref)
    assert first.outcome is CallOutcome.PENDING and "suspended" in first.detail
    assert suspended() is True
    assert cluster.patches() == [f"PATCH {PATHS[ref]}"]
    assert kubernetes.describe(ref).state is PodState.STOPPED
    assert kubernetes.stop(ref).outcome is CallOutcome.DONE
    assert len(cluster.patches()) == 1  # never sent again
    resumed = kubernetes.resume(ref)
    assert resumed.outcome is CallOutcome.DONE and "unsuspended" in resumed.detail
    assert suspended() is False
    assert kubernetes.describe(ref).state is PodState.RUNNING
    assert kubernetes.resume(ref).outcome is CallOutcome.DONE  # already running
    assert len(cluster.patches()) == 2


@pytest.mark.parametrize("ref", list(PATHS))
def test_pods_still_exiting_are_stopping(tmp_path: Path, near_now: FrozenClock, ref: str) -> None:
    fake = FakeKubernetes(tmp_path / "kubernetes.json", TOKEN, stop_delay_s=0.3)
    fake.clock = near_now.now
    with contextmanager(_serve)(fake) as cluster, cluster.client() as client:
        kubernetes = KubernetesProvider(BearerToken(client, TOKEN, cluster.url))
        assert kubernetes.stop(ref).outcome is CallOutcome.PENDING
        stopping = kubernetes.describe(ref)
        assert stopping.state is PodState.STOPPING
        if ref == RAYJOB:
            assert stopping.provider_state == "Suspending" and stopping.state_known
        waiting = kubernetes.stop(ref)
        assert waiting.outcome is CallOutcome.PENDING and "still exiting" in waiting.detail
        near_now.advance(0.35)
        assert kubernetes.stop(ref).outcome is CallOutcome.DONE
        assert kubernetes.describe(ref).state is PodState.STOPPED
        assert len(cluster.patches()) == 1


@pytest.mark.parametrize("ref", list(PATHS))
@pytest.mark.parametrize("condition", ["Complete", "Failed"])
def test_a_finished_one_is_stopped_and_not_resumed(
    kubernetes: KubernetesProvider, cluster: Cluster, ref: str, condition: str
) -> None:
    cluster.fake.finish(ref, condition)
    assert kubernetes.describe(ref).state is PodState.STOPPED
    assert kubernetes.stop(ref).outcome is CallOutcome.DONE
    refused = kubernetes.resume(ref)
    assert refused.outcome is CallOutcome.PERMANENT and "has finished" in refused.detail
    assert cluster.patches() == []


def test_a_finished_rayjob_keeping_its_cluster_runs_on(
    kubernetes: KubernetesProvider, cluster: Cluster
) -> None:
    """Without shutdownAfterJobFinishes KubeRay keeps the cluster of a finished RayJob: its
    pods bill on, and KubeRay would not suspend it, so the stop is refused."""
    ref = "ml/rayjob/kept"
    cluster.fake.add_pod(ref, "8.00", {"shutdownAfterJobFinishes": False})
    cluster.fake.finish(ref)
    described = kubernetes.describe(ref)
    assert described.state is PodState.RUNNING and described.provider_state == "Complete"
    refused = kubernetes.stop(ref)
    assert refused.outcome is CallOutcome.PERMANENT
    assert "shutdownAfterJobFinishes" in refused.detail
    assert cluster.patches() == [] and cluster.fake.workloads[ref].running(cluster.fake.clock())


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ({"shutdownAfterJobFinishes": False}, "shutdownAfterJobFinishes is true"),
        ({"clusterSelector": {"ray.io/cluster": "shared"}}, "spec.clusterSelector"),
    ],
)
def test_a_rayjob_kuberay_would_not_suspend_is_refused_untouched(
    kubernetes: KubernetesProvider, cluster: Cluster, spec: dict[str, Any], says: str
) -> None:
    ref = "ml/rayjob/unsuspendable"
    cluster.fake.add_pod(ref, "8.00", spec)
    refused = kubernetes.stop(ref)
    assert refused.outcome is CallOutcome.PERMANENT and says in refused.detail
    assert refused.detail.startswith("kubernetes: left running, because")
    assert cluster.patches() == []
    assert kubernetes.describe(ref).state is PodState.RUNNING


@pytest.mark.parametrize(
    ("ref", "spec", "where"),
    [
        (
            "ml/pytorchjob/scratchy",
            {
                "pytorchReplicaSpecs": {
                    "Worker": {
                        "replicas": 2,
                        "restartPolicy": "OnFailure",
                        "template": _gpu_pod(1, SCRATCH),
                    }
                }
            },
            "in Worker",
        ),
        (
            "ml/jobset/scratchy",
            {
                "replicatedJobs": [
                    {"name": "workers", "template": {"spec": {"template": _gpu_pod(1, SCRATCH)}}}
                ]
            },
            "in replicatedJob 'workers'",
        ),
        (
            "ml/rayjob/scratchy",
            {"rayClusterSpec": {"headGroupSpec": {"template": _gpu_pod(0, SCRATCH)}}},
            "in the Ray head",
        ),
    ],
)
def test_a_generic_ephemeral_volume_in_any_pod_template_is_refused(
    kubernetes: KubernetesProvider, cluster: Cluster, ref: str, spec: dict[str, Any], where: str
) -> None:
    cluster.fake.add_pod(ref, "1", spec)
    said = kubernetes.describe(ref).cannot_preserve
    assert said is not None and f"'scratch' {where}" in said and "generic ephemeral" in said
    refused = kubernetes.stop(ref)
    assert refused.outcome is CallOutcome.PERMANENT and "'scratch'" in refused.detail
    assert cluster.patches() == []


def test_listing_counts_the_gpus_of_all_its_pods(
    kubernetes: KubernetesProvider, cluster: Cluster
) -> None:
    cluster.fake.add_pod(
        "ml/pytorchjob/big",
        "30",
        {
            "pytorchReplicaSpecs": {
                "Worker": {"replicas": 3, "restartPolicy": "OnFailure", "template": _gpu_pod(2)}
            }
        },
    )
    job = {"parallelism": 2, "template": _gpu_pod(4)}
    jobset = {"replicatedJobs": [{"name": "workers", "replicas": 2, "template": {"spec": job}}]}
    cluster.fake.add_pod("ml/jobset/big", "30", jobset)
    workers = [
        {"groupName": "gpu", "replicas": 3, "minReplicas": 1, "maxReplicas": 4, "numOfHosts": 2}
        | {"rayStartParams": {}, "template": _gpu_pod(1)}
    ]
    cluster.fake.add_pod("ml/rayjob/big", "30", {"rayClusterSpec": {"workerGroupSpecs": workers}})
    listed = {pod.ref: pod for pod in kubernetes.pods()}
    assert {ref: listed[ref].gpu_count for ref in PATHS} == {ref: 1 for ref in PATHS}
    assert listed["ml/pytorchjob/big"].gpu_count == 1 + 3 * 2  # its Master and Workers
    assert listed["ml/jobset/big"].gpu_count == 2 * 2 * 4  # 2 Jobs of 2 pods of 4 GPUs
    assert listed["ml/rayjob/big"].gpu_count == 3 * 2 * 1  # the head asks for none
    assert all(pod.description.state is PodState.RUNNING for pod in listed.values())


def test_a_custom_resource_the_cluster_has_not_installed_is_left_out(
    kubernetes: KubernetesProvider, cluster: Cluster
) -> None:
    """Its list is a 404: the cluster serves no such resource. A built-in kind's 404 is a
    wrong URL and fails the listing."""
    cluster.answer_next("", "", "", "status:404")  # the jobsets, after the built-in kinds
    refs = {pod.ref for pod in kubernetes.pods()}
    assert refs == {RAYJOB, PYTORCHJOB}
    cluster.answer_next("status:404")
    with pytest.raises(ProviderError, match="HTTP 404"):
        kubernetes.pods()


def test_the_fake_prunes_a_field_the_definition_does_not_name(
    kubernetes: KubernetesProvider, cluster: Cluster
) -> None:
    """A PyTorchJob patched at spec.suspend (where a Job has it): the API server drops the
    field, the job runs on."""
    with cluster.client() as client:
        answer = client.patch(
            f"{cluster.url}{PATHS[PYTORCHJOB]}",
            json={"spec": {"suspend": True}},
            headers={
                "Authorization": f"Bearer {TOKEN}",
                "Content-Type": "application/merge-patch+json",
            },
        )
    assert answer.status_code == 200 and "suspend" not in answer.json()["spec"]
    assert kubernetes.describe(PYTORCHJOB).state is PodState.RUNNING
