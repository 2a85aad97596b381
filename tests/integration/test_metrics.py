"""The families behind /metrics, with a frozen clock: every figure exact (SQLite and
PostgreSQL); and the Grafana dashboard asks only for series that exist."""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from dataclasses import replace
from decimal import Decimal
from pathlib import Path

from governor.db import repository as repo
from governor.domain.model import Requester
from governor.domain.telemetry import GIB
from governor.services.fleet import budgets, pods
from governor.services.money import extensions
from governor.services.view import metrics
from tests.clock import FrozenClock
from tests.integration.conftest import BY, Governor, gpu_sample, make_governor

DASHBOARD = Path(__file__).parents[2] / "deploy" / "grafana" / "governor-dashboard.json"


def scrape(gov: Governor) -> dict[str, dict[tuple[str, ...], float]]:
    with gov.session() as s:
        families = metrics.collect(
            s, gov.ctx.config, gov.clock.now(), gov.ctx.replica, gov.ctx.leading()
        )
    return {f.name: dict(f.samples) for f in families}


def test_a_running_pilot_is_measured_exactly(gov: Governor) -> None:
    budget = gov.budget(ceiling="100", reserve="5")
    with gov.session() as s:
        named = pods.Registration("fake", "pod-1", name="h100-sft")
        pod = pods.register(s, gov.ctx, budget, named, gov.clock.now()).id
    run = gov.run(budget, pod)  # named "job"; 300 s of checkpoint grace
    gov.beat(run)
    with gov.session() as s:
        ext = extensions.request(
            s, budget, Decimal(20), "eval", Requester.OPERATOR, gov.clock.now()
        )
    with gov.session() as s:
        extensions.decide(s, gov.ctx.config, ext.id, True, None, gov.clock.now(), by=BY)
    gov.report(pod, gpu_sample(util=87.5, used_gib=60.0))
    gov.tick(10)

    m = scrape(gov)
    b = (budget, "pilot")
    assert m["governor_budget_ceiling_dollars"] == {b: 100.0}
    assert m["governor_budget_effective_ceiling_dollars"] == {b: 120.0}
    assert m["governor_budget_spent_dollars"] == {b: 0.01}  # 10 s at $3.60/h
    # + 3.60/h x (300 s grace + 30 s stop latency + 4 x 5 s reaction) + the $5 reserve
    assert m["governor_budget_committed_dollars"] == {b: 5.36}
    # its parts: spent 0.01 + shutdown 0.35 + storage tail 0 + reserve 5
    assert m["governor_budget_shutdown_dollars"] == {b: 0.35}
    assert m["governor_budget_storage_tail_dollars"] == {b: 0.0}
    assert m["governor_budget_reserve_dollars"] == {b: 5.0}
    assert m["governor_budget_held_for_plans_dollars"] == {b: 0.0}  # no plan holds anything
    assert m["governor_budget_remaining_dollars"] == {b: 114.64}
    assert m["governor_budget_burn_rate_dollars_per_hour"] == {b: 3.6}
    assert m["governor_budget_state"][(*b, "open")] == 1.0
    assert sum(m["governor_budget_state"].values()) == 1.0
    assert m["governor_extensions"][(*b, "approved")] == 1
    # pods and runs carry their names beside their ids (and their budget's)
    p = (pod, "h100-sft", *b)
    assert m["governor_pod_state"][(*p, "running")] == 1.0
    assert m["governor_pod_rate_dollars_per_hour"] == {p: 3.6}
    assert m["governor_pod_spent_dollars"] == {p: 0.01}
    assert m["governor_run_heartbeat_age_seconds"] == {(run, "job", *p): 10.0}
    assert m["governor_run_heartbeat_timeout_seconds"] == {(run, "job", *p): 120.0}
    # $114.64 left at $3.60/h
    assert m["governor_budget_seconds_to_ceiling"] == {b: 114.64 / 3.6 * 3600}
    assert m["governor_stop_orders_failing"] == {b: 0}
    g = ("GPU-0", pod, "h100-sft")
    assert m["governor_gpu_info"] == {(*g, "0", "H100"): 1.0}
    assert m["governor_gpu_utilization_ratio"] == {g: 0.875}
    assert m["governor_gpu_memory_used_bytes"] == {g: 60.0 * GIB}
    assert m["governor_gpu_memory_total_bytes"] == {g: 80.0 * GIB}
    assert m["governor_gpu_power_watts"] == {g: 600.0}
    assert m["governor_gpu_temperature_celsius"] == {g: 60.0}
    assert m["governor_gpu_sample_age_seconds"] == {g: 10.0}
    assert set(m["governor_stop_orders"].values()) == {0}


def test_only_the_run_metrics_an_operator_names_are_exported(gov: Governor) -> None:
    budget = gov.budget()
    with gov.session() as s:
        named = pods.Registration("fake", "pod-1", name="h100-sft")
        pod = pods.register(s, gov.ctx, budget, named, gov.clock.now()).id
    run = gov.run(budget, pod)
    gov.beat(run, 1, metrics={"loss": 2.5, "reward_mean": 0.25, "kl": 0.01})
    gov.beat(run, 2, metrics={"lr": 1e-4})  # each value is sent once: loss stays 2.5
    gov.beat(run, 3, metrics={"reward_mean": "NaN"})  # as sent, not the last finite one
    gov.tick(1)
    assert scrape(gov)["governor_run_metric"] == {}  # none by default

    config = replace(gov.ctx.config, exported_run_metrics=("loss", "reward_mean", "unsent"))
    with gov.session() as s:
        families = metrics.collect(s, config, gov.clock.now(), "r", True)
    [family] = [f for f in families if f.name == "governor_run_metric"]
    labels = (run, "job", pod, "h100-sft", budget, "pilot")
    assert family.labels == (
        "run",
        "run_name",
        "pod",
        "pod_name",
        "budget",
        "budget_name",
        "metric",
    )
    values = {labels[-1]: value for labels, value in family.samples}
    assert values.keys() == {"loss", "reward_mean"}  # kl and lr not named; "unsent" never sent
    assert values["loss"] == 2.5 and math.isnan(values["reward_mean"])
    assert {tuple(ls[:-1]) for ls, _ in family.samples} == {labels}


def test_stop_orders_and_events_are_counted(gov: Governor) -> None:
    budget = gov.budget()
    pod = gov.pod(budget)
    gov.report(pod, gpu_sample())
    with gov.session() as s:
        pods.stop_manually(s, gov.ctx, pod, "done", gov.clock.now(), by=BY)
    assert scrape(gov)["governor_stop_orders"][(budget, "pilot", "requested")] == 1
    gov.tick(1)
    gov.tick(60)
    m = scrape(gov)
    assert m["governor_stop_orders"][(budget, "pilot", "stopped")] == 1
    assert sum(m["governor_stop_orders"].values()) == 1
    assert m["governor_pod_state"][(pod, "pod-1", budget, "pilot", "stopped")] == 1.0
    assert m["governor_gpu_info"] == {}  # a stopped pod's GPUs are no longer its own
    with gov.session() as s:
        recorded = Counter(
            (e.severity.value, e.category.value, e.budget_id or "", "pilot" if e.budget_id else "")
            for e in repo.events(s, limit=1000)
        )
    counted = {k: v for k, v in m["governor_events_total"].items() if v}
    assert counted == dict(recorded)
    assert {k[2] for k in counted} == {budget}
    # every severity and category, zeros too, for the budget and for events of none
    assert len(m["governor_events_total"]) == 2 * 3 * 7
    assert m["governor_budget_seconds_to_ceiling"] == {}  # a stopped pod burns nothing here


def test_a_failing_stop_is_counted_until_the_pod_stops(
    migrated_url: str, clock: FrozenClock
) -> None:
    gov = make_governor(migrated_url, clock, failures=2)  # the provider refuses twice, then stops
    try:
        budget = gov.budget()
        pod = gov.pod(budget)
        with gov.session() as s:
            pods.stop_manually(s, gov.ctx, pod, "done", gov.clock.now(), by=BY)
        gov.tick(1)  # the first call fails: retried after a backoff
        assert scrape(gov)["governor_stop_orders_failing"] == {(budget, "pilot"): 1}
        for _ in range(10):
            gov.tick(60)
        m = scrape(gov)
        assert m["governor_pod_state"][(pod, "pod-1", budget, "pilot", "stopped")] == 1.0
        assert m["governor_stop_orders_failing"] == {(budget, "pilot"): 0}
    finally:
        gov.ctx.engine.dispose()


def test_closed_budgets_leave_the_event_counter(gov: Governor) -> None:
    budget = gov.budget()
    gov.tick(1)
    with gov.session() as s:
        budgets.close(s, budget, "pilot over", False, gov.clock.now(), by=BY)
    labelled = {k[2] for k in scrape(gov)["governor_events_total"]}
    assert labelled == {""}  # only the series of events of no budget are left


def test_the_dashboard_queries_only_exported_series(gov: Governor) -> None:
    exported = set(scrape(gov))
    dashboard = json.loads(DASHBOARD.read_text())
    panels = [p for p in dashboard["panels"] if p["type"] != "row"]
    queried = set()
    for panel in panels:
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            queried |= set(re.findall(r"\bgovernor_[a-z_]+\b", target["expr"]))
    variables = json.dumps(dashboard["templating"])
    queried |= set(re.findall(r"\bgovernor_[a-z_]+\b", variables))
    per_replica = {f.name for f in metrics.this_replica({}, {}, False, {})}  # from memory
    assert queried <= exported | per_replica, queried - exported - per_replica
    assert exported <= queried, f"not on the dashboard: {exported - queried}"


NAMED = {"budget": "budget_name", "pod": "pod_name", "run": "run_name"}


def test_every_id_label_has_its_name_beside_it_and_no_series_of_its_own(gov: Governor) -> None:
    """A name labels the series of its id: dropping the names leaves every series distinct, so
    they add no series (bounded cardinality)."""
    for ref in ("pod-a", "pod-b"):
        budget = gov.budget()
        with gov.session() as s:
            named = pods.Registration("fake", ref, name="trainer")  # the same name in each
            pod = pods.register(s, gov.ctx, budget, named, gov.clock.now()).id
        gov.run(budget, pod)
        gov.report(pod, gpu_sample())
    gov.tick(1)
    with gov.session() as s:
        families = metrics.collect(s, gov.ctx.config, gov.clock.now(), "r", True)
    named = 0
    for family in families:
        for id_label, name_label in NAMED.items():
            if id_label in family.labels:
                assert name_label in family.labels, (family.name, name_label)
                named += 1
        kept = [i for i, label in enumerate(family.labels) if label not in NAMED.values()]
        without_names = {tuple(labels[i] for i in kept) for labels, _ in family.samples}
        assert len(without_names) == len(family.samples), family.name
    assert named >= 20  # budgets, pods, runs and GPUs all have them
    pods_by_name = {
        labels[:2]
        for labels, _ in dict((f.name, f) for f in families)["governor_pod_state"].samples
    }
    assert {name for _, name in pods_by_name} == {"trainer"}
    assert len(pods_by_name) == 2


def test_the_dashboards_legends_name_budgets_pods_and_runs_by_name() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    legends = [
        target.get("legendFormat", "")
        for panel in dashboard["panels"]
        for target in panel.get("targets", [])
    ]
    shown = {label for legend in legends for label in re.findall(r"\{\{(\w+)\}\}", legend)}
    assert {"budget_name", "pod_name", "run_name"} <= shown
    assert not shown & set(NAMED), f"a legend shows a bare id: {sorted(shown & set(NAMED))}"
