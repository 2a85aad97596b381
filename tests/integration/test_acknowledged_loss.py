"""A pod whose stop would lose its workspace is refused at registration, saying what would
be lost and how to keep it; an operator's written acknowledgement (`acknowledge_loss`)
registers it all the same, audited with who wrote it and shown on the pod, the dashboard
and the report. Where no stop call works (a one-time Spot instance on EC2, through the real
adapter and the fake EC2 over HTTP), the pod is governed as terminate-only: terminated at its
ceiling only after the job saved on an EBS volume that survives termination, else held and
escalated."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import boto3
import pytest
from fastapi.testclient import TestClient
from markupsafe import escape

from governor.adapters.providers.aws import Ec2Provider
from governor.db import repository as repo
from governor.domain.errors import Invalid
from governor.domain.model import Category, PodState, Reason, RunStatus, Severity
from governor.domain.stop_order import StopState
from governor.fakes.aws import FAKE_ACCESS_KEY_ID, FakeEc2
from governor.fakes.http_cloud import running
from governor.render import report_html
from governor.render.report_markdown import render
from governor.services.fleet import pods
from governor.services.jobs.checkins import Checkpoint
from governor.services.view import report
from tests.clock import FrozenClock
from tests.integration.conftest import BY, Governor, make_governor, ok, read_dashboard

LOST = "its container disk is erased when it stops, and no volume is attached"
WHY = "a smoke test: nothing on it is worth keeping"


def register_on(gov: Governor, budget: str, provider: str, ref: str, **given: Any) -> str:
    registration = pods.Registration(provider, ref, **given)
    with gov.session() as s:
        return pods.register(s, gov.ctx, budget, registration, gov.clock.now(), by=BY).id


def register(gov: Governor, budget: str, ref: str, **given: Any) -> str:
    return register_on(gov, budget, "fake", ref, **given)


def stop_until_done(gov: Governor, pod: str) -> None:
    with gov.session() as s:
        pods.stop_manually(s, gov.ctx, pod, "end of day", gov.clock.now(), by=BY)
    for _ in range(10):
        gov.tick(31)  # the fake cloud takes 30 s to stop
        with gov.session() as s:
            if repo.get_pod(s, pod).state is PodState.STOPPED:
                return
    raise AssertionError("the pod never stopped")


def test_a_pod_whose_stop_loses_its_workspace_is_refused_saying_what_and_how(
    gov: Governor,
) -> None:
    gov.cloud.losing["pod-1"] = LOST
    budget = gov.budget()
    with pytest.raises(Invalid) as refused:
        register(gov, budget, "pod-1")
    said = str(refused.value)
    assert LOST in said and 'acknowledge_loss: "<why>"' in said and "--acknowledge-loss" in said
    with gov.session() as s:
        assert repo.pod_by_ref(s, "fake", "pod-1") is None
        assert not any("registered" in e.message for e in repo.events(s))


def test_an_acknowledged_loss_registers_is_audited_and_its_stop_says_what_was_lost(
    gov: Governor,
) -> None:
    gov.cloud.losing["pod-1"] = LOST
    budget = gov.budget()
    pod = register(gov, budget, "pod-1", acknowledge_loss=WHY)
    with gov.session() as s:
        row = repo.get_pod(s, pod)
        assert (row.loss_acknowledged, row.loss_acknowledged_by) == (WHY, BY.said)
        assert row.cannot_preserve == LOST and not row.terminate_only
        [told] = [e for e in repo.events(s) if "Acknowledged" in e.message]
    assert told.severity is Severity.WARNING and told.category is Category.OPERATOR
    assert BY.said in told.message and LOST in told.message and WHY in told.message
    assert told.evidence["by"] == BY.evidence and told.evidence["acknowledge_loss"] == WHY

    [shown] = [p for b in read_dashboard(gov).budgets for p in b.pods if p.id == pod]
    assert shown.acknowledged_loss is not None
    assert (shown.acknowledged_loss.lost, shown.acknowledged_loss.why) == (LOST, WHY)
    with gov.session() as s:
        built = report.build(s, gov.ctx.config, budget, gov.clock.now())
    line = f"a stop loses {LOST}. Acknowledged by {BY.said}: {WHY}"
    assert line in render(built) and str(escape(line)) in report_html.document(built)

    stop_until_done(gov, pod)  # the provider's stop works: it is used, and says what was lost
    with gov.session() as s:
        messages = [e.message for e in repo.events(s)]
    assert any(f"the stop loses its workspace ({LOST})" in m for m in messages)
    assert any(
        f"Pod stopped; as acknowledged at registration, the stop lost its workspace ({LOST})" in m
        for m in messages
    )
    assert not any("its workspace is kept" in m for m in messages)


def test_an_exhausted_budget_says_which_pods_stops_lose_their_workspace(gov: Governor) -> None:
    gov.cloud.losing["pod-1"] = LOST
    budget = gov.budget(ceiling="0.50")  # $3.60/h each: reached within minutes
    register(gov, budget, "pod-1", acknowledge_loss=WHY)
    register(gov, budget, "pod-2")
    for _ in range(4):
        gov.tick(200)
    lost = f"as acknowledged at registration, pod-1's stop loses its workspace ({LOST})"
    with gov.session() as s:
        [told] = [
            e
            for e in repo.events(s, budget_id=budget, category=Category.BUDGET)
            if e.message.startswith("Budget exhausted")
        ]
    assert told.message.startswith(f"Budget exhausted: every pod is stopped; {lost}; the others ")
    assert "with its workspace kept" not in told.message
    assert told.evidence["lost_at_stop"] == {"pod-1": LOST}
    [shown] = [b for b in read_dashboard(gov).budgets if b.id == budget]
    assert shown.next_step.what.endswith(f": nothing runs; {lost}")


def test_acknowledging_a_loss_where_nothing_is_lost_is_refused(gov: Governor) -> None:
    with pytest.raises(Invalid, match="loses nothing when it is stopped"):
        register(gov, gov.budget(), "pod-1", acknowledge_loss=WHY)


def test_the_api_refuses_without_and_shows_the_acknowledgement_with_who_gave_it(
    gov: Governor, client: TestClient
) -> None:
    gov.cloud.losing["pod-1"] = LOST
    budget = gov.budget()
    url = f"/v1/budgets/{budget}/pods"
    refused = client.post(url, json={"provider": "fake", "provider_ref": "pod-1"})
    assert (
        refused.status_code == 422 and LOST in refused.text and "acknowledge_loss" in refused.text
    )
    blank = client.post(
        url, json={"provider": "fake", "provider_ref": "pod-1", "acknowledge_loss": " "}
    )
    assert blank.status_code == 422  # free text, validated as every reason is
    made = ok(
        client.post(
            url, json={"provider": "fake", "provider_ref": "pod-1", "acknowledge_loss": WHY}
        ),
        201,
    )
    token_id = ok(client.get("/v1/tokens"))["items"][0]["id"]
    loss = made["acknowledged_loss"]
    assert loss["lost"] == LOST and loss["why"] == WHY and token_id in loss["by"]
    assert made["terminate_only"] is False
    assert ok(client.get(f"/v1/pods/{made['id']}"))["acknowledged_loss"] == loss
    [told] = [
        e
        for e in ok(client.get("/v1/events", params={"subject": f"pod:{made['id']}"}))["items"]
        if "Acknowledged" in e["message"]
    ]
    assert told["evidence"]["by"]["token_id"] == token_id


# --- EC2: instance store, one-time Spot, terminate-only --------------------------------------

SECRET = "acknowledged-loss-ec2-secret"
STORE_ONLY = "i-0ccccccccccccccc3"  # a g5.xlarge with nothing but its EBS root
ONE_TIME = "i-0eeeeeeeeeeeeeee5"
ROOT, DATA = "vol-0eeeeeeeeeeeeeee5", "vol-0ffffffffffffff06"
MOUNT = "/data"
SESSION = boto3.session.Session()


@dataclass
class Aws:
    gov: Governor
    cloud: FakeEc2

    def register(self, ref: str, **given: Any) -> str:
        return register_on(self.gov, self.gov.budget("5"), "aws", ref, **given)

    def terminated(self) -> list[str]:
        return [
            a["params"]["InstanceId.1"]
            for a in self.cloud.state.actions
            if a["action"] == "TerminateInstances"
        ]

    def critical(self) -> list[str]:
        with self.gov.session() as s:
            return [e.message for e in repo.events(s) if e.severity is Severity.CRITICAL]

    def run_to_the_ceiling(self, pod: str, checkpoint: str) -> tuple[StopState, PodState]:
        """The job beats until its budget's ceiling orders the stop, then saves at
        `checkpoint`; the order and the pod, a few passes later."""
        with self.gov.session() as s:
            budget = repo.get_pod(s, pod).budget_id
        run = self.gov.run(budget, pod, grace_s=120)
        for step in range(1, 200):
            directive = self.gov.beat(run, step)
            if directive.action == "stop":
                break
            self.gov.tick(30)
        else:
            raise AssertionError("the ceiling never stopped the pod")
        with self.gov.session() as s:
            order = repo.latest_stop_order(s, pod)
            assert order is not None and order.reason is Reason.CEILING
        self.gov.beat(run, step, RunStatus.STOPPING, Checkpoint(step=step, path=checkpoint))
        for _ in range(3):
            self.gov.tick(1)
        with self.gov.session() as s:
            order = repo.latest_stop_order(s, pod)
            assert order is not None
            return order.state, repo.get_pod(s, pod).state


@pytest.fixture
def aws(migrated_url: str, clock: FrozenClock, tmp_path: Path) -> Iterator[Aws]:
    cloud = FakeEc2(tmp_path / "ec2.json", SECRET)
    cloud.clock = clock.now
    cloud.add_instance(STORE_ONLY, "1.006")
    cloud.add_instance(
        ONE_TIME,
        "60",
        lifecycle="spot",
        spot_type="one-time",
        volumes={ROOT: 100, DATA: 500},
        kept=[DATA],
    )
    with running(cloud) as server:
        adapter = Ec2Provider.connect(
            "us-east-1",
            endpoint_url=server.url,
            access_key_id=FAKE_ACCESS_KEY_ID,
            secret_access_key=SECRET,
            session=SESSION,
            rates={"g5.xlarge": Decimal("1.006"), "g5.xlarge:spot": Decimal("60")},
            stop_latency_s=0.0,
        )
        gov = make_governor(migrated_url, clock, others={"aws": adapter})
        yield Aws(gov, cloud)
        gov.ctx.engine.dispose()


@pytest.mark.parametrize(
    ("ref", "says"),
    [
        (STORE_ONLY, ["1 x 250 GB NVMe SSD of instance store", "Attach an EBS volume"]),
        (
            ONE_TIME,
            [
                "only terminated, which loses its workspace",
                "one-time Spot request",
                "persistent Spot request",
            ],
        ),
    ],
)
def test_ec2_pods_a_stop_cannot_preserve_are_refused_with_the_reason(
    aws: Aws, ref: str, says: list[str]
) -> None:
    with pytest.raises(Invalid) as refused:
        aws.register(ref)
    for words in [*says, "acknowledge_loss"]:
        assert words in str(refused.value)


def test_a_one_time_spot_pod_names_where_its_kept_volume_is_mounted(aws: Aws) -> None:
    with pytest.raises(Invalid, match="declare persistent_mount"):
        aws.register(ONE_TIME, acknowledge_loss=WHY, persistent_filesystem=DATA)
    with pytest.raises(Invalid, match=f"no filesystem named '{ROOT}'.*attached: {DATA}"):
        aws.register(ONE_TIME, acknowledge_loss=WHY, persistent_filesystem=ROOT)


def test_a_one_time_spot_pod_at_its_ceiling_is_terminated_after_saving_on_its_kept_volume(
    aws: Aws,
) -> None:
    pod = aws.register(
        ONE_TIME, acknowledge_loss=WHY, persistent_filesystem=DATA, persistent_mount=MOUNT
    )
    with aws.gov.session() as s:
        row = repo.get_pod(s, pod)
        assert row.terminate_only and row.persistent_mount == MOUNT
    assert aws.run_to_the_ceiling(pod, f"{MOUNT}/run-7/step-42") == (
        StopState.STOPPED,
        PodState.STOPPED,
    )
    assert aws.terminated() == [ONE_TIME]
    assert "StopInstances" not in aws.cloud.state.action_names()
    assert aws.cloud.state.available == {DATA: 500}  # the checkpoint's volume survives
    assert not any("can only terminate" in m for m in aws.critical())  # never held


def test_a_one_time_spot_pod_that_saved_elsewhere_is_held_and_escalated(aws: Aws) -> None:
    pod = aws.register(
        ONE_TIME, acknowledge_loss=WHY, persistent_filesystem=DATA, persistent_mount=MOUNT
    )
    state = aws.run_to_the_ceiling(pod, "/home/ubuntu/ckpt/step-42")  # the root: deleted
    assert state == (StopState.HELD, PodState.STOPPING)
    assert aws.terminated() == [] and aws.cloud.state.instances[ONE_TIME].state == "running"
    held = [m for m in aws.critical() if "can only terminate" in m]
    assert len(held) == 1 and f"filesystem '{DATA}'" in held[0]
