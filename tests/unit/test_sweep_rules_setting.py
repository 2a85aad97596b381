"""GOVERNOR_SWEEP_RULES: a JSON list of the account sweep's rules, each checked at start and
handed to the services as SweepRules."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from governor.bootstrap import build_context
from governor.domain.sweep import SweepRule
from governor.settings import load_settings


def test_rules_are_read_and_reach_the_services(
    monkeypatch: pytest.MonkeyPatch, tmp_path: object
) -> None:
    rules = [
        {"provider": "runpod", "label": "team", "value": "nlp", "adopt": "nlp-research"},
        {"provider": "aws", "name": "scratch-*", "stop_after_s": 3600},
    ]
    monkeypatch.setenv("GOVERNOR_SWEEP_RULES", json.dumps(rules))
    settings = load_settings(database_url=f"sqlite:///{tmp_path}/g.db", scheduler_enabled=False)
    assert settings.sweep_rules == rules
    ctx = build_context(settings)
    try:
        assert ctx.config.sweep_rules == (
            SweepRule("runpod", label="team", value="nlp", adopt="nlp-research"),
            SweepRule("aws", name="scratch-*", stop_after_s=3600.0),
        )
    finally:
        ctx.engine.dispose()
    monkeypatch.delenv("GOVERNOR_SWEEP_RULES")
    assert load_settings().sweep_rules == []  # none by default: report, never stop


def test_a_malformed_rule_stops_the_start_saying_which(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GOVERNOR_SWEEP_RULES", '[{"provider": "aws", "name": "*"}]')
    with pytest.raises(ValidationError, match=r"not a sweep rule.*exactly one of adopt"):
        load_settings()
    monkeypatch.setenv("GOVERNOR_SWEEP_RULES", "{not json")
    with pytest.raises(ValidationError, match="JSON list of sweep rules"):
        load_settings()
