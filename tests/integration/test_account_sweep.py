"""The account sweep, in one billing interval of a fake cloud on the injected clock: a billing
pod under no budget is told once as a critical event, shown at the top of /status (and in
GET /v1/status) and counted on /metrics; a pod carrying a budget's label is registered under
it as a launch of that budget waiting for its pod, or where the budget adopts labelled pods,
with the registration rules (a non-preservable one refused with a critical event; a budget
that requires a plan refuses it), and is otherwise ungoverned with a warning to that budget;
an operator's rule adopts a pod into a budget, or stops one (the preserving stop, never a
terminate) after its grace and never before. Without the lease nothing is listed."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from decimal import Decimal

import pytest
from fastapi.testclient import TestClient

from governor.db import repository as repo
from governor.domain.errors import Conflict, NotLeader
from governor.domain.launch_gate import Candidate, LaunchRequest
from governor.domain.launch_labels import BUDGET_LABEL, LAUNCH_LABEL
from governor.domain.model import PodState, Severity
from governor.domain.rate_card import RateCard
from governor.domain.sweep import SweepRule
from governor.services.fleet import budgets, pods, sweep
from governor.services.notifications import Notifier, Subscription, route_events
from governor.services.plans import launches
from governor.services.view import metrics
from tests.integration.conftest import OPERATOR, Governor, ok, read_dashboard
from tests.unit.services.test_notifications import FakeSink

LOST = "its container disk is erased when it stops, and no volume is attached"


def ruled(gov: Governor, *rules: SweepRule) -> Governor:
    """The same governor with these sweep rules configured."""
    config = replace(gov.ctx.config, sweep_rules=rules)
    return replace(gov, ctx=replace(gov.ctx, config=config))


def interval(gov: Governor) -> None:
    """One billing interval passes, and every periodic task runs once."""
    gov.tick(gov.ctx.config.billing_interval_s)


def criticals(gov: Governor, about: str) -> list[str]:
    with gov.session() as s:
        return [
            e.message
            for e in repo.events(s)
            if e.severity is Severity.CRITICAL and about in e.subject
        ]


def scrape(gov: Governor) -> dict[str, float]:
    with gov.session() as s:
        families = metrics.collect(s, gov.ctx.config, gov.clock.now(), gov.ctx.replica, True)
    return {f.name: f.samples[0][1] for f in families if f.name.startswith("governor_ungoverned")}


def gated_launch(gov: Governor, gpus: int) -> tuple[str, str, str]:
    """A SkyPilot launch of `gpus` H100s that the gate accepted and reserved under a new
    budget: the budget, the launch and its claim's secret."""
    config = replace(gov.ctx.config, rate_card=RateCard.of({"fake:H100": "2.00"}))
    budget = gov.budget(ceiling="500")
    request = LaunchRequest("skypilot", (Candidate("fake", "H100", gpus),), budget_ref=budget)
    with gov.session() as s:
        answer = launches.judge(
            s, config, request, gov.clock.now(), reserve=True, claim_key=b"k" * 32
        )
    assert answer.launch is not None and answer.claim is not None
    return budget, answer.launch.id, answer.claim


def pod_of(gov: Governor, ref: str) -> tuple[str, PodState] | None:
    with gov.session() as s:
        row = repo.pod_by_ref(s, "fake", ref)
        return None if row is None else (row.budget_id, row.state)


def test_a_billing_pod_under_no_budget_is_told_shown_and_counted_within_an_interval(
    gov: Governor, client: TestClient
) -> None:
    gov.budget()
    gov.cloud.launch("stray-1", name="notebook", gpu_type="H100", gpu_count=2)
    assert scrape(gov) == {"governor_ungoverned_pods": 0, "governor_ungoverned_usd_per_hour": 0}
    interval(gov)

    told = criticals(gov, "fake:stray-1")
    assert len(told) == 1 and "Ungoverned pod" in told[0] and "$3.60/h" in told[0]
    dash = read_dashboard(gov)
    (line,) = dash.ungoverned
    assert (line.provider, line.provider_ref, line.name) == ("fake", "stray-1", "notebook")
    assert (line.gpu_type, line.gpu_count, line.hourly_rate) == ("H100", 2, Decimal("3.60"))
    assert line.stop_due_at is None and dash.ungoverned_rate == Decimal("3.60")
    assert scrape(gov) == {"governor_ungoverned_pods": 1, "governor_ungoverned_usd_per_hour": 3.6}

    body = ok(client.get("/v1/status"))
    assert body["ungoverned_usd_per_hour"] == "3.60"
    assert body["ungoverned"][0]["provider_ref"] == "stray-1"
    assert body["ungoverned"][0]["hourly_rate_usd"] == "3.60"
    signed_in = client.post("/login", data={"token": OPERATOR}, follow_redirects=False)
    assert signed_in.status_code == 303, signed_in.text[:200]
    page = client.get("/status").text
    assert 'data-section="ungoverned"' in page and page.index("stray-1") < page.index("pilot")

    interval(gov)
    interval(gov)
    assert len(criticals(gov, "fake:stray-1")) == 1  # once per pod, not every pass
    assert gov.cloud.state.pods["stray-1"].stop_calls == 0  # no rule: never stopped


def test_an_ungoverned_pod_is_a_notice_through_the_webhooks_once(gov: Governor) -> None:
    sink = FakeSink()
    notifier = Notifier([Subscription(sink, Severity.CRITICAL)])
    route_events(gov.ctx.sessions, notifier)
    gov.cloud.launch("stray-1")
    interval(gov)
    interval(gov)
    notifier.start()
    notifier.stop()
    assert [n.message[:40] for n in sink.attempts] == ["Ungoverned pod: fake:stray-1 bills at $3"]


def test_many_pods_found_at_once_are_told_in_one_event_and_each_shown(gov: Governor) -> None:
    for i in range(sweep.TOLD_ONE_BY_ONE + 2):
        gov.cloud.launch(f"stray-{i:02d}")
    interval(gov)
    (told,) = criticals(gov, "fake:")
    assert told.startswith("Ungoverned pods: 12 pods of fake bill under no budget")
    assert "$43.20/h together" in told and "stray-00" in told and "and 2 more" in told
    assert len(read_dashboard(gov).ungoverned) == 12
    gov.cloud.launch("stray-late")
    interval(gov)
    assert len(criticals(gov, "fake:")) == 2 and criticals(gov, "fake:stray-late") != []


def test_a_pod_that_stops_billing_is_no_longer_ungoverned(gov: Governor) -> None:
    gov.cloud.launch("stray-1")
    interval(gov)
    assert len(read_dashboard(gov).ungoverned) == 1
    gov.cloud.stop("stray-1")  # stopped from the console
    interval(gov)
    assert read_dashboard(gov).ungoverned == ()
    assert scrape(gov)["governor_ungoverned_pods"] == 0


def test_a_labelled_pod_appearing_is_registered_under_its_budget_that_adopts_them(
    gov: Governor,
) -> None:
    by_name = gov.budget(adopt_labelled_pods=True)
    by_id = gov.budget(adopt_labelled_pods=True)
    gov.cloud.launch("lab-1", labels={BUDGET_LABEL: "pilot", LAUNCH_LABEL: "launch-1"})
    gov.cloud.launch("lab-2", labels={BUDGET_LABEL: by_id}, gpu_type="A100", gpu_count=8)
    interval(gov)
    assert pod_of(gov, "lab-1") == (by_name, PodState.RUNNING)
    assert pod_of(gov, "lab-2") == (by_id, PodState.RUNNING)
    with gov.session() as s:
        row = repo.pod_by_ref(s, "fake", "lab-2")
        assert row is not None and (row.gpu_type, row.gpu_count) == ("A100", 8)
    assert read_dashboard(gov).ungoverned == ()
    assert criticals(gov, "fake:lab") == []


def test_a_label_alone_does_not_spend_a_budget_until_its_operator_lets_it(
    gov: Governor, client: TestClient
) -> None:
    """Anyone who can launch in a shared account can write a budget's label: such a pod is
    ungoverned (told, shown, counted, naming the label) and the budget it names is warned,
    until an operator of that budget lets its label alone register pods (recorded)."""
    budget = gov.budget()
    gov.cloud.launch("lab-1", labels={BUDGET_LABEL: "pilot"})
    interval(gov)
    assert pod_of(gov, "lab-1") is None
    (told,) = criticals(gov, "fake:lab-1")
    assert f"its label {BUDGET_LABEL}='pilot' alone does not register a pod" in told
    (line,) = read_dashboard(gov).ungoverned
    assert "does not adopt labelled pods" in line.reason
    assert scrape(gov)["governor_ungoverned_pods"] == 1
    with gov.session() as s:
        (warned,) = [e for e in repo.events(s, budget_id=budget) if e.severity is Severity.WARNING]
    assert warned.message.startswith("A pod labelled for this budget was not adopted: fake:lab-1")
    interval(gov)
    with gov.session() as s:  # told once, not every pass
        assert len([e for e in repo.events(s, budget_id=budget) if "not adopted" in e.message]) == 1

    assert ok(client.get(f"/v1/budgets/{budget}"))["adopt_labelled_pods"] is False
    said = {"adopt_labelled_pods": True, "reason": "our launcher labels every pod"}
    adopted = ok(client.post(f"/v1/budgets/{budget}/adoption", json=said))
    assert adopted["adopt_labelled_pods"] is True
    with gov.session() as s:
        audit = [e for e in repo.events(s, budget_id=budget) if "now adopts" in e.message]
    assert len(audit) == 1 and "our launcher labels every pod" in audit[0].message
    assert audit[0].evidence["by"]
    interval(gov)
    assert pod_of(gov, "lab-1") == (budget, PodState.RUNNING)
    assert read_dashboard(gov).ungoverned == ()


def test_a_copied_launch_label_wins_nothing(gov: Governor) -> None:
    """A launch is won by its first pod: a second pod carrying the same labels (copied, or
    listed in the same pass) is not registered as the launch's, nor under its budget."""
    budget, launch_id, _ = gated_launch(gov, 1)
    labels = {BUDGET_LABEL: budget, LAUNCH_LABEL: launch_id}
    gov.cloud.launch("sky-1", labels=labels, gpu_type="H100", gpu_count=1)
    gov.cloud.launch("sky-copy", labels=labels, gpu_type="H100", gpu_count=1)
    interval(gov)
    gov.cloud.launch("sky-later", labels=labels, gpu_type="H100", gpu_count=1)
    interval(gov)
    with gov.session() as s:
        won = repo.pod_by_ref(s, "fake", "sky-1")
        assert won is not None and (won.budget_id, won.launch_id) == (budget, launch_id)
    assert pod_of(gov, "sky-copy") is None and pod_of(gov, "sky-later") is None
    reasons = {u.provider_ref: u.reason for u in read_dashboard(gov).ungoverned}
    assert set(reasons) == {"sky-copy", "sky-later"}
    assert all(f"{LAUNCH_LABEL}={launch_id!r} names none" in r for r in reasons.values())
    with gov.session() as s, pytest.raises(Conflict, match="already has its pod"):
        pods.register(
            s,
            gov.ctx,
            budget,
            pods.Registration("fake", "sky-later", launch_id=launch_id),
            gov.clock.now(),
        )


def test_a_labelled_pod_naming_no_budget_is_ungoverned(gov: Governor) -> None:
    gov.budget()
    gov.cloud.launch("lab-1", labels={BUDGET_LABEL: "no-such-budget"})
    interval(gov)
    assert pod_of(gov, "lab-1") is None
    (line,) = read_dashboard(gov).ungoverned
    assert "names no budget" in line.reason


def test_a_labelled_non_preservable_pod_is_refused_with_a_critical_event(gov: Governor) -> None:
    gov.budget(adopt_labelled_pods=True)
    gov.cloud.launch("lab-1", labels={BUDGET_LABEL: "pilot"})
    gov.cloud.losing["lab-1"] = LOST
    interval(gov)
    assert pod_of(gov, "lab-1") is None
    (told,) = criticals(gov, "fake:lab-1")
    assert "registration was refused" in told and LOST in told
    (line,) = read_dashboard(gov).ungoverned
    assert LOST in line.reason
    interval(gov)
    assert len(criticals(gov, "fake:lab-1")) == 1


def test_a_plan_requiring_budgets_labelled_pod_without_a_plan_is_ungoverned(
    gov: Governor,
) -> None:
    with gov.session() as s:
        declared = budgets.Declaration(
            "strict", Decimal(100), require_plan=True, adopt_labelled_pods=True
        )
        budgets.declare(s, declared, gov.clock.now())
    gov.cloud.launch("lab-1", labels={BUDGET_LABEL: "strict", LAUNCH_LABEL: "launch-9"})
    interval(gov)
    assert pod_of(gov, "lab-1") is None
    (line,) = read_dashboard(gov).ungoverned
    assert "requires a plan" in line.reason and line.launch_id == "launch-9"


def test_an_adoption_rule_puts_a_labelled_pod_under_its_budget(gov: Governor) -> None:
    budget = gov.budget()
    adopting = ruled(
        gov,
        SweepRule("other-cloud", label="team", adopt="pilot"),  # another account's rule
        SweepRule("fake", label="team", value="nl*", adopt="pilot"),
    )
    adopting.cloud.launch("nlp-1", labels={"team": "nlp"})
    adopting.cloud.launch("cv-1", labels={"team": "vision"})
    interval(adopting)
    assert pod_of(adopting, "nlp-1") == (budget, PodState.RUNNING)
    assert pod_of(adopting, "cv-1") is None
    assert [u.provider_ref for u in read_dashboard(adopting).ungoverned] == ["cv-1"]


def test_a_stop_rule_stops_preserving_after_its_grace_and_not_before(gov: Governor) -> None:
    grace = 3600.0
    stopping = ruled(gov, SweepRule("fake", name="scratch-*", stop_after_s=grace))
    stopping.cloud.launch("p-1", name="scratch-a")
    stopping.cloud.launch("p-2", name="keep-me")
    stopping.tick()
    (due, _) = sorted(read_dashboard(stopping).ungoverned, key=lambda u: u.provider_ref)
    assert due.stop_due_at == stopping.clock.now() + timedelta(seconds=grace)
    stopping.tick(grace - 1)
    assert stopping.cloud.state.pods["p-1"].stop_calls == 0  # not a second early
    stopping.tick(1)
    assert stopping.cloud.state.pods["p-1"].stop_calls == 1
    with stopping.session() as s:
        told = [e for e in repo.events(s) if "stopped by its sweep rule" in e.message]
    assert len(told) == 1 and "keeping its workspace: stopping" in told[0].message
    stopping.tick(60)  # the fake cloud stops it: no longer billing, no longer ungoverned
    assert stopping.cloud.state.pods["p-1"].state(stopping.clock.now()) is PodState.STOPPED
    assert stopping.cloud.state.pods["p-1"].stop_calls == 1  # sent once
    assert stopping.cloud.state.pods["p-2"].stop_calls == 0  # no rule matches it
    assert [u.provider_ref for u in read_dashboard(stopping).ungoverned] == ["p-2"]


def test_a_stop_rule_never_stops_a_pod_whose_stop_would_lose_its_workspace(
    gov: Governor,
) -> None:
    stopping = ruled(gov, SweepRule("fake", name="*", stop_after_s=0))
    stopping.cloud.launch("p-1")
    stopping.cloud.losing["p-1"] = LOST
    stopping.tick()
    stopping.tick(600)
    assert stopping.cloud.state.pods["p-1"].stop_calls == 0
    told = criticals(stopping, "fake:p-1")
    assert len(told) == 2
    assert any("not stopped" in message and LOST in message for message in told)


def test_without_the_lease_nothing_is_listed(gov: Governor) -> None:
    gov.cloud.launch("stray-1")
    gov.ctx.lease.release()
    listed: list[str] = []
    real = gov.cloud.pods
    gov.cloud.pods = lambda: listed.append("asked") or real()  # type: ignore[method-assign]
    with pytest.raises(NotLeader):
        sweep.sweep_all(gov.ctx)
    assert listed == []


def test_a_launched_pod_appearing_is_registered_as_its_launch_and_its_job_claims_once(
    gov: Governor, client: TestClient
) -> None:
    """The whole path of a gated launch: the gate accepts and reserves it; its pod appears in
    the account carrying the labels the gate gave it and is registered under the budget as
    that launch's (the reservation released, the meter takes over); the job's claim works
    once."""
    budget, launch_id, secret = gated_launch(gov, 2)
    with gov.session() as s:
        assert repo.reserved_for_launches(s, [budget], gov.clock.now())[budget] > 0
    early = client.post("/v1/runs/claim", json={"claim": secret})
    assert early.status_code == 409 and "not registered yet" in early.json()["error"]["message"]

    labels = {BUDGET_LABEL: budget, LAUNCH_LABEL: launch_id}
    gov.cloud.launch("sky-1", labels=labels, gpu_type="H100", gpu_count=2)
    interval(gov)
    assert pod_of(gov, "sky-1") == (budget, PodState.RUNNING)
    with gov.session() as s:
        pod = repo.pod_by_ref(s, "fake", "sky-1")
        assert pod is not None and pod.launch_id == launch_id
        assert repo.reserved_for_launches(s, [budget], gov.clock.now())[budget] == 0

    run = client.post("/v1/runs/claim", json={"claim": secret, "total_steps": 10})
    assert run.status_code == 201, run.text
    assert run.json()["pod_id"] == pod.id and run.json()["token"]
    again = client.post("/v1/runs/claim", json={"claim": secret})
    assert again.status_code == 409 and "already used" in again.json()["error"]["message"]


def test_an_expired_claim_is_answered_as_one_no_launch_has(
    gov: Governor, client: TestClient
) -> None:
    """A claim past its time and a secret no launch ever had get the same 404, word for word:
    a secret tried learns nothing of whether it once was one."""
    budget, launch_id, secret = gated_launch(gov, 1)
    labels = {BUDGET_LABEL: budget, LAUNCH_LABEL: launch_id}
    gov.cloud.launch("sky-1", labels=labels, gpu_type="H100", gpu_count=1)
    interval(gov)
    assert pod_of(gov, "sky-1") == (budget, PodState.RUNNING)
    gov.clock.advance(gov.ctx.config.claim_ttl_s)

    expired = client.post("/v1/runs/claim", json={"claim": secret})
    unknown = client.post("/v1/runs/claim", json={"claim": launches.CLAIM_PREFIX + "x" * 43})
    assert expired.status_code == unknown.status_code == 404
    assert expired.content == unknown.content
    assert "or its claim expired" in expired.json()["error"]["message"]
