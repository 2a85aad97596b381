"""deploy/systemd: the install steps in the unit's header, run against a scratch root.

The directory and file steps (`install`, `cp`) run for real, with /etc, /opt and /var/lib
moved under a temporary directory that holds only what a fresh machine has there. Owners
(-o/-g) are left out because the account does not exist here; they are checked as written.
The user, virtualenv and systemctl steps are checked as text, not run. And
`systemd-analyze verify` reads the unit too (`make test` installs systemd for it)."""

from __future__ import annotations

import configparser
import shlex
import stat
import subprocess
from pathlib import Path

import pytest

from tests.programs import program

ROOT = Path(__file__).resolve().parents[2]
UNIT = ROOT / "deploy" / "systemd" / "gpu-governor.service"
MOVED = ("/etc/", "/opt/", "/var/lib/")
FRESH = ("etc/systemd/system", "opt", "var/lib")  # there on any systemd machine


def _steps() -> list[list[str]]:
    """The header's commands, in order: comment lines indented by three spaces."""
    steps = []
    for line in UNIT.read_text(encoding="utf-8").splitlines():
        if not line.startswith("#"):
            break
        if line.startswith("#   ") and not line.startswith("#    "):
            steps.append(shlex.split(line[1:], comments=True))
    return steps


def _unit() -> configparser.SectionProxy:
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read_string(UNIT.read_text(encoding="utf-8"))
    return parser["Service"]


def _drop_owners(args: list[str]) -> list[str]:
    out, skip = [], False
    for arg in args:
        if skip:
            skip = False
        elif arg in ("-o", "-g"):
            skip = True
        else:
            out.append(arg)
    return out


@pytest.fixture
def installed(tmp_path: Path) -> Path:
    runnable = {"install": program("install"), "cp": program("cp")}
    for folder in FRESH:
        (tmp_path / folder).mkdir(parents=True)
    for args in _steps():
        if args[0] not in runnable:
            continue
        command, *rest = _drop_owners(args)
        moved = [str(tmp_path) + a if a.startswith(MOVED) else a for a in rest]
        result = subprocess.run(
            [runnable[command], *moved], cwd=ROOT, capture_output=True, text=True, check=False
        )
        assert result.returncode == 0, f"{shlex.join(args)}: {result.stderr}"
    return tmp_path


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_steps_create_what_the_unit_reads(installed: Path) -> None:
    service = _unit()
    env_file = installed / service["EnvironmentFile"].lstrip("/")
    assert env_file.read_bytes() == (ROOT / "deploy" / "governor.env.example").read_bytes()
    assert _mode(env_file) == 0o600
    assert _mode(env_file.parent) == 0o700
    state = installed / service["WorkingDirectory"].lstrip("/")
    assert state.is_dir()
    assert _mode(state) == 0o750
    migrations_dir = service["Environment"].removeprefix("GOVERNOR_MIGRATIONS_DIR=")
    assert (installed / migrations_dir.lstrip("/") / "env.py").is_file()
    unit = installed / "etc/systemd/system" / UNIT.name
    assert unit.read_bytes() == UNIT.read_bytes()


def test_owners_user_and_service_steps_are_in_order() -> None:
    steps = [" ".join(args) for args in _steps()]
    service = _unit()
    user = service["User"]
    first = {
        word: next(i for i, s in enumerate(steps) if word in s) for word in ("useradd", "venv")
    }
    assert steps[first["useradd"]].endswith(f" {user}")
    assert first["useradd"] < min(i for i, s in enumerate(steps) if f"-o {user}" in s)
    venv = steps[first["venv"]].split()[-1]
    assert service["ExecStart"].startswith(f"{venv}/bin/governor serve")
    assert service["ExecStartPre"] == f"{venv}/bin/governor migrate"
    assert any(s.startswith(f"{venv}/bin/pip install") for s in steps)
    env_step = next(s for s in steps if s.endswith(service["EnvironmentFile"]))
    assert "-o root" in env_step and "-m 0600" in env_step
    enable = next(i for i, s in enumerate(steps) if s.startswith("systemctl daemon-reload"))
    assert "systemctl enable --now gpu-governor" in steps[enable]
    assert enable > max(i for i, s in enumerate(steps) if s.startswith(("install", "cp", venv)))


def test_systemd_accepts_the_unit(installed: Path) -> None:
    """systemd's own parser, on a copy whose paths point into the scratch root (where a stub
    stands in for the virtualenv's `governor`): no unknown keys, no missing commands."""
    governor = installed / _unit()["ExecStartPre"].split()[0].lstrip("/")
    governor.parent.mkdir(parents=True)
    governor.write_text("#!/bin/sh\n", encoding="utf-8")
    governor.chmod(0o755)
    text = UNIT.read_text(encoding="utf-8")
    for prefix in MOVED:
        text = text.replace(f"={prefix}", f"={installed}{prefix}")
    copy = installed / UNIT.name
    copy.write_text(text, encoding="utf-8")
    result = subprocess.run(
        [program("systemd-analyze"), "verify", "--man=no", str(copy)],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert result.returncode == 0 and not result.stderr.strip(), result.stderr
