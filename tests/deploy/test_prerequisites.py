"""Every program the tests run is one that `make test` installs (tests/prerequisites.sh).

The tests find each program they run through tests/programs.py's `program`, its name written
out; those names are read here from the tests' source. The script, run with none of them on
PATH, must report each one missing and name its package in the install line it prints; run
here, where `make test` has installed them, it must find them all. A program run any other way
(a command line that starts with its name, `shutil.which`, `os.system`) fails the scan, so a new
program cannot reach the tests without the script installing it.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from tests.programs import PREREQUISITES, program

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"
SCRIPT = ROOT / PREREQUISITES
GATE = "programs.py"  # the one module that looks programs up
RUNNERS = {f"subprocess.{name}" for name in ("run", "Popen", "call", "check_call", "check_output")}
SHELLS = ("os.system", "os.popen", "os.exec", "os.spawn", "shutil.which")
MISSING = re.compile(r"^  (\S+) \((\S+)\)$", re.MULTILINE)


@dataclass
class Scan:
    used: set[str] = field(default_factory=set)  # the names given to program()
    bypasses: list[str] = field(default_factory=list)  # programs run another way


def _literal(node: ast.expr | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _first_word(argv: ast.expr) -> str | None:
    """The program a command line names by a string: "ls -l", or ["ls", "-l"]."""
    if isinstance(argv, ast.List | ast.Tuple):
        return _literal(argv.elts[0]) if argv.elts else None
    return _literal(argv)


def scan(root: Path) -> Scan:
    found = Scan()
    for path in sorted(root.rglob("*.py")):
        where = path.relative_to(root)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module == "subprocess":
                found.bypasses.append(f"{where}:{node.lineno}: call it as subprocess.<name>")
            if not isinstance(node, ast.Call):
                continue
            called = ast.unparse(node.func)
            if called == "program":
                name = _literal(node.args[0]) if node.args else None
                if name is None:
                    found.bypasses.append(f"{where}:{node.lineno}: program() of a name not written")
                else:
                    found.used.add(name)
            elif called in RUNNERS and node.args and _first_word(node.args[0]) is not None:
                found.bypasses.append(f"{where}:{node.lineno}: runs a program by its bare name")
            elif called.startswith(SHELLS) and path.name != GATE:
                found.bypasses.append(f"{where}:{node.lineno}: {called}() instead of program()")
    return found


def _check(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [program("bash"), str(SCRIPT), "--check"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_the_scan_sees_every_way_a_program_is_run(tmp_path: Path) -> None:
    (tmp_path / "test_helm.py").write_text(
        "import os, shutil, subprocess\n"
        "from subprocess import run\n"
        'subprocess.run([program("helm"), "lint"])\n'
        'subprocess.run(["kubectl", "apply"])\n'
        'subprocess.Popen("kind create cluster", shell=True)\n'
        'shutil.which("helm")\n'
        'os.system("make")\n'
        "program(name)\n"
        "subprocess.run([sys.executable, '-c', 'pass'])\n",
        encoding="utf-8",
    )

    found = scan(tmp_path)

    assert found.used == {"helm"}
    assert [b.split(":")[1] for b in found.bypasses] == ["2", "4", "5", "6", "7", "8"]


def test_the_tests_run_programs_only_through_programs_py() -> None:
    assert scan(TESTS).bypasses == []


def test_the_script_installs_every_program_the_tests_run(tmp_path: Path) -> None:
    used = scan(TESTS).used
    assert "promtool" in used  # the scan reads the tests' real calls
    empty = tmp_path / "bin"
    empty.mkdir()

    result = _check({"PATH": str(empty)})  # nothing is installed there

    assert result.returncode == 1, result.stdout + result.stderr
    missing = dict(MISSING.findall(result.stdout))
    assert used - missing.keys() == set(), "run by the tests, not installed by the script"
    install = result.stdout.strip().splitlines()[-1].split()
    assert install[:4] == ["apt-get", "update", "&&", "apt-get"], result.stdout
    assert {missing[name] for name in used} <= set(install[6:])


def test_the_script_finds_every_program_installed_here() -> None:
    result = _check(dict(os.environ))
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")
