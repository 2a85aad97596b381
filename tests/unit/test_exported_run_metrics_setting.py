"""GOVERNOR_EXPORTED_RUN_METRICS: comma-separated metric names, bounded in number."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from governor.settings import MAX_EXPORTED_RUN_METRICS, load_settings


def test_names_are_read_comma_separated_once_each(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GOVERNOR_EXPORTED_RUN_METRICS", " loss, reward_mean,,loss ")
    assert load_settings().exported_run_metrics == ["loss", "reward_mean"]
    monkeypatch.delenv("GOVERNOR_EXPORTED_RUN_METRICS")
    assert load_settings().exported_run_metrics == []  # none by default


def test_too_many_names_are_refused_saying_the_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    names = ",".join(f"m{i}" for i in range(MAX_EXPORTED_RUN_METRICS + 1))
    monkeypatch.setenv("GOVERNOR_EXPORTED_RUN_METRICS", names)
    with pytest.raises(ValidationError, match=f"at most {MAX_EXPORTED_RUN_METRICS}"):
        load_settings()
