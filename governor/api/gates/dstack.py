"""dstack's REST plugin (`DSTACK_PLUGIN_SERVICE_URI`): `{user, project, spec}` POSTed to
`/apply_policies/on_run_apply` (and fleets, volumes, gateways); the answer is HTTP 200 with
`{"spec": ..., "error": null | "..."}`, an error refusing with its text shown.

dstack asks twice, with the same spec, when a plan is shown and when it is applied: the first
call reserves and the second finds that reservation again (the request's key is its user,
project and spec), so a launch is never reserved twice. An accepted run gets the budget's
labels as tags, the claim in its environment, and `max_duration` where the request set none
and `max_price` (the hours and instance price it was priced at, which dstack then enforces).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from governor.api.gates.env import CLAIM_ENV, URL_ENV, Env
from governor.domain.errors import Invalid
from governor.domain.launch_gate import Candidate, LaunchRequest
from governor.domain.launch_labels import BUDGET_LABEL

TOOL = "dstack"
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*$")
_UNIT_S = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


@dataclass
class DstackRequest:
    user: str | None
    project: str | None
    spec: dict[str, Any]

    @property
    def key(self) -> str:
        """What names this request again when dstack repeats it."""
        canonical = json.dumps([self.user, self.project, self.spec], sort_keys=True)
        return hashlib.sha256(canonical.encode()).hexdigest()

    @property
    def configuration(self) -> dict[str, Any]:
        conf = self.spec.get("configuration")
        return conf if isinstance(conf, dict) else {}


def read(body: Any) -> DstackRequest:
    if not isinstance(body, dict) or not isinstance(body.get("spec"), dict):
        raise Invalid("not a dstack plugin request: want {user, project, spec}")
    user, project = body.get("user"), body.get("project")
    return DstackRequest(
        None if user is None else str(user), None if project is None else str(project), body["spec"]
    )


def launch_request(request: DstackRequest) -> LaunchRequest:
    conf = request.configuration
    given = request.spec.get("profile")
    profile: dict[str, Any] = given if isinstance(given, dict) else {}
    tags = {**(profile.get("tags") or {}), **(conf.get("tags") or {})}
    spot = (conf.get("spot_policy") or profile.get("spot_policy")) == "spot"
    backends = conf.get("backends") or profile.get("backends") or [None]
    regions = conf.get("regions") or profile.get("regions") or [None]
    gpus: list[tuple[str | None, int]] = list(_gpus((conf.get("resources") or {}).get("gpu")))
    candidates = tuple(
        Candidate(backend, name, count, spot, region)
        for backend in backends
        for region in regions
        for name, count in (gpus or [(None, 0)])
    )
    nodes = conf.get("nodes") or 1
    if not isinstance(nodes, int) or nodes < 1:
        raise Invalid("nodes must be a positive whole number")
    seconds = _seconds(conf.get("max_duration") or profile.get("max_duration"))
    return LaunchRequest(
        tool=TOOL,
        candidates=candidates,
        nodes=nodes,
        budget_ref=None if tags.get(BUDGET_LABEL) is None else str(tags[BUDGET_LABEL]),
        max_hours=None if seconds is None else Decimal(seconds) / 3600,
        user=request.user,
        project=request.project,
        name=request.spec.get("run_name") or conf.get("name"),
    )


def accepted(
    request: DstackRequest, tags: dict[str, str], env: Env, hours: Decimal, per_node: Decimal
) -> dict[str, Any]:
    """The answer that accepts: the run with the tags, the claim in its environment, and
    where it had none a maximum duration (the hours it was priced for) and a maximum price
    per instance-hour (what it was priced at: dstack then takes no dearer offer)."""
    conf = request.configuration
    conf["tags"] = {**(conf.get("tags") or {}), **tags}
    environment = conf.get("env") or {}
    if isinstance(environment, list):  # ["KEY=VALUE", ...]
        environment = dict(e.partition("=")[::2] for e in environment if isinstance(e, str))
    conf["env"] = {URL_ENV: env.url, **environment, CLAIM_ENV: env.claim}
    if conf.get("max_duration") in (None, "off") and conf.get("type") != "service":
        conf["max_duration"] = max(60, int(hours * 3600))
    if conf.get("max_price") is None and per_node > 0:
        conf["max_price"] = float(per_node)
    return {"spec": request.spec, "error": None}


def refused(request: DstackRequest, message: str) -> dict[str, Any]:
    return {"spec": request.spec, "error": message}


def unchanged(body: Any) -> dict[str, Any]:
    """A fleet, volume or gateway: passed through as it came (it runs no job)."""
    spec = body.get("spec") if isinstance(body, dict) else None
    if not isinstance(spec, dict):
        raise Invalid("not a dstack plugin request: want {user, project, spec}")
    return {"spec": spec, "error": None}


def _gpus(gpu: Any) -> list[tuple[str, int]]:
    """The GPU names and counts asked for: "H100:8", "A100,H100:2", or {name, count}."""
    if gpu is None:
        return []
    if isinstance(gpu, str):
        text, _, counted = gpu.rpartition(":") if ":" in gpu else (gpu, "", "1")
        if not text:
            text, counted = counted, "1"
        return [(n.strip(), _count(counted)) for n in text.split(",") if n.strip()]
    if isinstance(gpu, dict):
        named = gpu.get("name") or []
        names = [named] if isinstance(named, str) else [str(n) for n in named]
        count = _count(gpu.get("count", 1))
        if count == 0:
            return []
        return [(n, count) for n in names] or [("any GPU", count)]
    raise Invalid(f"not a GPU request: {gpu!r}")


def _count(value: Any) -> int:
    """A count or a range's upper end ({min, max}, "1..8"); the most it may take."""
    if isinstance(value, dict):
        value = value.get("max") if value.get("max") is not None else value.get("min", 1)
    text = str(value).split("..")[-1].strip() or "1"
    try:
        count = int(text)
    except ValueError:
        raise Invalid(f"not a GPU count: {value!r}") from None
    if not 0 <= count <= 1024:
        raise Invalid(f"not a GPU count: {value!r}")
    return count


def _seconds(value: Any) -> int | None:
    """dstack's max_duration: seconds, or "90m", "2h", "1d"; None for "off" or none."""
    if value is None or value == "off" or value is False:
        return None
    if isinstance(value, int):
        return value
    match = _DURATION.match(str(value))
    if match is None:
        raise Invalid(f"not a duration: {value!r}")
    return int(float(match.group(1)) * _UNIT_S[match.group(2)])
