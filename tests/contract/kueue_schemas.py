"""Kueue's objects checked against the `openAPIV3Schema` of Kueue's own CRDs (vendored in
`tests/specs/kueue/`, the storage version `v1beta2`): what the fake API server holds, and
every status patch the controller sends, once applied, must be valid by them."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import yaml
from jsonschema import Draft7Validator, FormatChecker

SPECS = Path(__file__).resolve().parents[1] / "specs" / "kueue"
VERSION = "v1beta2"
LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # the 1.4 MB Workload CRD, fast
FILES = {
    "Workload": "workloads",
    "AdmissionCheck": "admissionchecks",
    "ClusterQueue": "clusterqueues",
    "ResourceFlavor": "resourceflavors",
}


@cache
def validator(kind: str) -> Draft7Validator:
    crd = yaml.load((SPECS / f"kueue.x-k8s.io_{FILES[kind]}.yaml").read_text(), Loader=LOADER)
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == VERSION]
    assert version["storage"] is True, f"{kind}: {VERSION} is not Kueue's storage version"
    return Draft7Validator(version["schema"]["openAPIV3Schema"], format_checker=FormatChecker())


def problems(kind: str, obj: dict[str, Any]) -> list[str]:
    """Every way `obj` breaks its kind's schema, each with where."""
    return [
        f"{'.'.join(str(p) for p in error.absolute_path) or '(root)'}: {error.message[:300]}"
        for error in validator(kind).iter_errors(obj)
    ]


def validate(kind: str, obj: dict[str, Any]) -> str | None:
    """The fake API server's check: why `obj` is invalid, None when it is valid."""
    found = problems(kind, obj)
    return "; ".join(found) if found else None
