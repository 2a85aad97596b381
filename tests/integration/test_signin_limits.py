"""Sign-in through the identity provider takes no token, so it is limited per client address
with the failed authentications: past its starts in a window a device sign-in, or a browser's
trip to the provider, is 429 with Retry-After and the provider is not asked; a device code the
provider refuses counts as a failed authentication, 429 past the address's failures.

The provider is the port's stand-in, counting what it is asked; the protocol itself is tested
against a real provider in tests/e2e/test_oidc_signin.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import pytest
from fastapi.testclient import TestClient

from governor.app import create_app
from governor.domain.errors import Unauthenticated
from governor.domain.identity import Authorization, DeviceCode, Vouched
from governor.services.security.auth_limits import AuthLimits
from governor.settings import load_settings
from tests.integration.conftest import Governor
from tests.integration.test_signins import CONFIG

STARTS, FAILURES = 3, 2


class Provider:
    """The port: starts answer at once, every device code is refused; each ask counted."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def start(self, redirect_uri: str) -> Authorization:
        self.asked.append("start")
        return Authorization("https://idp.example.test/auth", "state", "verifier", "nonce")

    def start_device(self) -> DeviceCode:
        self.asked.append("start_device")
        return DeviceCode("device", "ABCD-EFGH", "https://idp.example.test/device", None, 600, 5)

    def poll_device(self, device_code: str) -> Vouched | None:
        self.asked.append("poll_device")
        raise Unauthenticated("the identity provider refused (expired_token)")

    def finish(self, authorization: Authorization, redirect_uri: str, code: str) -> Vouched:
        raise AssertionError("not asked here")

    def refresh(self, refresh_token: str, subject: str) -> Vouched:
        raise AssertionError("not asked here")


@pytest.fixture
def signing_in(gov: Governor, migrated_url: str) -> Iterator[tuple[TestClient, Provider]]:
    provider = Provider()
    limits = AuthLimits(per_source=FAILURES, starts_per_source=STARTS)
    context = replace(gov.ctx, identity=provider, signin=CONFIG, auth_limits=limits)
    settings = load_settings(database_url=migrated_url, scheduler_enabled=False)
    with TestClient(create_app(settings, context)) as client:
        yield client, provider


def test_device_sign_ins_started_past_the_limit_are_429_and_ask_no_provider(
    signing_in: tuple[TestClient, Provider],
) -> None:
    client, provider = signing_in
    for _ in range(STARTS):
        assert client.post("/v1/signin/device").status_code == 200
    refused = client.post("/v1/signin/device")
    assert refused.status_code == 429, refused.text
    assert int(refused.headers["Retry-After"]) >= 1
    assert refused.json()["error"]["code"] == "too_many_attempts"
    assert "too many sign-ins started from this address" in refused.json()["error"]["message"]
    assert provider.asked == ["start_device"] * STARTS
    other = {"X-Forwarded-For": "10.9.9.9"}  # not from a trusted proxy: the same address
    assert client.post("/v1/signin/device", headers=other).status_code == 429


def test_a_browsers_trips_to_the_provider_share_the_limit(
    signing_in: tuple[TestClient, Provider],
) -> None:
    client, provider = signing_in
    for _ in range(STARTS):
        assert client.get("/login/oidc", follow_redirects=False).status_code == 303
    refused = client.get("/login/oidc", follow_redirects=False)
    assert refused.status_code == 429 and int(refused.headers["Retry-After"]) >= 1
    assert "too many sign-ins started" in refused.text
    assert client.post("/v1/signin/device").status_code == 429
    assert provider.asked == ["start"] * STARTS


def test_refused_device_codes_are_failed_authentications(
    signing_in: tuple[TestClient, Provider],
) -> None:
    client, _ = signing_in
    polled = [
        client.post("/v1/signin/device/token", json={"device_code": "guessed"})
        for _ in range(FAILURES + 1)
    ]
    assert [p.status_code for p in polled] == [401] * FAILURES + [429]
    assert int(polled[-1].headers["Retry-After"]) >= 1
    assert "too many failed authentications" in polled[-1].json()["error"]["message"]
