"""The programs beyond Python that the tests run, each found here by its name.

`make test` installs every one of them first (tests/prerequisites.sh, as root);
tests/deploy/test_prerequisites.py reads the tests for the names given to `program` and fails
for one that script does not install, and for a program run without going through here.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

PREREQUISITES = "tests/prerequisites.sh"


def program(name: str, directory: Path | None = None) -> str:
    """The path of the program `name`, on PATH or in `directory`; a missing one fails the test
    with what installs it."""
    found = shutil.which(name, path=None if directory is None else str(directory))
    if found is None:
        where = "on PATH" if directory is None else f"in {directory}"
        pytest.fail(
            f"{name} is not installed ({where}): `make test` installs it when run as root; "
            f"`bash {PREREQUISITES} --check` prints the line to run"
        )
    return found
