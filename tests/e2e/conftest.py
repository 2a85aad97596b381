"""End-to-end helpers: the real server in its own process, and a training job on a thread.

Every test here starts `python -m governor serve` with the fake cloud, talks to it over
real HTTP, and reads the fake cloud's state file to see what the provider was asked to do.
GPU telemetry tests also start `python -m governor agent` in its own process (AgentProcess).
Every wait is a bounded poll; every server and agent is killed in teardown; a failing test
gets the tail of each live server's and agent's log attached to its report.
"""

from __future__ import annotations

import itertools
import os
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

import httpx
import pytest
from sqlalchemy import create_engine, select
from sqlalchemy.orm import Session

from governor.db.tables import GpuSampleRow
from governor.domain.telemetry import GIB
from governor.fakes.cloud import FakeCloudState, FakePod
from tests.e2e.webhook_receiver import Receiver
from tests.plans import variant

OPERATOR_TOKEN = "e2e-operator-token"
RATE_USD_PER_HOUR = Decimal(3600)  # one dollar a second: a ceiling is reached in seconds
READY_TIMEOUT_S = 90.0  # a cold start on a loaded 2-core machine can be slow
WAIT_TIMEOUT_S = 45.0  # the default for "eventually" waits; the behaviour takes seconds
HTTP_TIMEOUT_S = 30.0

BASE_ENV = {
    "GOVERNOR_OPERATOR_TOKEN": OPERATOR_TOKEN,
    "GOVERNOR_ENFORCE_INTERVAL_S": "0.1",
    "GOVERNOR_FAKE_HOURLY_RATE_USD": str(RATE_USD_PER_HOUR),
    "GOVERNOR_FAKE_STOP_LATENCY_S": "0.2",
    # A short lease: on PostgreSQL a change of leader is reserved in every committed spend
    # (lease + probe), and these tests run $1-a-second pods into small ceilings.
    "GOVERNOR_LEADER_LEASE_S": "1",
    "GOVERNOR_LEADER_PROBE_S": "0.25",
}

T = TypeVar("T")

# Building an httpx client loads the CA bundle (~0.1 s); the server speaks plain HTTP, so
# every client here shares one context instead.
_TLS = ssl.create_default_context()


def http_client(
    base_url: str, token: str | None = None, *, local_address: str | None = None
) -> httpx.Client:
    """A client of the server; with `local_address` (one of 127.0.0.0/8, which all reach this
    machine) its connections come from that address, as another host's would."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    transport = (
        None
        if local_address is None
        else httpx.HTTPTransport(verify=_TLS, local_address=local_address)
    )
    return httpx.Client(
        base_url=base_url, headers=headers, timeout=HTTP_TIMEOUT_S, verify=_TLS, transport=transport
    )


# --- small utilities -----------------------------------------------------------------


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def utcnow() -> datetime:
    return datetime.now(UTC)


def parse_time(text: str) -> datetime:
    return datetime.fromisoformat(text)


def usd(text: str) -> Decimal:
    return Decimal(text)


def wait_for(
    probe: Callable[[], T | None],
    what: str,
    timeout_s: float = WAIT_TIMEOUT_S,
    interval_s: float = 0.05,
) -> T:
    """Call `probe` until it returns something truthy; fail saying `what` after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout_s:g} s waiting for {what}")
        time.sleep(interval_s)


def assert_error(response: httpx.Response, status: int) -> dict[str, Any]:
    """The response is `status` with the contract's error shape; returns the error object."""
    assert response.status_code == status, (
        f"expected {status}, got {response.status_code}: {response.text[:500]}"
    )
    body = response.json()
    assert set(body) == {"error"}, body
    error = body["error"]
    assert isinstance(error.get("code"), str) and error["code"], body
    assert isinstance(error.get("message"), str) and error["message"], body
    return dict(error)


def is_postgres(database_url: str) -> bool:
    return database_url.startswith("postgres")


def clean_environ() -> dict[str, str]:
    """This process's environment without any GOVERNOR_* setting that could leak in."""
    return {k: v for k, v in os.environ.items() if not k.startswith("GOVERNOR_")}


# --- the server process --------------------------------------------------------------

_LIVE: list[GovernorServer] = []


class GovernorServer:
    """`python -m governor serve` in its own process, restartable on the same database."""

    def __init__(self, workdir: Path, database_url: str, env: dict[str, str | None]) -> None:
        self.workdir = workdir
        self.database_url = database_url
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.cloud_file = workdir / "fake-cloud.json"
        self.log_path = workdir / "server.log"
        settings: dict[str, str | None] = {
            **clean_environ(),
            **BASE_ENV,
            "GOVERNOR_DATABASE_URL": database_url,
            "GOVERNOR_FAKE_STATE_FILE": str(self.cloud_file),
            **env,
        }
        self.env = {k: v for k, v in settings.items() if v is not None}
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self._log_offset = 0
        # how the governor is started: `serve --port ...` follows
        self.command: list[str] = [sys.executable, "-m", "governor"]

    # lifecycle

    def start(self) -> GovernorServer:
        assert self.process is None, "already running"
        self.starts += 1
        with self.log_path.open("ab") as log:
            self._log_offset = log.tell()
            log.write(f"\n===== start {self.starts} at {utcnow().isoformat()} =====\n".encode())
            log.flush()
            self.process = subprocess.Popen(
                [*self.command, "serve", "--port", str(self.port)],
                cwd=self.workdir,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        if self not in _LIVE:
            _LIVE.append(self)
        return self

    def wait_ready(self, timeout_s: float = READY_TIMEOUT_S) -> GovernorServer:
        """Poll GET /readyz until 200; fail early (with the log) if the process exits."""
        deadline = time.monotonic() + timeout_s
        last = "no answer yet"
        with httpx.Client(base_url=self.url, timeout=5.0, verify=_TLS) as client:
            while time.monotonic() < deadline:
                assert self.process is not None
                code = self.process.poll()
                if code is not None:
                    raise AssertionError(
                        f"the server exited with {code} before it was ready:\n{self.log_tail()}"
                    )
                try:
                    response = client.get("/readyz")
                    if response.status_code == 200:
                        return self
                    last = f"{response.status_code} {response.text[:300]}"
                except httpx.TransportError as exc:
                    last = f"{type(exc).__name__}"
                time.sleep(0.1)
        raise AssertionError(
            f"the server was not ready after {timeout_s:g} s ({last}):\n{self.log_tail()}"
        )

    def kill(self) -> None:
        """SIGKILL: no shutdown hooks, no last writes, as a crash or an OOM kill would do."""
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=30)
        self.process = None

    def terminate(self, timeout_s: float = 20.0) -> int | None:
        """SIGTERM and wait for a clean exit; SIGKILL if it does not come in time."""
        if self.process is None:
            return None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            code = self.process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.process.kill()
            code = self.process.wait(timeout=30)
        self.process = None
        return code

    def close(self) -> None:
        self.kill()
        if self in _LIVE:
            _LIVE.remove(self)

    # what it says and what the cloud saw

    def output(self, *, this_start_only: bool = True) -> str:
        data = self.log_path.read_bytes() if self.log_path.exists() else b""
        if this_start_only:
            data = data[self._log_offset :]
        return data.decode(errors="replace")

    def log_tail(self, lines: int = 150) -> str:
        """The end of the log, without the scheduler's every-tick chatter."""
        text = self.output(this_start_only=False)
        kept = [line for line in text.splitlines() if "apscheduler.executors" not in line]
        return "\n".join(kept[-lines:])

    def cloud(self) -> FakeCloudState:
        return FakeCloudState.load(self.cloud_file)

    def cloud_pod(self, ref: str) -> FakePod:
        pod = self.cloud().pods.get(ref)
        assert pod is not None, f"the fake cloud has never seen {ref!r}"
        return pod

    def client(self, token: str | None = OPERATOR_TOKEN) -> httpx.Client:
        return http_client(self.url, token)


def migrate(database_url: str, workdir: Path) -> None:
    """`python -m governor migrate`: a server database is never upgraded by `serve`."""
    result = subprocess.run(
        [sys.executable, "-m", "governor", "migrate"],
        cwd=workdir,
        env={**clean_environ(), "GOVERNOR_DATABASE_URL": database_url},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, f"migrate failed:\n{result.stdout}\n{result.stderr}"


ServerFactory = Callable[..., GovernorServer]


@pytest.fixture
def spawn(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., GovernorServer]]:
    """`spawn(database_url, **env)`: a governor process, not started yet, killed in teardown.

    Keyword arguments are extra settings; a value of None removes a default one.
    """
    servers: list[GovernorServer] = []

    def make(database_url: str, **env: str | None) -> GovernorServer:
        server = GovernorServer(tmp_path_factory.mktemp("governor"), database_url, env)
        servers.append(server)
        return server

    yield make
    for server in servers:
        server.close()


@pytest.fixture
def start_server(database_url: str, spawn: Callable[..., GovernorServer]) -> ServerFactory:
    """`start_server(**env)` starts a governor on this test's database and waits until ready.

    Keyword arguments are extra GOVERNOR_* settings, e.g. GOVERNOR_FAKE_STOP_LATENCY_S="3".
    A PostgreSQL database is migrated first, as an operator would (serve refuses it otherwise).
    """

    def start(**env: str | None) -> GovernorServer:
        server = spawn(database_url, **env)
        if is_postgres(database_url):
            migrate(database_url, server.workdir)
        return server.start().wait_ready()

    return start


@pytest.fixture
def server(start_server: ServerFactory) -> GovernorServer:
    """A governor with the default e2e settings: $3600/h fake pods, 0.1 s passes."""
    return start_server()


@pytest.fixture
def operator(server: GovernorServer) -> Iterator[httpx.Client]:
    with server.client() as client:
        yield client


# --- the agent process ---------------------------------------------------------------

_AGENTS: list[AgentProcess] = []


class AgentProcess:
    """`python -m governor agent` in its own process, its output in a log file.

    It reports to `server_url` over real HTTP, for the pod or, given `node`, as that machine's
    node agent; `fake_nvml` names a scripted fake GPU driver (none: the machine's own NVML,
    which on a machine without a driver is "no NVML").
    """

    def __init__(
        self,
        workdir: Path,
        server_url: str,
        pod_id: str,
        token: str,
        *,
        interval_s: float = 0.3,
        fake_nvml: str | None = None,
        node: str | None = None,
        extra_args: Sequence[str] = (),
    ) -> None:
        self.pod_id = pod_id  # the pod it reports for (with `node`: one of the node's pods)
        self.log_path = workdir / "agent.log"
        self.workdir = workdir
        self.args = [
            sys.executable,
            "-m",
            "governor",
            "agent",
            "--server",
            server_url,
            *(["--node", node] if node else ["--pod", pod_id]),
            "--token",
            token,
            "--interval",
            str(interval_s),
            *(["--fake-nvml", fake_nvml] if fake_nvml else []),
            *extra_args,
        ]
        self.process: subprocess.Popen[bytes] | None = None
        self.started_at: datetime | None = None

    def start(self) -> AgentProcess:
        assert self.process is None, "already running"
        with self.log_path.open("ab") as log:
            self.started_at = utcnow()
            self.process = subprocess.Popen(
                self.args,
                cwd=self.workdir,
                env=clean_environ(),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        if self not in _AGENTS:
            _AGENTS.append(self)
        return self

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def wait(self, timeout_s: float = WAIT_TIMEOUT_S) -> int:
        """Wait for the agent to exit by itself; its exit status."""
        assert self.process is not None, "never started"
        try:
            return self.process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise AssertionError(
                f"the agent was still running after {timeout_s:g} s:\n{self.tail()}"
            ) from None

    def output(self) -> str:
        data = self.log_path.read_bytes() if self.log_path.exists() else b""
        return data.decode(errors="replace")

    def tail(self, lines: int = 80) -> str:
        return "\n".join(self.output().splitlines()[-lines:])

    def kill(self) -> None:
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=30)

    def close(self) -> None:
        self.kill()
        if self in _AGENTS:
            _AGENTS.remove(self)


AgentFactory = Callable[..., AgentProcess]


@pytest.fixture
def spawn_agent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AgentFactory]:
    """`spawn_agent(server_url, pod_id, token, interval_s=..., fake_nvml=...)`: a started agent,
    killed in teardown whatever happens."""
    agents: list[AgentProcess] = []

    def make(server_url: str, pod_id: str, token: str, **options: Any) -> AgentProcess:
        agent = AgentProcess(tmp_path_factory.mktemp("agent"), server_url, pod_id, token, **options)
        agents.append(agent)
        return agent.start()

    yield make
    for agent in agents:
        agent.close()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """Attach each live server's log to a failing test's report."""
    outcome = yield
    report = outcome.get_result()
    if report.failed:
        for number, live in enumerate(_LIVE, 1):
            report.sections.append((f"governor server {number} log ({live.url})", live.log_tail()))
        for number, agent in enumerate(_AGENTS, 1):
            report.sections.append((f"governor agent {number} log ({agent.pod_id})", agent.tail()))


# --- talking to the API --------------------------------------------------------------


def ok(response: httpx.Response, status: int = 200) -> dict[str, Any]:
    assert response.status_code == status, (
        f"{response.request.method} {response.request.url.path}: expected {status}, "
        f"got {response.status_code}: {response.text[:500]}"
    )
    body: dict[str, Any] = response.json()
    return body


_budget_numbers = itertools.count(1)


def declare_budget(
    client: httpx.Client, ceiling_usd: str, name: str | None = None
) -> dict[str, Any]:
    """A budget; by default named "pilot-N", as open budgets' names must differ on a server
    that several tests share."""
    name = name or f"pilot-{next(_budget_numbers)}"
    return ok(client.post("/v1/budgets", json={"name": name, "ceiling_usd": ceiling_usd}), 201)


def register_pod(
    client: httpx.Client, budget_id: str, ref: str = "pod-1", *, local: bool = False
) -> dict[str, Any]:
    """A fake pod; `local`: the server samples this machine's GPUs for it (no agent)."""
    body: dict[str, Any] = {"provider": "fake", "provider_ref": ref}
    if local:
        body["local"] = True
    return ok(client.post(f"/v1/budgets/{budget_id}/pods", json=body), 201)


def create_run(
    client: httpx.Client,
    budget_id: str,
    pod_id: str,
    *,
    heartbeat_timeout_s: float = 5,
    checkpoint_grace_s: float = 1,
    name: str = "finetune",
    policy: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A run on the pod; `policy` overrides the GPU and progress thresholds for this run and
    adds its own training-health rules (`health`)."""
    body: dict[str, Any] = {
        "name": name,
        "pod_id": pod_id,
        "heartbeat_timeout_s": heartbeat_timeout_s,
        "checkpoint_grace_s": checkpoint_grace_s,
    }
    if policy is not None:
        body["policy"] = policy
    return ok(client.post(f"/v1/budgets/{budget_id}/runs", json=body), 201)


def agent_token(client: httpx.Client, pod_id: str) -> str:
    """An agent token for the pod (POST /v1/tokens with role agent)."""
    body = {"role": "agent", "pod_id": pod_id, "label": "e2e agent"}
    token: str = ok(client.post("/v1/tokens", json=body), 201)["token"]
    return token


def passes_settled(client: httpx.Client, within_s: float = 5.0) -> bool:
    """After an outage: every pass that runs at least every `within_s` has finished again,
    and no pass is judged stuck (a longer one may still wait on the database)."""
    leader = client.get("/readyz").json().get("leader")
    if not leader:
        return False
    passes = leader["passes"].values()
    assert "stale" not in {p["state"] for p in passes}, leader
    return all(p["state"] == "ok" for p in passes if p["every_s"] <= within_s)


def assert_told_once(log: str) -> None:
    """In the log of one short outage, each kind of failure is one line (a minute's window may
    turn during it: two at most), and none comes with a traceback. A kind is what failed and
    the error's class, as the log tells them apart: a database that goes down ends the
    connections in use (`AdminShutdown`) before it refuses new ones (`OperationalError`)."""
    assert "Traceback" not in log, log[-5000:]
    told = Counter(
        line.split(": ", 1)[1].split(": ", 1)[0]  # "requests answered 503 (OperationalError"
        for line in log.splitlines()
        if "said once a minute" in line
    )
    assert told and max(told.values()) <= 2, told


def budget_events(client: httpx.Client, budget_id: str) -> list[dict[str, Any]]:
    """The budget's events, oldest first."""
    response = client.get("/v1/events", params={"budget_id": budget_id, "limit": 1000})
    assert response.status_code == 200, response.text[:500]
    events: list[dict[str, Any]] = response.json()["items"]
    return sorted(events, key=lambda e: int(e["id"]))


def get_pod(client: httpx.Client, pod_id: str) -> dict[str, Any]:
    return ok(client.get(f"/v1/pods/{pod_id}"))


def get_budget(client: httpx.Client, budget_id: str) -> dict[str, Any]:
    return ok(client.get(f"/v1/budgets/{budget_id}"))


def wait_pod_stopped(
    client: httpx.Client, pod_id: str, timeout_s: float = WAIT_TIMEOUT_S
) -> dict[str, Any]:
    """Poll the pod until the governor has confirmed its stop; returns the pod."""

    def stopped() -> dict[str, Any] | None:
        pod = get_pod(client, pod_id)
        order = pod["stop_order"]
        done = pod["state"] == "stopped" and order is not None and order["state"] == "stopped"
        return pod if done else None

    return wait_for(stopped, f"pod {pod_id} to be stopped", timeout_s)


class Sample(NamedTuple):
    """One stored raw GPU sample, read straight from the server's database."""

    id: int
    at: datetime
    uuid: str
    index: int
    utilization_pct: float | None
    utilization_max_pct: float | None
    memory_used_bytes: int | None


def gpu_samples(database_url: str, pod_id: str) -> list[Sample]:
    """Every raw GPU sample the server stored for the pod, in the order it stored them.

    The API shows only each GPU's latest sample; this reads the table (read-only) to see
    the whole series, e.g. to find when a GPU went idle or what a backlog delivered.
    """
    engine = create_engine(database_url)
    try:
        with Session(engine) as session:
            rows = session.scalars(
                select(GpuSampleRow)
                .where(GpuSampleRow.pod_id == pod_id, GpuSampleRow.resolution == "raw")
                .order_by(GpuSampleRow.id)
            ).all()
            return [
                Sample(
                    r.id,
                    r.at,
                    r.gpu_uuid,
                    r.gpu_index,
                    r.utilization_pct,
                    r.utilization_max_pct,
                    r.memory_used_bytes,
                )
                for r in rows
            ]
    finally:
        engine.dispose()


IDLE_UTIL_PCT = 5.0  # the idle rule's default threshold (the e2e runs do not override it)


def is_idle(sample: Sample) -> bool:
    """Idle as the idle rule counts it: busiest sample below the threshold, holding over 1 GiB."""
    busy = sample.utilization_max_pct
    if busy is None:
        busy = sample.utilization_pct
    held = sample.memory_used_bytes
    return busy is not None and busy < IDLE_UTIL_PCT and held is not None and held > GIB


def idle_from(samples: list[Sample], until: datetime) -> datetime:
    """When the GPU's idle stretch that was current at `until` began (one GPU)."""
    since = None
    for sample in samples:
        if sample.at > until:
            break
        since = (since or sample.at) if is_idle(sample) else None
    assert since is not None, f"the GPU was not idle at {until}: {samples[-5:]}"
    return since


def wait_stop_order(
    client: httpx.Client, pod_id: str, state: str, timeout_s: float = WAIT_TIMEOUT_S
) -> dict[str, Any]:
    def reached() -> dict[str, Any] | None:
        order = get_pod(client, pod_id)["stop_order"]
        return order if order is not None and order["state"] == state else None

    return wait_for(reached, f"pod {pod_id}'s stop order to reach {state}", timeout_s)


# --- a training job that checks in -----------------------------------------------------


class SimulatedJob:
    """A training job on a thread: one heartbeat every `interval_s`, one step per beat.

    on_stop="ack": on the first `stop`, save (a checkpoint at the current step), acknowledge
    with status "stopping", and exit, as a well-behaved job does.
    on_stop="ignore": keep sending status "running" as if it never heard (a hung harness).
    silent_after=N: send N heartbeats, then go quiet without a word (a dead process).
    Either way the job exits once the governor refuses a beat because its run has ended.
    phase: sent with every heartbeat (e.g. "training", "compiling"); none by default.
    steps_until: the step stops advancing at this instant, while the job keeps checking in
    (a hang); in the past from the start, the job stays at step 0. Settable while it runs.
    metrics: what each beat carries as its `metrics`, given its step; none by default.
    save_next: set it, and the next beat carries a checkpoint at the current step (a save the
    job made); a `checkpoint` directive sets it too, as a well-behaved job saves when told.
    `replied_at[i]` is when `replies[i]` came back.
    The loop ends by itself after `max_s`, so a test can never hang on it.
    """

    def __init__(
        self,
        base_url: str,
        run: dict[str, Any],
        *,
        on_stop: str = "ack",
        silent_after: int | None = None,
        interval_s: float = 0.2,
        max_s: float = 60.0,
        phase: str | None = None,
        steps_until: datetime | None = None,
        metrics: Callable[[int], dict[str, Any]] | None = None,
    ) -> None:
        assert on_stop in ("ack", "ignore")
        self.phase = phase
        self.metrics = metrics
        self.steps_until = steps_until
        self.replied_at: list[datetime] = []
        self.run_id: str = run["id"]
        self.token: str = run["token"]
        self.base_url = base_url
        self.on_stop = on_stop
        self.silent_after = silent_after
        self.interval_s = interval_s
        self.max_s = max_s
        self.step = 0
        self.save_next = False
        self.saved_at: list[int] = []  # the steps the job saved at
        self.replies: list[dict[str, Any]] = []
        self.errors: list[str] = []
        self.ack: dict[str, Any] | None = None
        self.ack_reply: dict[str, Any] | None = None
        self.last_beat_at: datetime | None = None
        self.saw_stop = threading.Event()
        self.ended = threading.Event()  # the governor said its run had ended (409 run_ended)
        self._halt = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"job-{self.run_id}", daemon=True)

    def __enter__(self) -> SimulatedJob:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()

    def stop(self) -> None:
        self._halt.set()
        self._thread.join(timeout=HTTP_TIMEOUT_S + 5)
        assert not self._thread.is_alive(), "the simulated job did not stop"

    def join(self, timeout_s: float = WAIT_TIMEOUT_S) -> None:
        """Wait for the job to end by itself (after its ack, or after going silent)."""
        self._thread.join(timeout=timeout_s)
        assert not self._thread.is_alive(), (
            f"the simulated job was still running after {timeout_s} s"
        )

    @property
    def stop_replies(self) -> list[dict[str, Any]]:
        return [r for r in self.replies if r["action"] == "stop"]

    def _run(self) -> None:
        ends = time.monotonic() + self.max_s
        with http_client(self.base_url, self.token) as c:
            while not self._halt.is_set() and time.monotonic() < ends:
                if self.steps_until is None or utcnow() < self.steps_until:
                    self.step += 1
                body: dict[str, Any] = {"step": self.step, "status": "running"}
                if self.phase is not None:
                    body["phase"] = self.phase
                if self.metrics is not None:
                    body["metrics"] = self.metrics(self.step)
                if self.save_next:
                    self.save_next = False
                    body["checkpoint"] = {"step": self.step, "path": f"/workspace/ckpt-{self.step}"}
                    self.saved_at.append(self.step)
                reply = self._beat(c, body)
                if reply is not None and reply["action"] == "checkpoint":
                    self.save_next = True
                if reply is not None and reply["action"] == "stop":
                    self.saw_stop.set()
                    if self.on_stop == "ack":
                        self._acknowledge(c)
                        return
                if self.silent_after is not None and len(self.replies) >= self.silent_after:
                    return
                self._halt.wait(self.interval_s)

    def _acknowledge(self, client: httpx.Client) -> None:
        checkpoint = {"step": self.step, "path": f"/workspace/ckpt-{self.step}"}
        self.ack = {"step": self.step, "status": "stopping", "checkpoint": checkpoint}
        self.ack_reply = self._beat(client, self.ack, record=False)

    def _beat(
        self, client: httpx.Client, body: dict[str, Any], *, record: bool = True
    ) -> dict[str, Any] | None:
        try:
            response = client.post(f"/v1/runs/{self.run_id}/heartbeat", json=body)
        except httpx.TransportError as exc:  # the server may be down: a real job retries
            self.errors.append(f"{type(exc).__name__}: {exc}")
            return None
        if response.status_code == 409 and response.json()["error"]["code"] == "run_ended":
            self.ended.set()  # its run has ended: nothing more is taken, as a real job hears
            self._halt.set()
            return None
        if response.status_code != 200:
            self.errors.append(f"{response.status_code}: {response.text[:300]}")
            return None
        self.last_beat_at = utcnow()
        reply: dict[str, Any] = response.json()
        if record:
            self.replies.append(reply)
            self.replied_at.append(self.last_beat_at)
        return reply


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    """A webhook receiver in this process, closed in teardown."""
    r = Receiver()
    yield r
    r.close()


def fresh(changes: dict[str, Any] | None = None, total: bool = True) -> dict[str, Any]:
    """The worked example plan with its rate quoted today."""
    today = utcnow().date().isoformat()
    return variant({"hardware.rate_quoted_at": today, **(changes or {})}, total=total)


def submit(client: httpx.Client, budget_id: str, doc: dict[str, Any]) -> httpx.Response:
    return client.post(f"/v1/budgets/{budget_id}/plans", json=doc)
