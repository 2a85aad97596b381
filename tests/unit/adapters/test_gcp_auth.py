"""GCP credentials through google-auth against the fake GCP and its fake token endpoint.

A service-account key file named by GOOGLE_APPLICATION_CREDENTIALS (found the way
Application Default Credentials find it) signs a JWT; the fake's token endpoint checks the
signature and issues short-lived tokens; the adapter stops a VM with them. Tokens the fake
issues for less than google-auth's refresh margin count as expired at once, so every call
refreshes and the test counts refreshes without waiting. No key or token reaches an error
or a log line.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from governor.adapters.providers.gcp import GcpProvider
from governor.adapters.providers.gcp_auth import GoogleCredentials
from governor.domain.ports import CallOutcome, ProviderError
from governor.fakes.gcp import SA_TOKEN_PATH, FakeGcp
from governor.fakes.http_cloud import now, running
from tests.fake_clouds import Served
from tests.gcp_keys import EMAIL, key_file, private_key_lines

PROJECT = "unit-project"
POD = "us-central1-a/pod-1"


class Cloud(Served[FakeGcp]):
    def mints(self) -> int:
        return self.fake.calls("POST").count(f"POST {SA_TOKEN_PATH}")


@pytest.fixture
def cloud(tmp_path: Path) -> Iterator[Cloud]:
    fake = FakeGcp(tmp_path / "gcp.json", "ya29.THE_FIXED_TOKEN_NOT_USED_HERE", project=PROJECT)
    fake.add_pod(POD, "3.67")
    with running(fake) as server:
        yield Cloud(fake, server.url)
    assert fake.calls("DELETE") == []


@pytest.fixture
def client(cloud: Cloud) -> Iterator[httpx.Client]:
    with cloud.client() as client:
        yield client


@pytest.fixture
def key(cloud: Cloud, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = key_file(tmp_path, cloud.fake, cloud.url)
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(path))
    return path


def adapter(cloud: Cloud, client: httpx.Client) -> GcpProvider:
    credentials = GoogleCredentials.default(client)
    return GcpProvider(client, credentials, PROJECT, f"{cloud.url}/compute/v1", stop_latency_s=0)


def test_a_key_file_mints_a_token_once_and_a_stop_completes(
    cloud: Cloud, client: httpx.Client, key: Path
) -> None:
    gcp = adapter(cloud, client)
    assert gcp.credential == f"a service-account key file ({EMAIL})"
    assert cloud.mints() == 0  # nothing is fetched before the first call
    assert gcp.stop(POD).outcome is CallOutcome.PENDING
    assert gcp.stop(POD).outcome is CallOutcome.DONE
    assert cloud.fake.state.instances[POD].status(now()) == "TERMINATED"
    assert cloud.mints() == 1  # an hour-long token serves both calls
    (issued,) = cloud.fake.issued
    assert issued.startswith("ya29.fake-sa-")


def test_an_expired_token_is_refreshed_before_the_next_call(
    cloud: Cloud, client: httpx.Client, key: Path
) -> None:
    cloud.fake.sa_token_expires_in_s = 60  # inside google-auth's margin: expired at once
    gcp = adapter(cloud, client)
    assert gcp.stop(POD).outcome is CallOutcome.PENDING
    assert cloud.mints() == 1
    assert gcp.stop(POD).outcome is CallOutcome.DONE
    assert cloud.mints() == 2 and len(cloud.fake.issued) == 2  # a new token for the new call


def test_a_key_the_token_endpoint_refuses_is_permanent_and_never_quoted(
    cloud: Cloud,
    client: httpx.Client,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    untrusted = key_file(tmp_path, cloud.fake, cloud.url, trusted=False)
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(untrusted))
    result = adapter(cloud, client).stop(POD)
    assert result.outcome is CallOutcome.PERMANENT
    assert "invalid_grant" in result.detail and "service-account key file" in result.detail
    assert cloud.fake.calls("POST") == [f"POST {SA_TOKEN_PATH}"]  # no stop without a token
    for line in private_key_lines(untrusted):
        assert line not in result.detail and line not in caplog.text


def test_no_log_line_or_error_carries_the_key_or_a_token(
    cloud: Cloud, client: httpx.Client, key: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    gcp = adapter(cloud, client)
    cloud.answer_next("status:401")  # the token endpoint refuses
    not_minted = gcp.stop(POD)
    assert gcp.stop(POD).outcome is CallOutcome.PENDING  # minted this time
    cloud.answer_next("status:401")  # the compute call with the cached token is refused
    refused = gcp.stop(POD)
    with pytest.raises(ProviderError) as missing:
        gcp.describe("us-central1-a/nope")
    assert not_minted.outcome is refused.outcome is CallOutcome.PERMANENT
    assert caplog.records, "expected the HTTP client to log its requests"
    said = [caplog.text, not_minted.detail, refused.detail, str(missing.value)]
    for secret in [*private_key_lines(key), *cloud.fake.issued]:
        assert not any(secret in text for text in said)


def test_without_credentials_it_says_none_were_found(
    client: httpx.Client, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GOOGLE_APPLICATION_CREDENTIALS", raising=False)
    monkeypatch.setenv("CLOUDSDK_CONFIG", str(tmp_path))  # no gcloud credentials there
    monkeypatch.setenv("NO_GCE_CHECK", "True")  # and not on a GCE VM
    with pytest.raises(ProviderError, match="no Application Default Credentials") as caught:
        GoogleCredentials.default(client)
    assert caught.value.retryable is False
