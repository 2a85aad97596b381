"""The status patches the Kueue admission check controller sends, applied as the API server
applies a merge patch, are valid by Kueue's own CRD schemas (vendored, v1beta2); a patch the
schemas refuse is refused by the fake API server too (422 Invalid, nothing changed), so a
controller that sent one would fail the integration tests, which run against that fake."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from governor.adapters.providers.kubernetes import BearerToken, KubernetesProvider, StatusError
from governor.adapters.providers.kueue import KueueProvider
from governor.domain import kueue
from governor.domain.kueue import CheckState
from governor.fakes.http_cloud import running
from governor.fakes.kubernetes import merge_patch
from governor.fakes.kueue import FakeKueue
from tests.clock import FrozenClock
from tests.contract import kueue_schemas
from tests.fake_clouds import TIMEOUT_S

AT = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
CONTROLLER = "gpu-governor.io/budget"


@pytest.fixture
def fake(tmp_path: Path) -> FakeKueue:
    fake = FakeKueue(tmp_path / "cluster.json", validate=kueue_schemas.validate)
    fake.add_admission_check("budget", CONTROLLER)
    fake.add_admission_check("other", "example.com/other")
    fake.add_flavor("h100", {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"})
    fake.add_cluster_queue("gpu-queue", ["budget", "other"], "h100", 8)
    container = {"name": "train", "resources": {"limits": {"nvidia.com/gpu": 1}}}
    pod_set = {"name": "main", "count": 1, "template": {"spec": {"containers": [container]}}}
    key = fake.add_workload("ml/job/train", "gpu-queue", [pod_set], max_seconds=3600)
    fake.reserve_quota(key, "gpu-queue", "h100")
    return fake


@pytest.fixture
def api(fake: FakeKueue) -> Iterator[KueueProvider]:
    with running(fake) as server, httpx.Client(timeout=TIMEOUT_S) as client:
        cluster = KubernetesProvider(BearerToken(client, fake.api_key, server.url))
        yield KueueProvider(cluster, CONTROLLER, FrozenClock(AT))


def applied(obj: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """The object as the API server stores it after a merge patch of its status."""
    return {**obj, "status": merge_patch(obj.get("status", {}), patch["status"])}


@pytest.mark.parametrize("state", list(CheckState))
def test_every_check_state_the_controller_sets_is_valid(fake: FakeKueue, state: CheckState) -> None:
    obj = fake.workload("ml/job-train")
    workload = kueue.read_workload(obj)
    long = "the arithmetic, at length: " + "$4.00/h x 2 GPUs; " * 3000  # past 32768 characters
    patch = kueue.check_patch(workload, {"budget": (state, long)}, AT)
    after = applied(obj, patch)
    assert kueue_schemas.problems("Workload", after) == []
    checks = {c["name"]: c for c in after["status"]["admissionChecks"]}
    assert checks["budget"]["state"] == state.value
    assert len(checks["budget"]["message"]) <= kueue.MESSAGE_MAX
    assert checks["other"] == {c["name"]: c for c in obj["status"]["admissionChecks"]}["other"]
    assert patch["metadata"]["resourceVersion"] == obj["metadata"]["resourceVersion"]


def test_the_active_condition_is_valid_and_keeps_the_other_conditions(fake: FakeKueue) -> None:
    check = fake.objects["admissionchecks"]["budget"]
    check["status"] = {
        "conditions": [
            {
                "type": "SingleInstanceInClusterQueue",
                "status": "True",
                "reason": "Ready",
                "message": "",
                "lastTransitionTime": "2026-01-01T11:00:00Z",
            }
        ]
    }
    patch = kueue.active_patch(check, CONTROLLER, AT)
    assert patch is not None
    after = applied(check, patch)
    assert kueue_schemas.problems("AdmissionCheck", after) == []
    kinds = [c["type"] for c in after["status"]["conditions"]]
    assert kinds == ["SingleInstanceInClusterQueue", "Active"]
    assert kueue.active_patch(after, CONTROLLER, AT) is None  # Active already: nothing to send


@pytest.mark.parametrize(
    "broken",
    [
        {"state": "Approved"},  # not a state Kueue knows
        {"message": "x" * (kueue.MESSAGE_MAX + 1)},  # longer than the schema allows
        {"lastTransitionTime": None},  # a required field dropped
    ],
    ids=["unknown-state", "message-too-long", "no-transition-time"],
)
def test_a_patch_the_schema_refuses_is_refused_by_the_schema_and_the_fake(
    fake: FakeKueue, api: KueueProvider, broken: dict[str, Any]
) -> None:
    obj = fake.workload("ml/job-train")
    workload = kueue.read_workload(obj)
    patch = kueue.check_patch(workload, {"budget": (CheckState.READY, "fits")}, AT)
    entry = next(c for c in patch["status"]["admissionChecks"] if c["name"] == "budget")
    for key, value in broken.items():
        if value is None:
            del entry[key]
        else:
            entry[key] = value
    assert kueue_schemas.problems("Workload", applied(obj, patch)) != []
    with pytest.raises(StatusError) as refused:
        api.patch_workload_status("ml", "job-train", patch)
    assert (refused.value.status, refused.value.reason) == (422, "Invalid")
    assert fake.workload("ml/job-train") == obj  # nothing changed


def test_a_patch_on_a_stale_read_is_refused_as_a_conflict(
    fake: FakeKueue, api: KueueProvider
) -> None:
    workload = kueue.read_workload(fake.workload("ml/job-train"))
    fake.reserve_quota("ml/job-train", "gpu-queue", "h100")  # Kueue wrote in between
    patch = kueue.check_patch(workload, {"budget": (CheckState.READY, "fits")}, AT)
    with pytest.raises(StatusError) as refused:
        api.patch_workload_status("ml", "job-train", patch)
    assert refused.value.status == 409
