"""What the server benchmarks share: a database to run on, the governor in its own process,
and their output (one JSON line per measurement on stdout, progress on stderr).

A PostgreSQL database is created for each server (gov_bench_<pid>_<n>) through the admin
connection and dropped afterwards, whatever happens; a SQLite one is a file in a temp dir.
The server inherits this process's environment (so it runs the same code), less every
GOVERNOR_* variable it is not given here.
"""

from __future__ import annotations

import itertools
import json
import os
import resource
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple

import httpx
from sqlalchemy import create_engine, make_url, text
from sqlalchemy.exc import OperationalError

DEFAULT_ADMIN_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
OPERATOR_TOKEN = "bench-operator-token"
READY_TIMEOUT_S = 90.0  # a cold start on a busy 2-core machine can be slow
HOST = "127.0.0.1"

_database_numbers = itertools.count(1)


class BenchError(Exception):
    """Setup failed or the server died: the message says what, with the server log's tail."""


def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def emit(record: dict[str, Any]) -> None:
    print(json.dumps(record), flush=True)


def raise_open_files_limit() -> None:
    """Allow thousands of sockets here and in the server, which inherits the limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


@contextmanager
def database(kind: str, admin_url: str, workdir: Path) -> Iterator[str]:
    """An empty database of `kind` ("sqlite" or "postgres"); yields its URL."""
    if kind == "sqlite":
        yield f"sqlite:///{workdir / 'governor.db'}"
        return
    name = f"gov_bench_{os.getpid()}_{next(_database_numbers)}"
    admin = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    try:
        try:
            with admin.connect() as connection:
                connection.execute(text(f'CREATE DATABASE "{name}"'))
        except OperationalError as exc:
            shown = make_url(admin_url).render_as_string(hide_password=True)
            raise BenchError(f"cannot create a database through {shown}: {exc.orig}") from exc
        try:
            yield make_url(admin_url).set(database=name).render_as_string(hide_password=False)
        finally:
            with admin.connect() as connection:
                connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    finally:
        admin.dispose()


class Memory(NamedTuple):
    rss_kib: int
    peak_kib: int


class Server:
    """`python -m governor serve` on a free port, its output in a log file."""

    def __init__(self, database_url: str, workdir: Path, **env: str) -> None:
        self.database_url = database_url
        self.workdir = workdir
        self.port = free_port()
        self.url = f"http://{HOST}:{self.port}"
        self.passes_url = self.url  # the replica whose /metrics tells of the passes
        self.log_path = workdir / f"server-{self.port}.log"
        inherited = {k: v for k, v in os.environ.items() if not k.startswith("GOVERNOR_")}
        self.env = {
            **inherited,
            "GOVERNOR_DATABASE_URL": database_url,
            "GOVERNOR_OPERATOR_TOKEN": OPERATOR_TOKEN,
            "GOVERNOR_FAKE_STATE_FILE": str(workdir / "fake-cloud.json"),
            **env,
        }
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int:
        assert self.process is not None, "not started"
        return self.process.pid

    def start(self) -> Server:
        if not self.database_url.startswith("sqlite"):
            self._migrate()  # serve never upgrades a PostgreSQL database itself
        command = [sys.executable, "-m", "governor", "serve", "--host", HOST]
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                [*command, "--port", str(self.port)],
                cwd=self.workdir,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        return self

    def _migrate(self) -> None:
        result = subprocess.run(
            [sys.executable, "-m", "governor", "migrate"],
            cwd=self.workdir,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )
        if result.returncode != 0:
            raise BenchError(f"governor migrate failed:\n{result.stdout}\n{result.stderr}")

    def wait_ready(self, timeout_s: float = READY_TIMEOUT_S) -> Server:
        """Poll GET /readyz until it answers 200; fail (with the log) if the process exits."""
        deadline = time.monotonic() + timeout_s
        last = "no answer yet"
        with httpx.Client(base_url=self.url, timeout=5.0) as client:
            while time.monotonic() < deadline:
                self.check_alive()
                try:
                    response = client.get("/readyz")
                    if response.status_code == 200:
                        return self
                    last = f"{response.status_code} {response.text[:300]}"
                except httpx.TransportError as exc:
                    last = type(exc).__name__
                time.sleep(0.1)
        raise BenchError(f"the server was not ready after {timeout_s:g} s ({last})\n{self.tail()}")

    def check_alive(self) -> None:
        code = None if self.process is None else self.process.poll()
        if code is not None:
            raise BenchError(f"the server exited with {code}\n{self.tail()}")

    def memory(self) -> Memory:
        """Resident set size and its peak so far (VmRSS, VmHWM), in KiB."""
        fields = {}
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                fields[key] = int(value.split()[0])
        return Memory(fields["VmRSS"], fields["VmHWM"])

    def reset_peak(self) -> None:
        """Start the peak (VmHWM) again from the resident set now, so the next reading's peak
        is what came after."""
        Path(f"/proc/{self.pid}/clear_refs").write_text("5")

    def cpu_s(self) -> float:
        """CPU seconds the server has used so far, user and system (its threads included)."""
        fields = Path(f"/proc/{self.pid}/stat").read_text().rpartition(")")[2].split()
        utime, stime = int(fields[11]), int(fields[12])
        return (utime + stime) / os.sysconf("SC_CLK_TCK")

    def tail(self, lines: int = 60) -> str:
        """The end of the server's log, without the scheduler's every-tick chatter."""
        text_ = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        kept = [line for line in text_.splitlines() if "apscheduler.executors" not in line]
        return "--- server log (tail) ---\n" + "\n".join(kept[-lines:])

    def stop(self) -> None:
        """SIGTERM and a clean exit; SIGKILL if it does not come within 20 s."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=30)


@contextmanager
def governor(kind: str, admin_url: str, *, passes_apart: bool = False) -> Iterator[Server]:
    """A ready governor on a fresh database of `kind`, stopped and cleaned up afterwards.

    `passes_apart` (PostgreSQL): two replicas on the database, the one yielded serving the
    API with GOVERNOR_SCHEDULER_ENABLED=false, the other leading the periodic passes."""
    if passes_apart and kind != "postgres":
        raise BenchError("passes apart take two replicas on one database: PostgreSQL only")
    with (
        tempfile.TemporaryDirectory(prefix="gov-bench-") as tmp,
        database(kind, admin_url, Path(tmp)) as url,
    ):
        leader = Server(url, Path(tmp), GOVERNOR_REPLICA_ID="leader") if passes_apart else None
        server = Server(
            url, Path(tmp), **({"GOVERNOR_SCHEDULER_ENABLED": "false"} if leader else {})
        )
        try:
            if leader is not None:
                progress(f"[{kind}] starting the replica that leads the passes on {leader.url}")
                leader.start().wait_ready()
                server.passes_url = leader.url
            progress(f"[{kind}] starting the governor on {server.url}")
            yield server.start().wait_ready()
        finally:
            server.stop()
            if leader is not None:
                leader.stop()
