"""A PyTorchJob registered under a budget, through the real Kubernetes adapter and the fake
API server over HTTP: at the ceiling its job is told to save first, and only once it has
acknowledged is the PyTorchJob suspended, through `spec.runPolicy.suspend`, its pods gone and
its PersistentVolumeClaim kept; nothing is deleted, and every request and answer is one its
CustomResourceDefinition allows (checked as the contract suite checks them)."""

from __future__ import annotations

import copy
from decimal import Decimal
from pathlib import Path

from governor.db import repository as repo
from governor.domain.model import Action, Reason, RunStatus
from governor.domain.stop_order import StopState
from governor.fakes.kubernetes import FakeKubernetes, merge_patch
from governor.services.fleet import pods
from governor.services.jobs.checkins import Checkpoint
from tests.clock import FrozenClock
from tests.contract.conftest import govern
from tests.contract.harness_kubernetes import HARNESS as KUBERNETES
from tests.integration.conftest import make_governor

REF = "ml/pytorchjob/llama-ddp"
PATH = "/apis/kubeflow.org/v1/namespaces/ml/pytorchjobs/llama-ddp"
OVER_THE_CEILING_S = 3 * 3600.0  # $2.50/h bills more than the $1 ceiling in three hours
WORKERS = {  # beside the default Master: two Workers writing to the same claim
    "pytorchReplicaSpecs": {
        "Worker": {
            "replicas": 2,
            "restartPolicy": "OnFailure",
            "template": {
                "spec": {
                    "containers": [
                        {
                            "name": "pytorch",
                            "image": "trainer:latest",
                            "resources": {"limits": {"nvidia.com/gpu": 1}},
                            "volumeMounts": [{"name": "workspace", "mountPath": "/workspace"}],
                        }
                    ],
                    "volumes": [
                        {
                            "name": "workspace",
                            "persistentVolumeClaim": {"claimName": "llama-ddp-workspace"},
                        }
                    ],
                }
            },
        }
    }
}


def test_a_pytorchjob_at_its_ceiling_saves_then_is_suspended_keeping_its_claim(
    migrated_url: str, near_now: FrozenClock, tmp_path: Path
) -> None:
    with govern(KUBERNETES, tmp_path) as governed:
        fake = governed.fake
        assert isinstance(fake, FakeKubernetes)
        fake.add_pod(REF, "2.50", WORKERS)
        before = copy.deepcopy(fake.workloads[REF].spec)
        gov = make_governor(migrated_url, near_now, others={"kubernetes": governed.adapter})
        try:
            budget = gov.budget(ceiling="1")
            registration = pods.Registration("kubernetes", REF, Decimal("2.50"), gpu_count=3)
            with gov.session() as s:
                pod = pods.register(s, gov.ctx, budget, registration, near_now.now()).id
            run = gov.run(budget, pod, timeout_s=4 * OVER_THE_CEILING_S, grace_s=60)
            gov.beat(run)

            gov.tick(OVER_THE_CEILING_S)
            heard = gov.beat(run, 2)
            assert (heard.action, heard.reason) == (Action.STOP, Reason.CEILING), heard
            assert fake.calls("PATCH") == []  # the job saves before anything is stopped
            assert KUBERNETES.billing(fake, REF)

            saved = Checkpoint(step=2, path="/workspace/ckpt-2")
            gov.beat(run, 2, RunStatus.STOPPING, saved)
            for _ in range(20):  # the suspend, then its confirmation
                gov.tick(5.0)
                with gov.session() as s:
                    order = repo.latest_stop_order(s, pod)
                    assert order is not None
                    if order.state is StopState.STOPPED:
                        break
            assert order.reason is Reason.CEILING and order.state is StopState.STOPPED
            assert order.ack_checkpoint is not None
        finally:
            gov.ctx.engine.dispose()

        assert fake.calls("PATCH") == [f"PATCH {PATH}"]
        suspended = {"runPolicy": {"suspend": True}}
        assert fake.workloads[REF].spec == merge_patch(before, suspended)  # claims untouched
        assert KUBERNETES.stopped(fake, REF) and not KUBERNETES.billing(fake, REF)
        patch = next(e for e in governed.exchanges if e.method == "PATCH")
        assert patch.body == {"spec": suspended}
    assert fake.calls("DELETE") == [] and fake.deletions == []
