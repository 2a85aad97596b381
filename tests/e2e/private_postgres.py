"""A PostgreSQL cluster of a test's own, on a spare port, that the test may stop and restart.

It runs as the `postgres` user when the tests run as root (as in CI), and as the current user
otherwise. Its files live in a fresh directory under the system's temporary folder (the
`postgres` user must be able to reach it), removed when the cluster is closed.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path

from tests.e2e.conftest import free_port
from tests.programs import program

TIMEOUT_S = 120


def _bindir() -> Path:
    result = subprocess.run(
        [program("pg_config"), "--bindir"], capture_output=True, text=True, check=True, timeout=30
    )
    return Path(result.stdout.strip())


class PrivatePostgres:
    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="governor-pg-"))
        self.data = self.root / "data"
        self.log = self.root / "postgres.log"
        self.port = free_port()
        bindir = _bindir()
        self.initdb = program("initdb", bindir)
        self.pg_ctl = program("pg_ctl", bindir)
        self.createdb = program("createdb", bindir)
        self._user = "postgres" if os.geteuid() == 0 else None
        if self._user is not None:
            account = pwd.getpwnam(self._user)
            os.chmod(self.root, 0o755)
            os.chown(self.root, account.pw_uid, account.pw_gid)
        self._run(self.initdb, "-D", str(self.data), "-A", "trust", "-U", "postgres", "--no-sync")

    def url(self, database: str = "postgres") -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{database}"

    def start(self) -> None:
        options = (
            f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 "
            "-c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        )
        self._run(
            self.pg_ctl, "-D", str(self.data), "-l", str(self.log), "-o", options, "-w", "start"
        )

    def stop(self) -> None:
        self._run(self.pg_ctl, "-D", str(self.data), "-m", "fast", "-w", "stop")

    def restart(self) -> None:
        self.stop()
        self.start()

    def create_database(self, name: str) -> str:
        self._run(self.createdb, "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", name)
        return self.url(name)

    def close(self) -> None:
        subprocess.run(
            self._argv(self.pg_ctl, "-D", str(self.data), "-m", "immediate", "stop"),
            capture_output=True,
            check=False,
            timeout=TIMEOUT_S,
        )
        shutil.rmtree(self.root, ignore_errors=True)

    def _argv(self, executable: str, *args: str) -> list[str]:
        argv = [executable, *args]
        return argv if self._user is None else [program("runuser"), "-u", self._user, "--", *argv]

    def _run(self, executable: str, *args: str) -> None:
        result = subprocess.run(
            self._argv(executable, *args), capture_output=True, text=True, timeout=TIMEOUT_S
        )
        name = Path(executable).name
        assert result.returncode == 0, (
            f"{name} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}\n"
            + (self.log.read_text() if self.log.exists() else "")
        )
