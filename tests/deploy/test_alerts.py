"""deploy/prometheus/alerts.yml: a Prometheus rule file that promtool accepts, whose every
expression reads only series a real governor's /metrics exposes (or Prometheus's own `up`),
and whose alerts fire, as promtool's rule tests show, when they should and not otherwise."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import promql_parser
import pytest
import yaml
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from governor.app import create_app
from governor.db import schema
from governor.db.engine import build_engine, session_factory, unit_of_work
from governor.services.security import tokens
from governor.settings import load_settings
from tests.clock import FrozenClock
from tests.programs import program

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "deploy" / "prometheus" / "alerts.yml"
PROMETHEUS_OWN = {"up": {"job", "instance"}}
DURATION = re.compile(r"^([0-9]+(ms|s|m|h|d|w|y))+$")
OPERATOR = "gov_op_alert-rules"


@pytest.fixture(scope="module")
def labelled(tmp_path_factory: pytest.TempPathFactory) -> dict[str, set[str]]:
    """The metric names a real governor's /metrics declares, each with its labels: a budget
    with a running pod and run, and a webhook configured (its delivery counter comes with
    one)."""
    url = f"sqlite:///{tmp_path_factory.mktemp('metrics') / 'governor.db'}"
    schema.upgrade(url)
    engine = build_engine(url)
    with unit_of_work(session_factory(engine)) as session:
        tokens.bootstrap_operator(session, OPERATOR, FrozenClock().now())
    engine.dispose()
    hooks = [{"url": "http://127.0.0.1:9/hook", "kind": "json"}]
    settings = load_settings(database_url=url, scheduler_enabled=False, webhooks=json.dumps(hooks))
    with TestClient(
        create_app(settings), headers={"Authorization": f"Bearer {OPERATOR}"}
    ) as client:
        budget = client.post("/v1/budgets", json={"name": "pilot", "ceiling_usd": "100"}).json()
        pod = client.post(
            f"/v1/budgets/{budget['id']}/pods", json={"provider": "fake", "provider_ref": "p1"}
        ).json()
        client.post(f"/v1/budgets/{budget['id']}/runs", json={"name": "r", "pod_id": pod["id"]})
        text = client.get("/metrics").text
    # the parser names a counter without its _total
    return {
        f"{f.name}_total" if f"{f.name}_total" in text else f.name: {
            label for sample in f.samples for label in sample.labels
        }
        for f in text_string_to_metric_families(text)
    }


@pytest.fixture(scope="module")
def exposed(labelled: dict[str, set[str]]) -> set[str]:
    return set(labelled)


def _rules() -> list[dict[str, Any]]:
    document = yaml.safe_load(RULES.read_text(encoding="utf-8"))
    return [rule for group in document["groups"] for rule in group["rules"]]


def _metric_names(expr: str) -> list[str | None]:
    names: list[str | None] = []

    def visit(node: object) -> None:
        if isinstance(node, promql_parser.VectorSelector):
            names.append(node.name)

    promql_parser.walk(promql_parser.parse(expr), pre_visit=visit)
    return names


def test_the_exposed_names_are_found(exposed: set[str]) -> None:
    assert {"governor_budget_spent_dollars", "governor_run_heartbeat_age_seconds"} <= exposed
    assert {"governor_events_total", "governor_webhook_deliveries_total"} <= exposed
    assert {"governor_leader", "governor_budget_seconds_to_ceiling"} <= exposed


def test_the_file_has_the_rule_file_shape() -> None:
    document = yaml.safe_load(RULES.read_text(encoding="utf-8"))
    assert set(document) == {"groups"}
    assert document["groups"]
    for group in document["groups"]:
        assert set(group) <= {"name", "interval", "rules"}
        assert group["name"] and group["rules"]
    alerts = [rule["alert"] for rule in _rules()]
    assert len(alerts) == len(set(alerts)), "alert names are unique"


@pytest.mark.parametrize("rule", _rules(), ids=lambda rule: rule["alert"])
def test_each_alert_is_complete(rule: dict[str, Any]) -> None:
    assert set(rule) == {"alert", "expr", "for", "labels", "annotations"}
    assert re.fullmatch(r"[A-Z][A-Za-z]+", rule["alert"])
    assert DURATION.match(str(rule["for"])), rule["for"]
    assert rule["labels"]["severity"] in {"warning", "critical"}
    assert rule["annotations"]["summary"] and rule["annotations"]["description"]


@pytest.mark.parametrize("rule", _rules(), ids=lambda rule: rule["alert"])
def test_each_expression_reads_only_exposed_series(rule: dict[str, Any], exposed: set[str]) -> None:
    names = _metric_names(rule["expr"])
    assert names, "the expression reads some series"
    assert None not in names, "every selector names its metric"
    unknown = set(names) - exposed - set(PROMETHEUS_OWN)
    assert not unknown, f"not exposed by the governor's /metrics: {sorted(unknown)}"


@pytest.mark.parametrize("rule", _rules(), ids=lambda rule: rule["alert"])
def test_each_annotation_reads_labels_its_series_have(
    rule: dict[str, Any], labelled: dict[str, set[str]]
) -> None:
    """A page names what people call things: `$labels.x` is a label of a series the alert
    reads (a run and a pod by name, beside the ids), never one that renders empty."""
    known = {**labelled, **PROMETHEUS_OWN}
    read = [known[name] for name in _metric_names(rule["expr"]) if name]
    if not any(read):  # none of its series has a sample in this scene (the leader's passes)
        return
    have = set().union(*read)
    used = set(re.findall(r"\$labels\.(\w+)", json.dumps(rule["annotations"])))
    assert used <= have, f"labels no series of {rule['alert']} has: {sorted(used - have)}"


def _promtool(*args: str) -> str:
    """Prometheus's own checker (Debian's prometheus package ships it)."""
    result = subprocess.run(
        [program("promtool"), *args], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def test_promtool_accepts_the_rules() -> None:
    assert f"SUCCESS: {len(_rules())} rules found" in _promtool("check", "rules", str(RULES))


BUDGET_A = {"budget": "bud_a", "budget_name": "h100-sft"}
BUDGET_B = {"budget": "bud_b", "budget_name": "eval"}
RUN = {"run": "run_1", "run_name": "sft", "pod": "pod_1", "pod_name": "h100-sft", **BUDGET_A}
SINK = "json webhook 1 at http://hooks.example.test"


def _series(name: str, labels: dict[str, str], values: str) -> dict[str, str]:
    inner = ", ".join(f'{k}="{v}"' for k, v in labels.items())
    return {"series": f"{name}{{{inner}}}", "values": values}


def _expect(alert: str, at: str, *fired: dict[str, str]) -> dict[str, Any]:
    severity = next(r["labels"]["severity"] for r in _rules() if r["alert"] == alert)
    return {
        "eval_time": at,
        "alertname": alert,
        "exp_alerts": [{"exp_labels": {"severity": severity, **labels}} for labels in fired],
    }


# What the issue asks an operator to be paged for, each as a scene promtool plays minute by
# minute: the budget past 90% (an open one: a closed budget stays quiet), the ceiling less
# than an hour away at the current burn, a lost heartbeat, a failing stop, webhooks giving up,
# pods billing under no budget, and no leader (also when no replica exports anything at all).
SCENES: list[dict[str, Any]] = [
    {
        "input_series": [
            _series("governor_budget_committed_dollars", BUDGET_A, "80 92 95 95 95 95 95 95"),
            _series("governor_budget_effective_ceiling_dollars", BUDGET_A, "100x7"),
            _series("governor_budget_state", {**BUDGET_A, "state": "open"}, "1x7"),
            _series("governor_budget_committed_dollars", BUDGET_B, "99x7"),
            _series("governor_budget_effective_ceiling_dollars", BUDGET_B, "100x7"),
            _series("governor_budget_state", {**BUDGET_B, "state": "open"}, "0x7"),
        ],
        "alert_rule_test": [
            _expect("GovernorBudgetNearCeiling", "5m"),
            _expect("GovernorBudgetNearCeiling", "6m", BUDGET_A),
        ],
    },
    {
        "input_series": [
            _series("governor_budget_seconds_to_ceiling", BUDGET_A, "5000 4000 3000 2000 1000"),
            _series("governor_budget_burn_rate_dollars_per_hour", BUDGET_B, "0x4"),
        ],
        "alert_rule_test": [
            _expect("GovernorBudgetCeilingWithinAnHour", "3m"),
            _expect("GovernorBudgetCeilingWithinAnHour", "4m", BUDGET_A),
        ],
    },
    {
        "input_series": [
            _series("governor_run_heartbeat_age_seconds", RUN, "60 120 180"),
            _series("governor_run_heartbeat_timeout_seconds", RUN, "120x2"),
        ],
        "alert_rule_test": [
            _expect("GovernorHeartbeatLost", "1m"),
            _expect("GovernorHeartbeatLost", "2m", RUN),
        ],
    },
    {
        "input_series": [
            _series("governor_stop_orders_failing", BUDGET_A, "0 1 1 1 1 1 1"),
            _series("governor_stop_orders_failing", BUDGET_B, "0x6"),
        ],
        "alert_rule_test": [
            _expect("GovernorStopOrderFailing", "5m"),
            _expect("GovernorStopOrderFailing", "6m", BUDGET_A),
        ],
    },
    {
        "input_series": [
            _series(
                "governor_webhook_deliveries_total", {"sink": SINK, "outcome": "gave_up"}, "0 0 1"
            ),
            _series(
                "governor_webhook_deliveries_total", {"sink": SINK, "outcome": "failed"}, "0 4 8"
            ),
            _series(
                "governor_webhook_deliveries_total", {"sink": "slack", "outcome": "gave_up"}, "0x2"
            ),
        ],
        "alert_rule_test": [
            _expect("GovernorWebhookDeliveriesFailing", "1m"),
            _expect("GovernorWebhookDeliveriesFailing", "2m", {"sink": SINK}),
        ],
    },
    {
        "input_series": [
            _series("governor_leader", {"replica": "a"}, "1 0 0 0"),
            _series("governor_leader", {"replica": "b"}, "0 0 0 0"),
        ],
        "alert_rule_test": [
            _expect("GovernorNoLeader", "1m"),
            _expect("GovernorNoLeader", "2m", {}),
        ],
    },
    {
        "input_series": [
            _series("governor_ungoverned_pods", {"instance": "g1:8000"}, "0 0 2 2 0"),
            _series("governor_ungoverned_pods", {"instance": "g2:8000"}, "0x4"),
        ],
        "alert_rule_test": [
            _expect("GovernorUngovernedPods", "1m"),
            _expect("GovernorUngovernedPods", "2m", {}),
            _expect("GovernorUngovernedPods", "4m"),
        ],
    },
    {
        "input_series": [_series("up", {"job": "gpu-governor", "instance": "g1:8000"}, "0x2")],
        "alert_rule_test": [_expect("GovernorNoLeader", "1m", {})],
    },
]


def test_the_alerts_fire_when_they_should_and_only_then(tmp_path: Path) -> None:
    document = yaml.safe_load(RULES.read_text(encoding="utf-8"))
    for group in document["groups"]:
        for rule in group["rules"]:
            del rule["annotations"]  # their templates are checked above; here, who fires
    (tmp_path / "alerts.yml").write_text(yaml.safe_dump(document), encoding="utf-8")
    scenes = [{"interval": "1m", **scene} for scene in SCENES]
    tests = {"rule_files": ["alerts.yml"], "evaluation_interval": "1m", "tests": scenes}
    (tmp_path / "alerts_test.yml").write_text(yaml.safe_dump(tests), encoding="utf-8")
    assert "SUCCESS" in _promtool("test", "rules", str(tmp_path / "alerts_test.yml"))


def test_the_parser_catches_what_it_should() -> None:
    with pytest.raises(ValueError):
        promql_parser.parse("sum(governor_leader")
    assert _metric_names('rate(a[5m]) / on() b{c="d"} > up') == ["a", "b", "up"]
