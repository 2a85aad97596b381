"""`governor providers check`: each configured provider's key verified, its pods listed."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from governor.cli import main
from governor.fakes.http_cloud import FakeServer, running
from governor.fakes.runpod import FakeRunPod
from tests.clock import FrozenClock
from tests.integration.conftest import Governor, make_governor

KEY = "rpa_CHECK_KEY_123"


@pytest.fixture(autouse=True)
def logging_as_it_was() -> Iterator[None]:
    """main() quiets some libraries' loggers for the process; other tests read them."""
    loggers = [logging.getLogger(), *map(logging.getLogger, logging.root.manager.loggerDict)]
    levels = [(logger, logger.level) for logger in loggers]
    yield
    for logger, level in levels:
        logger.setLevel(level)


@pytest.fixture
def runpod(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeServer]:
    cloud = FakeRunPod(tmp_path / "runpod.json", KEY)
    cloud.add_pod("pod-a", "2.49")
    cloud.add_pod("pod-b", "0.44")
    with running(cloud) as server:
        monkeypatch.setenv("GOVERNOR_DATABASE_URL", f"sqlite:///{tmp_path / 'governor.db'}")
        monkeypatch.setenv("GOVERNOR_RUNPOD_URL", f"{server.url}/graphql")
        yield server


def test_lists_the_pods_each_provider_sees(
    runpod: FakeServer, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("GOVERNOR_RUNPOD_API_KEY", KEY)
    assert main(["providers", "check"]) == 0
    out = capsys.readouterr().out
    assert "runpod: ok (stops keeping the workspace): credentials accepted; 2 pod(s)" in out
    assert "pod-a" in out and "2.49" in out and "pod-b" in out and "0.44" in out
    assert "lambda: not configured (set GOVERNOR_LAMBDA_API_KEY" in out
    assert KEY not in out


def test_a_refused_key_fails_the_check_without_showing_it(
    runpod: FakeServer, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("GOVERNOR_RUNPOD_API_KEY", "rpa_WRONG_KEY_456")
    assert main(["providers", "check"]) == 1
    out = capsys.readouterr().out
    assert "runpod: FAILED" in out and "HTTP 401" in out
    assert "rpa_WRONG_KEY_456" not in out


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_a_fake_of_its_own_says_so_and_names_the_governed_pods_it_cannot_see(
    gov: Governor,
    migrated_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    pod_id = gov.pod(gov.budget(), "pod-1")  # a server's, on a simulated cloud in its memory
    monkeypatch.setenv("GOVERNOR_DATABASE_URL", migrated_url)
    assert main(["providers", "check"]) == 0
    out = capsys.readouterr().out
    assert "fake: ok (stops keeping the workspace): credentials accepted; 0 pod(s)" in out
    assert "a simulated cloud of this process alone, not a running server's" in out
    assert "set GOVERNOR_FAKE_STATE_FILE, for both, to share one" in out
    assert f"governed here but not seen by fake: pod-1 ({pod_id})" in out


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_a_shared_fake_shows_the_servers_pods_as_governed(
    migrated_url: str,
    clock: FrozenClock,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    state = tmp_path / "cloud.json"
    server = make_governor(migrated_url, clock, state_file=state)
    try:
        pod_id = server.pod(server.budget(), "pod-1")
    finally:
        server.ctx.engine.dispose()
    monkeypatch.setenv("GOVERNOR_DATABASE_URL", migrated_url)
    monkeypatch.setenv("GOVERNOR_FAKE_STATE_FILE", str(state))
    assert main(["providers", "check"]) == 0
    out = capsys.readouterr().out
    assert f"1 pod(s) visible; credential: none needed; the simulated cloud kept in {state}" in out
    assert re.search(rf"^pod-1\s+running\s+.*{pod_id}$", out, re.MULTILINE), out
    assert "not seen" not in out
