"""Runs each contract test once per adapter: every harness_<provider>.py here is one."""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from governor.adapters.providers.fake_cloud import FakeCloud
from governor.domain.ports import AnyProvider
from tests.contract.harness import Harness
from tests.fake_clouds import Served, running

HARNESSES: list[Harness] = [
    importlib.import_module(f"tests.contract.{path.stem}").HARNESS
    for path in sorted(Path(__file__).parent.glob("harness_*.py"))
]
SECRET = "sk_CONTRACT_SUITE_SECRET_4b1d"
TIMEOUT_S = 0.5


@dataclass
class Governed(Served[FakeCloud]):
    """An adapter talking to a running fake of its cloud."""

    harness: Harness
    adapter: AnyProvider

    @property
    def cloud(self) -> FakeCloud:
        return self.fake

    def adapter_with(self, secret: str, client: httpx.Client) -> AnyProvider:
        return self.harness.adapter(self.url, secret, client)


@contextmanager
def govern(harness: Harness, tmp_path: Path) -> Iterator[Governed]:
    cloud = harness.cloud(tmp_path / f"{harness.name}.json", SECRET)
    with running(cloud) as server, httpx.Client(timeout=TIMEOUT_S) as client:
        adapter = harness.adapter(server.url, SECRET, client)
        yield Governed(cloud, server.url, harness, adapter)
    assert harness.destructive_calls(cloud) == [] or harness.keep is not None


@pytest.fixture(params=HARNESSES, ids=lambda h: h.name)
def governed(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Governed]:
    with govern(request.param, tmp_path) as governed:
        yield governed


@pytest.fixture(params=[h for h in HARNESSES if h.retry_after_honoured], ids=lambda h: h.name)
def honours_retry_after(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Governed]:
    """Adapters whose client lets a 429's Retry-After through (boto3's does not)."""
    with govern(request.param, tmp_path) as governed:
        yield governed


@pytest.fixture(params=[h for h in HARNESSES if h.keep is not None], ids=lambda h: h.name)
def terminating(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Governed]:
    """Terminate-only adapters."""
    with govern(request.param, tmp_path) as governed:
        yield governed
