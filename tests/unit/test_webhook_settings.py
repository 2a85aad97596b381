"""GOVERNOR_WEBHOOKS: a JSON list of sinks, refused with a clear reason when it is not one;
GOVERNOR_PUBLIC_URL, the dashboard's address that notices link to."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from governor.bootstrap import build_notifier
from governor.domain.model import Severity
from governor.settings import load_settings


def test_webhooks_are_read_from_json(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(
        "GOVERNOR_WEBHOOKS",
        '[{"url": "https://hooks.example.test/a", "kind": "slack", "min_severity": "critical"},'
        ' {"url": "http://127.0.0.1:9/b"}]',
    )
    monkeypatch.setenv("GOVERNOR_WEBHOOK_MAX_ATTEMPTS", "2")
    settings = load_settings()
    assert [(w.kind, w.min_severity) for w in settings.webhooks] == [
        ("slack", "critical"),
        ("json", "warning"),
    ]
    notifier = build_notifier(settings)
    assert notifier is not None
    assert [s.min_severity for s in notifier.subscriptions] == [
        Severity.CRITICAL,
        Severity.WARNING,
    ]
    assert notifier.retry.max_attempts == 2
    assert [s.sink.name for s in notifier.subscriptions] == [  # by place in the list
        "slack webhook 1 at https://hooks.example.test",
        "json webhook 2 at http://127.0.0.1:9",
    ]
    notifier.close()


def test_no_webhooks_no_notifier(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GOVERNOR_WEBHOOKS", raising=False)
    assert build_notifier(load_settings()) is None
    monkeypatch.setenv("GOVERNOR_WEBHOOKS", "")
    assert load_settings().webhooks == []


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("[{", "not a JSON list of webhooks"),
        ('[{"url": "ftp://x"}]', "String should match pattern"),
        ('[{"url": "https://x", "kind": "teams"}]', "Input should be 'json' or 'slack'"),
        ('[{"url": "https://x", "min_severity": "info"}]', "'warning' or 'critical'"),
    ],
)
def test_a_bad_list_says_what_is_wrong(
    monkeypatch: pytest.MonkeyPatch, value: str, problem: str
) -> None:
    monkeypatch.setenv("GOVERNOR_WEBHOOKS", value)
    with pytest.raises(ValidationError, match=problem):
        load_settings()


@pytest.mark.parametrize(
    ("value", "kept"),
    [
        ("https://governor.example.com/", "https://governor.example.com"),
        (" http://10.0.0.5:8000/gov ", "http://10.0.0.5:8000/gov"),
        ("", None),
    ],
)
def test_the_public_url_is_kept_without_its_trailing_slash(
    monkeypatch: pytest.MonkeyPatch, value: str, kept: str | None
) -> None:
    monkeypatch.setenv("GOVERNOR_PUBLIC_URL", value)
    assert load_settings().public_url == kept


@pytest.mark.parametrize("value", ["governor.example.com", "ftp://x", "https://"])
def test_a_public_url_that_is_no_web_address_is_refused(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv("GOVERNOR_PUBLIC_URL", value)
    with pytest.raises(ValidationError, match="must be an http:// or https:// address"):
        load_settings()
