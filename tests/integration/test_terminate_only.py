"""Terminate-only providers (Lambda), through the services and the real Lambda adapter
talking to the fake Lambda cloud over HTTP: terminated only after the job saved on the
named persistent filesystem; otherwise held, alerted on, and never terminated."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from governor.adapters.providers.lambda_cloud import LambdaProvider
from governor.db import repository as repo
from governor.domain.errors import Invalid
from governor.domain.model import PodState, RunStatus, Severity
from governor.domain.stop_order import StopState
from governor.fakes.http_cloud import running
from governor.fakes.lambda_cloud import FakeLambda
from governor.services.fleet import pods
from governor.services.jobs.checkins import Checkpoint
from tests.clock import FrozenClock
from tests.fake_clouds import TIMEOUT_S
from tests.integration.conftest import BY, Governor, make_governor

KEY = "lambda-integration-key"
MOUNT = "/lambda/nfs/ckpts"


@dataclass
class Lambda:
    gov: Governor
    cloud: FakeLambda

    def register(self, ref: str, filesystem: str | None = "ckpts") -> str:
        registration = pods.Registration("lambda", ref, persistent_filesystem=filesystem)
        budget = self.gov.budget("1000")
        with self.gov.session() as s:
            return pods.register(s, self.gov.ctx, budget, registration, self.gov.clock.now()).id

    def stop_with_ack(self, pod_id: str, checkpoint: str | None) -> None:
        """An operator's stop, which the job acknowledges having saved at `checkpoint`."""
        with self.gov.session() as s:
            budget_id = repo.get_pod(s, pod_id).budget_id
        run = self.gov.run(budget_id, pod_id, grace_s=60)
        with self.gov.session() as s:
            pods.stop_manually(s, self.gov.ctx, pod_id, "end of day", self.gov.clock.now(), by=BY)
        self.gov.beat(run)  # the job hears "stop"
        saved = None if checkpoint is None else Checkpoint(step=100, path=checkpoint)
        self.gov.beat(run, 100, RunStatus.STOPPING, saved)

    def order(self, pod_id: str) -> tuple[StopState, PodState]:
        with self.gov.session() as s:
            order = repo.latest_stop_order(s, pod_id)
            assert order is not None
            return order.state, repo.get_pod(s, pod_id).state

    def terminated(self) -> list[list[str]]:
        return [call["instance_ids"] for call in self.cloud.state.terminate_calls]

    def critical(self) -> list[str]:
        """The critical events about the pods; not the account sweep's about the instance
        of the cloud that is not registered (its subject is the provider's ref)."""
        with self.gov.session() as s:
            return [
                e.message
                for e in repo.events(s)
                if e.severity is Severity.CRITICAL and not e.subject.startswith("lambda:")
            ]


@pytest.fixture
def lam(migrated_url: str, clock: FrozenClock, tmp_path: Path) -> Iterator[Lambda]:
    cloud = FakeLambda(tmp_path / "lambda.json", KEY)
    for ref in ("inst-1", "inst-2"):
        cloud.add_pod(ref, "3.29")
    with running(cloud) as server, httpx.Client(timeout=TIMEOUT_S) as client:
        adapter = LambdaProvider(client, KEY, f"{server.url}/api/v1", stop_latency_s=0)
        gov = make_governor(migrated_url, clock, others={"lambda": adapter})
        yield Lambda(gov, cloud)
        gov.ctx.engine.dispose()


def test_a_filesystem_that_is_not_attached_is_refused(lam: Lambda) -> None:
    with pytest.raises(Invalid, match=r"no filesystem named 'scratch'.*attached: ckpts"):
        lam.register("inst-1", filesystem="scratch")


def test_terminated_once_the_job_saved_on_the_filesystem(lam: Lambda) -> None:
    pod = lam.register("inst-1")
    with lam.gov.session() as s:
        assert repo.get_pod(s, pod).persistent_mount == MOUNT
    lam.stop_with_ack(pod, f"{MOUNT}/run-7/step-100")
    lam.gov.tick(1)  # terminate sent
    lam.gov.tick(1)  # confirmed terminated
    assert lam.terminated() == [["inst-1"]]
    assert lam.order(pod) == (StopState.STOPPED, PodState.STOPPED)
    assert lam.critical() == []


def test_a_checkpoint_elsewhere_holds_the_order_and_keeps_alerting(lam: Lambda) -> None:
    pod = lam.register("inst-1")
    lam.stop_with_ack(pod, "/home/ubuntu/ckpt/step-100")  # the root disk: lost on terminate
    lam.gov.tick(1)
    assert lam.order(pod) == (StopState.HELD, PodState.STOPPING)  # and billing
    assert len(lam.critical()) == 1 and "will not terminate" in lam.critical()[0]
    for _ in range(10):  # ten minutes: looked at every minute, alerted on once
        lam.gov.tick(60)
    assert len(lam.critical()) == 1
    lam.gov.tick(300)  # fifteen minutes after the first alert: again
    assert len(lam.critical()) == 2
    assert lam.terminated() == []


def test_a_held_order_goes_on_when_the_job_saves_on_the_filesystem(lam: Lambda) -> None:
    pod = lam.register("inst-1")
    lam.stop_with_ack(pod, "/home/ubuntu/step-100")  # saved, but on the root disk
    lam.gov.tick(1)
    assert lam.order(pod)[0] is StopState.HELD
    with lam.gov.session() as s:
        [run] = repo.runs_on_pod(s, pod)
        run_id = run.id
    lam.gov.beat(run_id, 120, RunStatus.STOPPING, Checkpoint(step=120, path=f"{MOUNT}/s120"))
    lam.gov.tick(60)
    lam.gov.tick(1)
    assert lam.terminated() == [["inst-1"]]
    assert lam.order(pod)[0] is StopState.STOPPED


def test_without_a_filesystem_it_is_never_terminated_but_a_hand_stop_is_seen(
    lam: Lambda,
) -> None:
    pod = lam.register("inst-2", filesystem=None)
    with lam.gov.session() as s:
        warned = [e.message for e in repo.events(s) if e.severity is Severity.WARNING]
    assert any("will never terminate this pod" in m for m in warned)
    lam.stop_with_ack(pod, f"{MOUNT}/step-100")  # no filesystem was named: not trusted
    lam.gov.tick(1)
    assert lam.order(pod)[0] is StopState.HELD
    lam.cloud.state.instances["inst-2"].status = "terminated"  # an operator, by hand
    lam.gov.tick(60)
    assert lam.order(pod) == (StopState.STOPPED, PodState.STOPPED)
    assert lam.terminated() == []
