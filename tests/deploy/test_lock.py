"""The lock files (`make lock`) pin what pyproject.toml declares, within its ranges.

requirements/runtime.txt is what `make serve` and the container image install (the image's
extras: aws, gcp, kubernetes, focus and oidc); requirements/dev.txt what `make test` installs
(the dev extra and every extra it names). Each pins one version of every package, no CUDA
build of PyTorch, and no machine's index, wheel folder or file path.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
SELF = canonicalize_name(PROJECT["name"])
RUNTIME = ROOT / "requirements" / "runtime.txt"
DEV = ROOT / "requirements" / "dev.txt"
IMAGE_EXTRAS = ("aws", "gcp", "kubernetes", "focus", "oidc")
PIN = re.compile(r"^([A-Za-z0-9._-]+)==([^\s;]+)(?:\s*;.*)?$")
ABSOLUTE_PATH = re.compile(r"(?:^|[\s=])/\w.*$", re.MULTILINE)
CUDA = re.compile(r"^(nvidia-(?!ml-py$).+|triton)$")  # NVML's bindings are the governor's own


def pins(lock: Path) -> dict[str, Version]:
    """Each package's pinned version; any other line but a comment fails."""
    found: dict[str, Version] = {}
    for line in lock.read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        match = PIN.match(line)
        assert match, f"{lock.name}: not a pin: {line!r}"
        name = canonicalize_name(match[1])
        assert name not in found, f"{lock.name}: {name} pinned twice"
        found[name] = Version(match[2])
    return found


def declared(*extras: str) -> list[Requirement]:
    """pyproject.toml's dependencies with these extras, and the extras they name of the
    project itself, followed through."""
    wanted, seen, out = list(extras), set(), [Requirement(r) for r in PROJECT["dependencies"]]
    while wanted:
        extra = wanted.pop()
        if extra in seen:
            continue
        seen.add(extra)
        for requirement in map(Requirement, PROJECT["optional-dependencies"][extra]):
            if canonicalize_name(requirement.name) == SELF:
                wanted.extend(requirement.extras)
            else:
                out.append(requirement)
    return out


@pytest.mark.parametrize(
    ("lock", "extras"), [(RUNTIME, IMAGE_EXTRAS), (DEV, ("dev",))], ids=["runtime", "dev"]
)
def test_the_lock_pins_every_declared_requirement_within_its_range(
    lock: Path, extras: tuple[str, ...]
) -> None:
    pinned = pins(lock)
    for requirement in declared(*extras):
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
            continue
        name = canonicalize_name(requirement.name)
        assert name in pinned, f"{lock.name} lacks {requirement}: run make lock"
        assert requirement.specifier.contains(pinned[name], prereleases=True), (
            f"{lock.name} pins {name}=={pinned[name]}, outside {requirement}: run make lock"
        )


def test_the_dev_lock_agrees_with_the_runtime_lock() -> None:
    runtime, dev = pins(RUNTIME), pins(DEV)
    assert runtime.keys() <= dev.keys()
    assert {name: dev[name] for name in runtime} == runtime


@pytest.mark.parametrize("lock", [RUNTIME, DEV], ids=["runtime", "dev"])
def test_the_lock_has_no_cuda_build_and_no_machine_location(lock: Path) -> None:
    pinned = pins(lock)
    assert [name for name in pinned if CUDA.match(name)] == []  # what a CUDA torch pulls in
    text = lock.read_text(encoding="utf-8")  # pins() refused any option or direct reference
    assert "file://" not in text
    assert ABSOLUTE_PATH.search(text) is None, ABSOLUTE_PATH.search(text)
    assert "# by the following command:\n#\n#    make lock\n" in text
