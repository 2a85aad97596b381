"""Runs each contract test once per adapter: every harness_<provider>.py here is one (an
HTTP adapter and a fake of its cloud); the on-prem provider (signalling a process, or running
stop and resume commands) and the fake provider, which speak no HTTP, are subjects of the
tests that do not need a cloud to misbehave, and so is the EC2 adapter against moto's
emulation of EC2 (emulator_aws), beside the project's own fake."""

from __future__ import annotations

import importlib
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import httpx
import pytest

from governor.adapters.providers.local import LocalCommandProvider, LocalProvider
from governor.domain.model import PodState
from governor.domain.ports import (
    AnyProvider,
    CallResult,
    Resumes,
    StopsPreserving,
    SystemClock,
    TerminateOnly,
)
from governor.fakes.cloud import FakeProvider
from governor.fakes.http_cloud import FakeCloud, running
from tests.contract import emulator_aws
from tests.contract.conformance import Exchange, recorder
from tests.contract.harness import Harness
from tests.fake_clouds import Served

HARNESSES: list[Harness] = [
    importlib.import_module(f"tests.contract.{path.stem}").HARNESS
    for path in sorted(Path(__file__).parent.glob("harness_*.py"))
]
SECRET = "sk_CONTRACT_SUITE_SECRET_4b1d"
# A stand-in for `systemctl stop|start train@<ref>`: each unit is a file in a folder, saying
# "running" or "stopped"; a "no-capacity" file there makes the next start fail.
UNITS = """
import pathlib, sys
units, verb, ref = pathlib.Path(sys.argv[1]), sys.argv[2], sys.argv[3]
unit, full = units / ref, units / "no-capacity"
if not unit.exists():
    sys.exit(f"Unit train@{ref}.service not found." if verb == "start" else 0)
if verb == "start" and full.exists():
    full.unlink()
    sys.exit("Job for train@" + ref + ".service failed: no GPU free on this machine")
unit.write_text("running" if verb == "start" else "stopped")
"""


@dataclass
class Subject:
    """An adapter and the world it acts on: a pod running there, a ref with no pod, how to
    tell from the world itself that a pod has stopped or runs (billing), and what the
    adapter can do."""

    adapter: AnyProvider
    running: str
    missing: str
    stopped: Callable[[str], bool]
    billing: Callable[[str], bool]
    keep: str | None = None  # terminate-only: the persistent filesystem attached to `running`
    resumes: bool = False  # the adapter can start a stopped pod again
    # makes the world refuse the next resume for want of capacity (None: it never does so),
    # and what the refusal says
    refuse_next_resume: Callable[[], None] | None = None
    refusal_says: str = ""

    def halt(self, ref: str) -> CallResult:
        """What the governor asks of the adapter when a pod must stop."""
        if isinstance(self.adapter, StopsPreserving):
            return self.adapter.stop(ref)
        assert isinstance(self.adapter, TerminateOnly) and self.keep is not None
        return self.adapter.terminate(ref, keep=self.keep)

    def resume(self, ref: str) -> CallResult:
        """What the governor asks of the adapter when a stopped pod is to run again."""
        assert isinstance(self.adapter, Resumes)
        return self.adapter.resume(ref)


@dataclass
class Governed(Served[FakeCloud]):
    """An adapter talking to a running fake of its cloud."""

    harness: Harness
    adapter: AnyProvider = field(init=False)
    exchanges: list[Exchange] = field(default_factory=list)  # what the adapter sent, answered

    @property
    def cloud(self) -> FakeCloud:
        return self.fake

    @property
    def subject(self) -> Subject:
        harness = self.harness
        return Subject(
            self.adapter,
            harness.running,
            harness.missing,
            partial(harness.stopped, self.fake),
            partial(harness.billing, self.fake),
            harness.keep,
            harness.resumes,
            partial(self.answer_next, *harness.no_capacity) if harness.no_capacity else None,
            harness.no_capacity_says,
        )

    def adapter_with(self, secret: str, client: httpx.Client) -> AnyProvider:
        return self.harness.adapter(self, secret, client)


@contextmanager
def govern(harness: Harness, tmp_path: Path) -> Iterator[Governed]:
    cloud = harness.cloud(tmp_path / f"{harness.name}.json", SECRET)
    with running(cloud) as server:
        governed = Governed(cloud, server.url, harness)
        hooks = {"response": [recorder(governed.exchanges)]}
        with governed.client(event_hooks=hooks) as client:
            governed.adapter = harness.adapter(governed, SECRET, client)
            yield governed
    assert harness.destructive_calls(cloud) == [] or harness.keep is not None
    assert harness.off_spec(governed.exchanges) == []


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
            lambda _ref: process.poll() is None,
        )
    finally:
        process.kill()
        process.wait()


@contextmanager
def on_prem_by_commands(tmp_path: Path) -> Iterator[Subject]:
    """The local provider stopping and resuming a unit with commands (UNITS)."""
    units = tmp_path / "units"
    units.mkdir()
    (units / "train-1").write_text("running")

    def command(verb: str) -> list[str]:
        return [sys.executable, "-c", UNITS, str(units), verb, "{ref}"]

    def unit_is(state: str) -> Callable[[str], bool]:
        return lambda ref: (units / ref).read_text() == state

    yield Subject(
        LocalCommandProvider(
            stop_command=command("stop"), resume_command=command("start"), stop_latency_s=0
        ),
        "train-1",
        "train-404",
        unit_is("stopped"),
        unit_is("running"),
        resumes=True,
        refuse_next_resume=(units / "no-capacity").touch,
        refusal_says="no GPU free on this machine",
    )


@contextmanager
def simulated(_tmp_path: Path) -> Iterator[Subject]:
    """The fake provider the demo and the tests govern."""
    fake = FakeProvider(SystemClock(), stop_latency_s=0)
    fake.describe("pod-1")  # its pods appear, running, when first seen

    def refuse_next_resume() -> None:
        fake.resume_refusals = 1

    def pod_is(state: PodState) -> Callable[[str], bool]:
        return lambda ref: fake.state.pods[ref].state(fake.clock.now()) is state

    yield Subject(
        fake,
        "pod-1",
        "pod-404",
        pod_is(PodState.STOPPED),
        pod_is(PodState.RUNNING),
        resumes=True,
        refuse_next_resume=refuse_next_resume,
        refusal_says="no capacity",
    )


@contextmanager
def emulated(moto: emulator_aws.Moto) -> Iterator[Subject]:
    """The EC2 adapter against moto, with a running on-demand instance of its own (the
    module's earlier tests leave theirs, which no test here reads)."""
    ref = moto.launch()
    yield Subject(
        moto.adapter(),
        ref,
        emulator_aws.MISSING,
        lambda ref: moto.state(ref) == "stopped",
        lambda ref: moto.state(ref) in ("pending", "running"),
        resumes=True,  # moto never refuses a start for want of capacity (CANNOT_EMULATE)
    )
    assert moto.state(ref) != "terminated"


SUBJECTS: dict[str, Callable[[Path], AbstractContextManager[Subject]]] = {
    **{h.name: lambda tmp, h=h: _subject_of(h, tmp) for h in HARNESSES},
    "local": on_prem,
    "local-commands": on_prem_by_commands,
    "fake": simulated,
}
EMULATED = emulator_aws.NAME  # a subject needing the module's moto server (moto_ec2)
RESUMING = sorted({h.name for h in HARNESSES if h.resumes} | {"local-commands", "fake", EMULATED})
REFUSING = sorted({h.name for h in HARNESSES if h.no_capacity} | {"local-commands", "fake"})


@contextmanager
def _subject_of(harness: Harness, tmp_path: Path) -> Iterator[Subject]:
    with govern(harness, tmp_path) as governed:
        yield governed.subject


def _opened(request: pytest.FixtureRequest, tmp_path: Path) -> AbstractContextManager[Subject]:
    if request.param == EMULATED:
        return emulated(request.getfixturevalue("moto_ec2"))
    return SUBJECTS[request.param](tmp_path)


@pytest.fixture(scope="module")
def moto_ec2() -> Iterator[emulator_aws.Moto]:
    """moto's EC2 over HTTP, one server for the module's tests."""
    with emulator_aws.serving() as moto:
        yield moto


@pytest.fixture(params=sorted([*SUBJECTS, EMULATED]))
def subject(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Subject]:
    """Every adapter, the ones without a cloud over HTTP included."""
    with _opened(request, tmp_path) as subject:
        yield subject


@pytest.fixture(params=RESUMING)
def resumer(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Subject]:
    """Every adapter that can resume a stopped pod."""
    with _opened(request, tmp_path) as subject:
        yield subject


@pytest.fixture(params=REFUSING)
def refuser(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Subject]:
    """Every adapter whose world can refuse a resume for want of capacity."""
    with _opened(request, tmp_path) as subject:
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


@pytest.fixture(params=[h for h in HARNESSES if h.resumes], ids=lambda h: h.name)
def resuming(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Governed]:
    """Adapters over HTTP that can resume a stopped pod."""
    with govern(request.param, tmp_path) as governed:
        yield governed


@pytest.fixture(params=[h for h in HARNESSES if h.refuses_stops], ids=lambda h: h.name)
def refuses_stops(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Governed]:
    """Adapters whose provider can refuse a stop in a shape easy to take for an acceptance."""
    with govern(request.param, tmp_path) as governed:
        yield governed


@pytest.fixture(params=[h for h in HARNESSES if h.keep is not None], ids=lambda h: h.name)
def terminating(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Governed]:
    """Terminate-only adapters."""
    with govern(request.param, tmp_path) as governed:
        yield governed
