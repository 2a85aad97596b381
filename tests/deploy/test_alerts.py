"""deploy/prometheus/alerts.yml: a Prometheus rule file whose every expression parses as
PromQL and reads only series the governor exports (the names written in
governor/services/metrics.py), the leadership gauges, or Prometheus's own `up`."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import promql_parser
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "deploy" / "prometheus" / "alerts.yml"
ALSO_ALLOWED = {"up", "governor_leader", "governor_leader_term"}
DURATION = re.compile(r"^([0-9]+(ms|s|m|h|d|w|y))+$")


def _exported() -> set[str]:
    source = (ROOT / "governor" / "services" / "metrics.py").read_text(encoding="utf-8")
    return set(re.findall(r"\"(governor_[a-z0-9_]+)\"", source))


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


def test_the_exported_names_are_found() -> None:
    exported = _exported()
    assert {"governor_budget_spent_dollars", "governor_run_heartbeat_age_seconds"} <= exported
    assert "governor_events_total" in exported


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
def test_each_expression_reads_only_exported_series(rule: dict[str, Any]) -> None:
    names = _metric_names(rule["expr"])
    assert names, "the expression reads some series"
    assert None not in names, "every selector names its metric"
    unknown = set(names) - _exported() - ALSO_ALLOWED
    assert not unknown, f"not exported by the governor: {sorted(unknown)}"


def test_the_parser_catches_what_it_should() -> None:
    with pytest.raises(ValueError):
        promql_parser.parse("sum(governor_leader")
    assert _metric_names('rate(a[5m]) / on() b{c="d"} > up') == ["a", "b", "up"]
