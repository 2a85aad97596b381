"""Runs each contract test once per adapter: every harness_<provider>.py here is one (an
HTTP adapter and a fake of its cloud); the on-prem and fake providers, which speak no HTTP,
are subjects of the tests that do not need a cloud to misbehave."""

from __future__ import annotations

import importlib
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import httpx
import pytest

from governor.adapters.providers.local import LocalProvider
from governor.domain.model import PodState
from governor.domain.ports import (
    AnyProvider,
    CallResult,
    StopsPreserving,
    SystemClock,
    TerminateOnly,
)
from governor.fakes.cloud import FakeProvider
from governor.fakes.http_cloud import FakeCloud
from tests.contract.harness import Harness
from tests.fake_clouds import Served, running

HARNESSES: list[Harness] = [
    importlib.import_module(f"tests.contract.{path.stem}").HARNESS
    for path in sorted(Path(__file__).parent.glob("harness_*.py"))
]
SECRET = "sk_CONTRACT_SUITE_SECRET_4b1d"
TIMEOUT_S = 3.0  # generous for a busy machine; a canned slow answer takes three of it


@dataclass
class Subject:
    """An adapter and the world it acts on: a pod running there, a ref with no pod, and
    how to tell from the world itself that a pod has stopped."""

    adapter: AnyProvider
    running: str
    missing: str
    stopped: Callable[[str], bool]
    keep: str | None = None  # terminate-only: the persistent filesystem attached to `running`

    def halt(self, ref: str) -> CallResult:
        """What the governor asks of the adapter when a pod must stop."""
        if isinstance(self.adapter, StopsPreserving):
            return self.adapter.stop(ref)
        assert isinstance(self.adapter, TerminateOnly) and self.keep is not None
        return self.adapter.terminate(ref, keep=self.keep)


@dataclass
class Governed(Served[FakeCloud]):
    """An adapter talking to a running fake of its cloud."""

    harness: Harness
    adapter: AnyProvider

    @property
    def cloud(self) -> FakeCloud:
        return self.fake

    @property
    def subject(self) -> Subject:
        harness = self.harness
        stopped = partial(harness.stopped, self.fake)
        return Subject(self.adapter, harness.running, harness.missing, stopped, harness.keep)

    def adapter_with(self, secret: str, client: httpx.Client) -> AnyProvider:
        return self.harness.adapter(self.url, secret, client)


@contextmanager
def govern(harness: Harness, tmp_path: Path) -> Iterator[Governed]:
    cloud = harness.cloud(tmp_path / f"{harness.name}.json", SECRET)
    with running(cloud) as server, httpx.Client(timeout=TIMEOUT_S) as client:
        adapter = harness.adapter(server.url, SECRET, client)
        yield Governed(cloud, server.url, harness, adapter)
    assert harness.destructive_calls(cloud) == [] or harness.keep is not None


@contextmanager
def on_prem(_tmp_path: Path) -> Iterator[Subject]:
    """The local provider signalling a real process of its own."""
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        yield Subject(
            LocalProvider(stop_latency_s=0),
            str(process.pid),
            "pidfile:/nonexistent/train.pid",
            lambda _ref: process.poll() is not None,
        )
    finally:
        process.kill()
        process.wait()


@contextmanager
def simulated(_tmp_path: Path) -> Iterator[Subject]:
    """The fake provider the demo and the tests govern."""
    fake = FakeProvider(SystemClock(), stop_latency_s=0)
    yield Subject(
        fake, "pod-1", "pod-404", lambda ref: fake.describe(ref).state is PodState.STOPPED
    )


SUBJECTS: dict[str, Callable[[Path], AbstractContextManager[Subject]]] = {
    **{h.name: lambda tmp, h=h: _subject_of(h, tmp) for h in HARNESSES},
    "local": on_prem,
    "fake": simulated,
}


@contextmanager
def _subject_of(harness: Harness, tmp_path: Path) -> Iterator[Subject]:
    with govern(harness, tmp_path) as governed:
        yield governed.subject


@pytest.fixture(params=sorted(SUBJECTS))
def subject(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Subject]:
    """Every adapter, the ones without a cloud over HTTP included."""
    with SUBJECTS[request.param](tmp_path) as subject:
        yield subject


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
