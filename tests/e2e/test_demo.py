"""`governor demo --exit`: the whole pilot on a simulated cloud, start to finish, exit 0: a
plan checked before the pod, the ceiling reached, the pod stopped keeping its volume."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.conftest import clean_environ, free_port
from tests.programs import program

pytestmark = pytest.mark.e2e

DEMO_TIMEOUT_S = 90
ROOT = Path(__file__).resolve().parents[2]


def test_demo_ends_ok_with_the_pod_stopped_keeping_its_volume(tmp_path: Path) -> None:
    # The demo keeps its SQLite database and workspace in a fresh temporary folder: put that
    # under this test's own, so nothing is left behind.
    env = {**clean_environ(), "TMPDIR": str(tmp_path)}
    result = subprocess.run(
        [sys.executable, "-m", "governor", "demo", "--exit", "--port", str(free_port())],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=DEMO_TIMEOUT_S,
        check=False,
    )

    output = f"{result.stdout}\n--- stderr ---\n{result.stderr}"
    assert result.returncode == 0, output
    assert re.search(r"^Result after \d+ s: OK$", result.stdout, re.MULTILINE), output
    # the dashboard's address comes first, before any narration
    assert re.search(r"^  dashboard\s+http://127\.0\.0\.1:\d+/status ", result.stdout, re.M)
    assert result.stdout.index("/status ") < result.stdout.index("Budget  ")
    assert "NOT OK" not in result.stdout
    # Its budget requires a plan: one is checked, and admitted, before the pod is registered.
    assert re.search(r"^Plan\s+demo-fine-tune: go, worst case \$\d+\.\d\d", result.stdout, re.M)
    assert result.stdout.index("preflight: go") < result.stdout.index("registered at")
    assert re.search(r"^\s+pod\s+stopped; workspace kept: yes$", result.stdout, re.MULTILINE), (
        output
    )
    assert re.search(r"^\s+stop\s+the provider's stop that keeps the volume", result.stdout, re.M)


def test_a_taken_port_is_refused_in_one_line_naming_the_fix(tmp_path: Path) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as holder:  # `make serve`, say
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        result = subprocess.run(
            [sys.executable, "-m", "governor", "demo", "--exit", "--port", str(port)],
            cwd=tmp_path,
            env={**clean_environ(), "TMPDIR": str(tmp_path)},
            capture_output=True,
            text=True,
            timeout=DEMO_TIMEOUT_S,
            check=False,
        )

    assert (result.returncode, result.stdout) == (2, ""), result
    assert result.stderr.count("\n") == 1, result.stderr
    assert f"cannot listen on 127.0.0.1:{port}" in result.stderr
    assert f"--port {port + 1}" in result.stderr
    assert f"make demo PORT={port + 1}" in result.stderr


def test_make_demo_takes_a_port() -> None:
    result = subprocess.run(
        [program("make"), "--dry-run", "demo", "PORT=8123"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert re.search(r"^\S*governor demo --port 8123$", result.stdout, re.MULTILINE), result.stdout
