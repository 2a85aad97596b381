"""`governor demo --exit`: the whole pilot on a simulated cloud, start to finish, exit 0."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.conftest import clean_environ, free_port

pytestmark = pytest.mark.e2e

DEMO_TIMEOUT_S = 90


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
    assert "NOT OK" not in result.stdout
    assert re.search(r"^\s+pod\s+stopped; workspace kept: yes$", result.stdout, re.MULTILINE), (
        output
    )
    assert re.search(r"^\s+stop\s+the provider's stop that keeps the volume", result.stdout, re.M)
