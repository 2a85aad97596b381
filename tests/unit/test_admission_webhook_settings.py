"""The admission webhook's settings: off by default; a port asks for its certificate and key;
what it answers when it cannot decide is deny or allow, nothing else."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from governor.settings import load_settings


def test_off_by_default_and_failing_closed() -> None:
    settings = load_settings()
    assert settings.webhook_port is None
    assert settings.webhook_on_error == "deny"


def test_a_port_without_a_certificate_and_key_is_refused_saying_so() -> None:
    with pytest.raises(ValidationError, match="GOVERNOR_WEBHOOK_CERT_FILE"):
        load_settings(webhook_port=8443)
    with pytest.raises(ValidationError, match="GOVERNOR_WEBHOOK_KEY_FILE"):
        load_settings(webhook_port=8443, webhook_cert_file="tls.crt")
    served = load_settings(webhook_port=8443, webhook_cert_file="c", webhook_key_file="k")
    assert served.webhook_port == 8443


@pytest.mark.parametrize(
    "bad",
    [{"webhook_on_error": "ignore"}, {"webhook_decide_s": 0}, {"webhook_decide_s": 30}],
)
def test_bad_values_are_refused(bad: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        load_settings(**bad)
