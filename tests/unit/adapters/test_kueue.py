"""The kueue provider over HTTP against the fake API server with Kueue: a Workload named by
its owner is running while admitted, stopped once evicted; its stop sets the governor's
checks to Retry (and no other controller's), is done for a Workload that is gone or already
stopped, and refused for one with no check of the governor's; a ref of another form is
refused."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from governor.adapters.providers.kubernetes import BearerToken, KubernetesProvider
from governor.adapters.providers.kueue import KueueProvider
from governor.domain.model import PodState
from governor.domain.ports import CallOutcome, ProviderError
from governor.fakes.http_cloud import running
from governor.fakes.kueue import FakeKueue
from tests.clock import FrozenClock
from tests.contract import kueue_schemas
from tests.fake_clouds import TIMEOUT_S

CONTROLLER = "gpu-governor.io/budget"
POD_SET = {"name": "main", "template": {"spec": {"containers": [{"name": "c"}]}}}


@pytest.fixture
def fake(tmp_path: Path) -> FakeKueue:
    fake = FakeKueue(tmp_path / "cluster.json", validate=kueue_schemas.validate)
    fake.add_admission_check("budget", CONTROLLER)
    fake.add_admission_check("other", "example.com/other")
    fake.add_flavor("h100")
    fake.add_cluster_queue("gpu-queue", ["budget", "other"], "h100", 8)
    fake.add_cluster_queue("plain", ["other"], "h100", 8)
    return fake


@pytest.fixture
def kueue(fake: FakeKueue) -> Iterator[KueueProvider]:
    with running(fake) as server, httpx.Client(timeout=TIMEOUT_S) as client:
        cluster = KubernetesProvider(BearerToken(client, fake.api_key, server.url))
        yield KueueProvider(cluster, CONTROLLER, FrozenClock())


def admitted(fake: FakeKueue, name: str, queue: str = "gpu-queue") -> str:
    key = fake.add_workload(f"ml/job/{name}", queue, [POD_SET])
    fake.reserve_quota(key, queue, "h100")
    obj = fake.objects["workloads"][key]
    for check in obj["status"]["admissionChecks"]:
        check["state"] = "Ready"
    obj["status"]["conditions"].append(
        {
            "type": "Admitted",
            "status": "True",
            "reason": "Admitted",
            "message": "",
            "lastTransitionTime": "2026-01-01T12:00:00Z",
        }
    )
    return key


def test_an_admitted_workload_runs_and_its_stop_evicts_it_by_the_governors_check(
    fake: FakeKueue, kueue: KueueProvider
) -> None:
    key = admitted(fake, "train")
    described = kueue.describe("ml/job/train")
    assert (described.state, described.provider_state) == (PodState.RUNNING, "Admitted")
    assert described.hourly_rate_usd is None  # declared at registration

    result = kueue.stop("ml/job/train")
    assert result.outcome is CallOutcome.PENDING
    (patch,) = fake.status_patches[key]
    states = {c["name"]: c["state"] for c in patch["status"]["admissionChecks"]}
    assert states == {"budget": "Retry", "other": "Ready"}
    assert fake.condition(key, "Evicted")
    assert kueue.describe("ml/job/train").state is PodState.STOPPED
    assert kueue.stop("ml/job/train").outcome is CallOutcome.DONE  # idempotent


def test_a_gone_workload_is_stopped_and_one_without_the_governors_check_is_refused(
    fake: FakeKueue, kueue: KueueProvider
) -> None:
    assert kueue.stop("ml/job/nothing").outcome is CallOutcome.DONE
    admitted(fake, "elsewhere", queue="plain")
    refused = kueue.stop("ml/job/elsewhere")
    assert refused.outcome is CallOutcome.PERMANENT and CONTROLLER in refused.detail
    with pytest.raises(ProviderError, match="no Workload owned by"):
        kueue.describe("ml/job/nothing")


@pytest.mark.parametrize("ref", ["ml/pod/x", "ml/job", "train"])
def test_a_ref_of_another_form_is_refused(kueue: KueueProvider, ref: str) -> None:
    assert kueue.stop(ref).outcome is CallOutcome.PERMANENT
    with pytest.raises(ProviderError, match="is not <namespace>/<kind>/<name>") as refused:
        kueue.describe(ref)
    assert refused.value.retryable is False
