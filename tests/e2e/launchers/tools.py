"""The launchers' virtualenvs, as tests/prerequisites.sh makes them from requirements/, and the
scripts that run inside them."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[3]
HERE = Path(__file__).resolve().parent
SKYPILOT_PYTHON = ROOT / ".venv-skypilot" / "bin" / "python"
DSTACK_PYTHON = ROOT / ".venv-dstack" / "bin" / "python"


def _python(path: Path) -> Path:
    if not path.exists():
        pytest.fail(
            f"{path.parent.parent.name} is missing: `make test-prerequisites` makes it "
            "(bash tests/prerequisites.sh)"
        )
    return path


def run(python: Path, script: str, *args: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run `script` under the launcher's interpreter; its JSON answer."""
    result = subprocess.run(
        [str(_python(python)), str(HERE / script), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=env,
    )
    assert result.returncode == 0, f"{script} failed:\n{result.stdout}\n{result.stderr[-3000:]}"
    answer: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    return answer


def skypilot(policy_url: str, **request: Any) -> dict[str, Any]:
    """SkyPilot's RestfulAdminPolicy judging a task at `policy_url` (skypilot_launch.py)."""
    return run(SKYPILOT_PYTHON, "skypilot_launch.py", policy_url, json.dumps(request))


def dstack(
    plugin_uri: str, configuration: dict[str, Any], *, user: str = "bob", times: int = 2
) -> dict[str, Any]:
    """dstack's rest_plugin applying a run of `configuration` (dstack_apply.py), `times` times
    (plan, then apply)."""
    env = {"DSTACK_PLUGIN_SERVICE_URI": plugin_uri, "PATH": "/usr/bin:/bin", "HOME": str(HERE)}
    return run(
        DSTACK_PYTHON,
        "dstack_apply.py",
        user,
        "main",
        json.dumps(configuration),
        str(times),
        env=env,
    )
