"""`governor serve` says how to reach the command line of its own environment when the shell's
PATH does not lead there (as after `make serve`), and says nothing when it does."""

from __future__ import annotations

import os
from pathlib import Path

from governor.cli.serve import command_line_hint


def _environment(root: Path, *, activate: bool) -> Path:
    folder = root / "env" / "bin"
    folder.mkdir(parents=True)
    (folder / "python").touch()
    (folder / "governor").touch()
    if activate:
        (folder / "activate").touch()
    return folder


def test_off_the_path_it_says_to_activate_the_environment(tmp_path: Path) -> None:
    folder = _environment(tmp_path, activate=True)
    hint = command_line_hint(str(folder / "python"), os.pathsep.join(["/usr/bin", "/bin"]))
    assert hint is not None and f"'. {folder / 'activate'}'" in hint


def test_without_an_activate_script_it_says_where_the_command_is(tmp_path: Path) -> None:
    folder = _environment(tmp_path, activate=False)
    hint = command_line_hint(str(folder / "python"), "/usr/bin")
    assert hint is not None and f"'export PATH={folder}:$PATH'" in hint


def test_on_the_path_or_without_the_command_it_says_nothing(tmp_path: Path) -> None:
    folder = _environment(tmp_path, activate=True)
    assert command_line_hint(str(folder / "python"), os.pathsep.join(["/bin", str(folder)])) is None
    (folder / "governor").unlink()
    assert command_line_hint(str(folder / "python"), "/usr/bin") is None
