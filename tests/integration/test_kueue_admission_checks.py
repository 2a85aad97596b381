"""The Kueue admission check controller against the fake Kubernetes API server with Kueue,
over real HTTP, every object and status patch checked against Kueue's CRD schemas: it keeps
its AdmissionCheck Active, admits an affordable Workload (Ready, its price reserved, then
registered under its budget as the launch's pod), rejects an unaffordable one (Rejected,
with the arithmetic), and evicts an exhausted budget's admitted Workload (Retry) only once
its run was told to checkpoint and its grace ran out. A replica that does not lead sends
nothing."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import pytest

from governor.adapters.providers.kubernetes import BearerToken, KubernetesProvider
from governor.adapters.providers.kueue import KueueProvider
from governor.db import repository as repo
from governor.db.tables import LaunchRow
from governor.domain.errors import NotLeader
from governor.domain.model import Action, PodState, Requester
from governor.domain.ports import SystemClock
from governor.domain.rate_card import RateCard
from governor.fakes.http_cloud import running
from governor.fakes.kueue import FakeKueue
from governor.scheduler import runner, tasks
from governor.services.fleet import kueue_checks, resumes
from governor.services.money import extensions
from governor.services.replica.leadership import Lease
from tests.clock import FrozenClock
from tests.contract import kueue_schemas
from tests.fake_clouds import TIMEOUT_S
from tests.integration.conftest import BY, Governor, make_governor

CONTROLLER = "gpu-governor.io/budget"
H100 = "NVIDIA-H100-80GB-HBM3"
RATE_CARD = {f"kubernetes:{H100}": "4.00"}  # USD per GPU-hour


@dataclass
class Cluster:
    gov: Governor
    fake: FakeKueue
    kueue: KueueProvider

    def tick(self, seconds: float = 0.0) -> None:
        self.gov.tick(seconds)

    def submit(self, name: str, gpus: int, hours: int, budget: str = "pilot") -> str:
        """A 2-pod Job of `gpus` H100s each, labelled for `budget`, for at most `hours`; its
        quota reserved at once: returns its Workload's key."""
        key = self.fake.add_workload(
            f"ml/job/{name}",
            "gpu-queue",
            [pod_set(gpus)],
            labels={"governor-budget": budget},
            max_seconds=hours * 3600,
            rate_usd="8",
        )
        self.fake.reserve_quota(key, "gpu-queue", "h100")
        return key

    def message(self, key: str) -> str:
        (entry,) = [
            c for c in self.fake.workload(key)["status"]["admissionChecks"] if c["name"] == "budget"
        ]
        return str(entry["message"])


def pod_set(gpus: int) -> dict[str, Any]:
    container = {
        "name": "train",
        "image": "trainer:1",
        "resources": {"limits": {"nvidia.com/gpu": gpus}},
    }
    return {"name": "main", "count": 2, "template": {"spec": {"containers": [container]}}}


@pytest.fixture
def cluster(migrated_url: str, clock: FrozenClock, tmp_path: Path) -> Iterator[Cluster]:
    fake = FakeKueue(tmp_path / "cluster.json", validate=kueue_schemas.validate)
    fake.clock = clock.now
    fake.add_admission_check("budget", CONTROLLER)
    fake.add_admission_check("provisioning", "kueue.x-k8s.io/provisioning-request")
    fake.add_flavor("h100", {"nvidia.com/gpu.product": H100})
    fake.add_cluster_queue("gpu-queue", ["budget"], "h100", 64)
    with running(fake) as server, httpx.Client(timeout=TIMEOUT_S) as client:
        cluster = KubernetesProvider(
            BearerToken(client, fake.api_key, server.url), stop_latency_s=0
        )
        kueue = KueueProvider(cluster, CONTROLLER, clock, stop_latency_s=0.0)
        gov = make_governor(migrated_url, clock, others={"kueue": kueue})
        config = replace(gov.ctx.config, rate_card=RateCard.of(RATE_CARD))
        gov = replace(gov, ctx=replace(gov.ctx, config=config))
        try:
            yield Cluster(gov, fake, kueue)
        finally:
            gov.ctx.engine.dispose()


def test_it_keeps_its_own_admission_check_active_and_leaves_the_others_alone(
    cluster: Cluster,
) -> None:
    cluster.tick()
    check = cluster.fake.objects["admissionchecks"]["budget"]
    (active,) = check["status"]["conditions"]
    assert (active["type"], active["status"], active["reason"]) == ("Active", "True", "Active")
    assert active["observedGeneration"] == check["metadata"]["generation"]
    assert "status" not in cluster.fake.objects["admissionchecks"]["provisioning"]
    patches = len(cluster.fake.calls("PATCH"))

    cluster.tick(10)  # already Active for its generation: nothing sent
    assert len(cluster.fake.calls("PATCH")) == patches

    check["metadata"]["generation"] = 2  # its spec changed: Active again, for the new one
    cluster.tick(10)
    (active,) = cluster.fake.objects["admissionchecks"]["budget"]["status"]["conditions"]
    assert active["observedGeneration"] == 2


def test_an_affordable_workload_is_admitted_its_price_reserved_then_registered(
    cluster: Cluster,
) -> None:
    budget = cluster.gov.budget("1000")
    key = cluster.submit("train", gpus=2, hours=10)  # 2 pods x 2 x $4 x 10 h = $160
    cluster.tick()

    assert cluster.fake.check_state(key, "budget") == "Ready"
    message = cluster.message(key)
    assert "accepted" in message and "$160.00" in message
    assert f"rate card kubernetes:{H100.lower()}" in message
    assert cluster.fake.condition(key, "Admitted")  # Kueue admitted it: its Job runs
    assert cluster.fake.workloads["ml/job/train"].spec["suspend"] is False
    uid = cluster.fake.workload(key)["metadata"]["uid"]
    with cluster.gov.session() as s:
        held = repo.launch_by_key(s, uid, cluster.gov.clock.now())
        assert held is not None and held.budget_id == budget
        assert held.reserved_usd == Decimal("160.00")

    cluster.tick(10)  # admitted: registered under its budget as the launch's pod
    with cluster.gov.session() as s:
        pod = repo.pod_by_ref(s, "kueue", "ml/job/train")
        assert pod is not None and pod.budget_id == budget
        assert (pod.hourly_rate_usd, pod.gpu_count, pod.state) == (
            Decimal("16.00"),
            4,
            PodState.RUNNING,
        )
        launch = s.get(LaunchRow, held.id)
        assert launch is not None and launch.released_at is not None  # the meter took over
        assert pod.launch_id == launch.id

    cluster.tick(10)  # registered once
    with cluster.gov.session() as s:
        assert len(repo.pods_of(s, budget)) == 1


def test_an_unaffordable_workload_is_rejected_with_the_arithmetic(cluster: Cluster) -> None:
    cluster.gov.budget("100")
    key = cluster.submit("big", gpus=8, hours=24)  # 2 x 8 x $4 x 24 h = $1,536
    cluster.tick()

    assert cluster.fake.check_state(key, "budget") == "Rejected"
    message = cluster.message(key)
    assert "refused" in message and "$1,536.00" in message and "$100.00" in message
    assert "extension" in message and "spec.active" in message
    assert cluster.fake.workload(key)["spec"]["active"] is False  # Kueue deactivated it
    assert not cluster.fake.condition(key, "Admitted")
    uid = cluster.fake.workload(key)["metadata"]["uid"]
    with cluster.gov.session() as s:
        assert repo.latest_launch_by_key(s, uid) is None  # nothing reserved


def test_a_workload_without_a_budget_is_rejected_saying_how_to_name_one(cluster: Cluster) -> None:
    cluster.gov.budget("1000")
    key = cluster.submit("stray", gpus=1, hours=1, budget="nobody")
    cluster.tick()
    assert cluster.fake.check_state(key, "budget") == "Rejected"
    assert "no open budget 'nobody'" in cluster.message(key)


def test_an_exhausted_budgets_workload_is_evicted_only_after_its_checkpoint_directive_and_grace(
    cluster: Cluster,
) -> None:
    gov = cluster.gov
    budget = gov.budget("200")
    key = cluster.submit("train", gpus=1, hours=10)  # $80 reserved, $8/h once it runs
    cluster.tick()
    cluster.tick(5)
    with gov.session() as s:
        pod = repo.pod_by_ref(s, "kueue", "ml/job/train")
        assert pod is not None
        pod_id = pod.id
    grace = 600.0
    run = gov.run(budget, pod_id, timeout_s=10 * 3600, grace_s=grace)
    assert gov.beat(run).action is Action.CONTINUE

    gov.clock.advance(26 * 3600)  # $208 spent: past the ceiling
    gov.beat(run, step=2)
    cluster.tick()
    told = gov.beat(run, step=3)
    assert told.action is Action.STOP and told.deadline is not None
    assert told.reason is not None and told.reason.value == "ceiling"
    patched = [c for c in cluster.fake.calls("PATCH") if "/workloads/" in c]
    assert cluster.fake.check_state(key, "budget") == "Ready"  # not yet: it may save first
    assert cluster.fake.condition(key, "Admitted")

    cluster.tick(grace - 60)  # within its grace: still running
    assert cluster.fake.check_state(key, "budget") == "Ready"
    assert cluster.fake.condition(key, "Admitted")
    assert [c for c in cluster.fake.calls("PATCH") if "/workloads/" in c] == patched
    assert gov.clock.now() < told.deadline

    cluster.tick(120)  # the grace is over: the check set to Retry, and Kueue evicts
    assert gov.clock.now() > told.deadline
    assert cluster.fake.condition(key, "Evicted")
    assert not cluster.fake.condition(key, "Admitted")
    assert cluster.fake.workloads["ml/job/train"].spec["suspend"] is True  # pods gone
    assert any("Retry" in str(p) for p in cluster.fake.status_patches[key])
    cluster.tick(5)
    with gov.session() as s:
        assert repo.get_pod(s, pod_id).state is PodState.STOPPED

    # Kueue queues it again: the governor stopped it, so it is refused until resumed
    cluster.fake.reserve_quota(key, "gpu-queue", "h100")
    cluster.tick(5)
    assert cluster.fake.check_state(key, "budget") == "Rejected"
    assert f"governor pod resume {pod_id}" in cluster.message(key)
    assert cluster.fake.workload(key)["spec"]["active"] is False

    # an extension, then an operator's resume: activated again, admitted as its pod
    with gov.session() as s:
        ext = extensions.request(
            s, budget, Decimal(500), "finish", Requester.OPERATOR, gov.clock.now()
        )
    with gov.session() as s:
        extensions.decide(s, gov.ctx.config, ext.id, True, None, gov.clock.now(), by=BY)
    resumes.resume(gov.ctx, pod_id, "extension approved", by=BY)
    assert cluster.fake.workload(key)["spec"]["active"] is True
    cluster.fake.reserve_quota(key, "gpu-queue", "h100")
    cluster.tick(5)
    assert cluster.fake.check_state(key, "budget") == "Ready"
    assert pod_id in cluster.message(key)
    assert cluster.fake.condition(key, "Admitted")
    uid = cluster.fake.workload(key)["metadata"]["uid"]
    with gov.session() as s:
        assert repo.launch_by_key(s, uid, gov.clock.now()) is None  # nothing reserved again
        assert len(repo.pods_of(s, budget)) == 1
    assert cluster.kueue.describe("ml/job/train").state is PodState.RUNNING


def test_a_replica_that_does_not_lead_sends_nothing(cluster: Cluster) -> None:
    cluster.gov.budget("1000")
    key = cluster.submit("train", gpus=1, hours=1)
    ctx = cluster.gov.ctx
    follower = Lease(ctx.sessions, SystemClock(), "follower", lease_s=3600.0)
    assert not follower.probe({}), "the test's governor holds the lease"
    sent = len(cluster.fake.calls())
    following = replace(ctx, lease=follower)
    runner.guarded(following, follower, "kueue", tasks.TASKS["kueue"])()  # the scheduler's pass
    with pytest.raises(NotLeader):  # and the controller itself, called past its lease
        kueue_checks.answer_all(following)
    assert len(cluster.fake.calls()) == sent
    assert cluster.fake.check_state(key, "budget") == "Pending"


def test_two_workloads_never_spend_the_same_money_and_one_without_gpus_is_ready(
    cluster: Cluster,
) -> None:
    cluster.gov.budget("200")
    first = cluster.submit("first", gpus=2, hours=10)  # $160 each
    second = cluster.submit("second", gpus=2, hours=10)
    key = cluster.fake.add_workload(
        "ml/job/cpu",
        "gpu-queue",
        [{"name": "main", "count": 1, "template": {"spec": {"containers": [{"name": "c"}]}}}],
    )
    cluster.fake.reserve_quota(key, "gpu-queue", "h100")
    cluster.tick()

    assert cluster.fake.check_state(first, "budget") == "Ready"
    assert cluster.fake.check_state(second, "budget") == "Rejected"
    assert "$160.00 reserved for launches = $40.00" in cluster.message(second)
    assert cluster.fake.check_state(key, "budget") == "Ready"
    assert "no GPU" in cluster.message(key)
