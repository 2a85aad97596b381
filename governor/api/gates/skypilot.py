"""SkyPilot's REST admin policy (`admin_policy: https://...` in its config): the body is a JSON
string that itself holds JSON, the task and config as YAML strings; the answer is encoded the
same way. HTTP 400 refuses, its body shown to the user.

Launches (`launch`, `jobs.launch`, `serve.up`, `serve.update`) are judged and, accepted,
reserved and labelled; `validate` and `optimize` are judged only, so a refusal comes early; any
other request (an `exec` on a running cluster, a controller) passes through unchanged, and so
does a launch labelled with a launch the governor accepted (a managed job's recovery).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

import yaml

from governor.api.gates.env import CLAIM_ENV, URL_ENV, Env
from governor.domain.errors import Invalid
from governor.domain.launch_gate import Candidate, LaunchRequest
from governor.domain.launch_labels import BUDGET_LABEL, LAUNCH_LABEL

TOOL = "skypilot"
RESERVING = frozenset({"launch", "jobs.launch", "serve.up", "serve.update"})
CHECKING = frozenset({"validate", "optimize"})
MAX_HOURS_ENV = "GOVERNOR_MAX_HOURS"  # a task's declared maximum duration, in hours
# libyaml's parser and emitter where PyYAML was built with it: several times faster
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


@dataclass
class SkyRequest:
    task: dict[str, Any]
    skypilot_config: str  # passed back as it came
    request_name: str
    user: str | None

    @property
    def gated(self) -> bool:
        return self.request_name in RESERVING | CHECKING

    @property
    def launch_label(self) -> str | None:
        """The launch a relaunch says it is (a managed job's recovery): passed through only
        if the governor accepted that launch."""
        value = _labels(self.task).get(LAUNCH_LABEL)
        return None if value is None else str(value)

    @property
    def reserves(self) -> bool:
        return self.request_name in RESERVING


def read(body: bytes) -> SkyRequest:
    """The request SkyPilot sent; Invalid (422) for one it could not have sent."""
    try:
        outer = json.loads(body)
        inner = json.loads(outer) if isinstance(outer, str) else outer
        task = yaml.load(inner["task"], Loader=_LOADER) or {}  # a safe loader
        user = yaml.load(inner.get("user") or "", Loader=_LOADER) or {}
        request_name = str(inner["request_name"])
        config = inner.get("skypilot_config") or ""
    except (ValueError, KeyError, TypeError, yaml.YAMLError) as exc:
        raise Invalid(f"not a SkyPilot admin-policy request: {exc}") from None
    if not isinstance(task, dict) or not isinstance(user, dict) or not isinstance(config, str):
        raise Invalid("not a SkyPilot admin-policy request: task and user must be mappings")
    name = user.get("name")
    return SkyRequest(task, config, request_name, str(name) if name else None)


def launch_request(request: SkyRequest) -> LaunchRequest:
    """The launch the task asks for: each of its resources' candidates, its nodes."""
    task = request.task
    labels = _labels(task)
    envs = task.get("envs") or {}
    try:
        nodes = int(task.get("num_nodes") or 1)
        hours = Decimal(str(envs[MAX_HOURS_ENV])) if MAX_HOURS_ENV in envs else None
    except (TypeError, ValueError, InvalidOperation):
        raise Invalid(f"num_nodes and {MAX_HOURS_ENV} must be numbers") from None
    if nodes < 1 or (hours is not None and (not hours.is_finite() or hours <= 0)):
        raise Invalid(f"num_nodes and {MAX_HOURS_ENV} must be positive")
    return LaunchRequest(
        tool=TOOL,
        candidates=tuple(c for r in _resources(task) for c in _candidates(r)),
        nodes=nodes,
        budget_ref=None if labels.get(BUDGET_LABEL) is None else str(labels[BUDGET_LABEL]),
        max_hours=hours,
        user=request.user,
        name=None if task.get("name") is None else str(task["name"]),
    )


def accepted(request: SkyRequest, labels: dict[str, str], env: Env) -> str:
    """The answer that accepts: the task with `labels` on every resource, the claim in its
    environment and the governor's address unless the task sets one, encoded as SkyPilot
    decodes it."""
    task = request.task
    resources = task.get("resources")
    if not isinstance(resources, dict):
        resources = task["resources"] = {}
    resources["labels"] = {**(resources.get("labels") or {}), **labels}
    for key in ("any_of", "ordered"):
        for entry in resources.get(key) or ():
            if isinstance(entry, dict) and entry.get("labels") is not None:
                entry["labels"] = {**entry["labels"], **labels}
    task["envs"] = {URL_ENV: env.url, **(task.get("envs") or {}), CLAIM_ENV: env.claim}
    return unchanged(request)


def unchanged(request: SkyRequest) -> str:
    task = yaml.dump(request.task, Dumper=_DUMPER)
    body = {"task": task, "skypilot_config": request.skypilot_config}
    return json.dumps(json.dumps(body))


def _labels(task: dict[str, Any]) -> dict[str, Any]:
    resources = task.get("resources")
    found: dict[str, Any] = {}
    for r in _resources(task) if isinstance(resources, dict) else ():
        found.update(r.get("labels") or {})
    return found


def _resources(task: dict[str, Any]) -> list[dict[str, Any]]:
    """Each alternative of the task's resources, the shared fields under its own."""
    resources = task.get("resources") or {}
    if isinstance(resources, list):  # a list of alternatives
        return [r for r in resources if isinstance(r, dict)] or [{}]
    if not isinstance(resources, dict):
        return [{}]
    base = {k: v for k, v in resources.items() if k not in ("any_of", "ordered")}
    alternatives = resources.get("any_of") or resources.get("ordered") or [{}]
    return [{**base, **a} for a in alternatives if isinstance(a, dict)] or [base]


def _candidates(r: dict[str, Any]) -> list[Candidate]:
    provider, region = _where(r)
    spot = bool(r.get("use_spot"))
    return [Candidate(provider, name, count, spot, region) for name, count in _accelerators(r)] or [
        Candidate(provider, None, 0, spot, region)
    ]


def _where(r: dict[str, Any]) -> tuple[str | None, str | None]:
    infra = r.get("infra")
    if isinstance(infra, str) and infra.strip() and infra.strip() != "*":
        parts = [p for p in infra.strip().split("/")]
        provider = parts[0] if parts[0] not in ("", "*") else None
        region = parts[1] if len(parts) > 1 and parts[1] not in ("", "*") else None
        return provider, region
    cloud, region = r.get("cloud"), r.get("region")
    return (str(cloud) if cloud else None), (str(region) if region else None)


def _accelerators(r: dict[str, Any]) -> list[tuple[str, int]]:
    """Each accelerator the resources would take, with its count: "A100:8", {"A100": 8}, or a
    list of alternatives of either."""
    raw = r.get("accelerators")
    if raw is None:
        return []
    items = raw if isinstance(raw, list | tuple | set) else [raw]
    found: list[tuple[str, int]] = []
    for item in items:
        if isinstance(item, dict):
            found += [(str(k), _count(v)) for k, v in item.items()]
        else:
            name, _, count = str(item).partition(":")
            found.append((name.strip(), _count(count or 1)))
    return found


def _count(value: object) -> int:
    try:
        count = float(str(value))
    except ValueError:
        raise Invalid(f"not a count of accelerators: {value!r}") from None
    if not 0 <= count <= 1024:
        raise Invalid(f"not a count of accelerators: {value!r}")
    return max(1, round(count)) if count > 0 else 0
