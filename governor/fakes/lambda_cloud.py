"""A fake Lambda Cloud speaking the subset of its REST API the Lambda adapter uses, over
real HTTP.

Under /api/v1, with the key as `Authorization: Bearer` or as the Basic username (both forms
the real API accepts): GET /instances, GET /instances/{id}, GET /file-systems and
POST /instance-operations/terminate {"instance_ids": [...]}, answering only what Lambda's
OpenAPI document allows. Terminating moves an instance to `terminating` and,
`terminate_delay_s` later, to `terminated`; its root disk is lost and its filesystems stay.
Every terminate request is recorded, refused or not. Instances bill price_cents_per_hour
for every second until they are terminated, by this process's clock.
Errors come in Lambda's shape, {"error": {"code", "message", "suggestion"}}; besides the
canned answers every fake cloud has, "code:<status>:<code>" answers the next call with
that Lambda error and "body:<json>" answers HTTP 200 with exactly that body.

    python -m governor.fakes.lambda_cloud --port 8765 --state cloud.json \\
        --pods 'inst-1=1.29' [--api-key KEY]
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

from governor.fakes import http_cloud
from governor.fakes.http_cloud import FakeCloud, FakeRequest, Reply, bill, now

DEFAULT_API_KEY = "fake-lambda-key"
API = "/api/v1"
CODES = {
    400: "global/invalid-parameters",
    401: "global/invalid-api-key",
    403: "global/account-inactive",
    404: "global/object-does-not-exist",
    409: "global/conflict",
    429: "global/quota-exceeded",
    500: "global/internal-error",
    503: "global/internal-error",
}
SUGGESTIONS = {
    "global/invalid-api-key": "Check your API key or create a new one, then try again.",
    "global/account-inactive": "Make sure you have verified your email address and have a "
    "valid payment method. Contact Support if problems continue.",
    "global/internal-error": "Try again later. Contact Support if the problem persists.",
}


@dataclass
class CloudFilesystem:
    id: str
    name: str
    mount_point: str
    bytes_used: int | None  # Lambda's estimate, refreshed every few hours; may be absent
    region: str = "us-west-1"


@dataclass
class CloudInstance:
    id: str
    price_cents_per_hour: int
    started_at: str
    instance_type: str = "gpu_1x_h100_sxm5"
    status: str = "active"
    file_system_names: list[str] = field(default_factory=list)
    file_system_mounts: list[dict[str, str]] = field(default_factory=list)
    terminated_at: str | None = None  # when terminating becomes terminated, once asked
    name: str | None = None  # the instance's name (its id where none was given)
    tags: dict[str, str] = field(default_factory=dict)

    def bill_usd(self, now: datetime) -> Decimal:
        """price_cents_per_hour for every second until terminated, by the cloud's clock."""
        rate = Decimal(self.price_cents_per_hour) / 100
        return bill(rate, self.started_at, self.terminated_at, now)

    def settle(self, now: datetime) -> None:
        due = self.terminated_at and datetime.fromisoformat(self.terminated_at) <= now
        if self.status == "terminating" and due:
            self.status = "terminated"

    def api(self) -> dict[str, Any]:
        instance: dict[str, Any] = {
            "id": self.id,
            "name": self.name or self.id,
            "status": self.status,
            "ssh_key_names": ["governor"],
            "file_system_names": list(self.file_system_names),
            "region": {"name": "us-west-1", "description": "California, USA"},
            "instance_type": {
                "name": self.instance_type,
                "description": self.instance_type,
                "gpu_description": self.instance_type,
                "price_cents_per_hour": self.price_cents_per_hour,
                "specs": {"vcpus": 26, "memory_gib": 225, "storage_gib": 2780, "gpus": 1},
            },
            "hostname": f"{self.id}.fake",
            "jupyter_token": f"jupyter-token-{self.id}",  # a secret of its own
            "is_reserved": False,
            "tags": [{"key": key, "value": value} for key, value in self.tags.items()],
            "actions": {
                action: {"available": self.status in ("booting", "active", "unhealthy")}
                for action in ("migrate", "rebuild", "restart", "cold_reboot", "terminate")
            },
        }
        if self.file_system_mounts:  # Lambda leaves the list out when nothing is mounted
            instance["file_system_mounts"] = [dict(m) for m in self.file_system_mounts]
        return instance


@dataclass
class CloudState:
    instances: dict[str, CloudInstance] = field(default_factory=dict)
    filesystems: dict[str, CloudFilesystem] = field(default_factory=dict)  # by name
    terminate_calls: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def restore(cls, saved: dict[str, Any]) -> CloudState:
        return cls(
            instances={k: CloudInstance(**v) for k, v in saved.get("instances", {}).items()},
            filesystems={k: CloudFilesystem(**v) for k, v in saved.get("filesystems", {}).items()},
            terminate_calls=saved.get("terminate_calls", []),
        )


class FakeLambda(FakeCloud):
    """The cloud: its instances, its filesystems and the REST API it answers."""

    provider = "lambda"

    def __init__(
        self, state_file: Path, api_key: str = DEFAULT_API_KEY, *, terminate_delay_s: float = 0.0
    ) -> None:
        super().__init__(state_file, api_key)
        self.terminate_delay_s = terminate_delay_s
        self.state = CloudState.restore(self.saved)

    def add_pod(self, ref: str, hourly_rate_usd: str) -> None:
        """An active instance with the filesystem "ckpts" attached."""
        cents = Decimal(hourly_rate_usd) * 100
        if cents != cents.to_integral_value():
            raise ValueError(f"Lambda prices in whole cents per hour, not ${hourly_rate_usd}")
        self.add_instance(ref, int(cents), filesystems={"ckpts": None})

    def add_instance(
        self,
        ref: str,
        price_cents_per_hour: int,
        *,
        filesystems: dict[str, str | None] | None = None,
        status: str = "active",
        bytes_used: int = 40 * 2**30,
        name: str | None = None,
        tags: dict[str, str] | None = None,
    ) -> CloudInstance:
        """An instance billing from now, with `filesystems` ({name: mount point, None for
        Lambda's default}) attached; a filesystem not yet in the cloud is created."""
        with self.lock:
            instance = CloudInstance(
                ref,
                price_cents_per_hour,
                now().isoformat(),
                status=status,
                name=name,
                tags=dict(tags or {}),
            )
            for name, mount_point in (filesystems or {}).items():
                fs = self.state.filesystems.setdefault(
                    name,
                    CloudFilesystem(f"fs-{name}", name, f"/lambda/nfs/{name}", bytes_used),
                )
                instance.file_system_names.append(name)
                instance.file_system_mounts.append(
                    {"mount_point": mount_point or fs.mount_point, "file_system_id": fs.id}
                )
            self.state.instances.setdefault(ref, instance)
            self.save()
            return self.state.instances[ref]

    def authorized(self, request: FakeRequest) -> bool:
        header = request.headers.get("authorization", "")
        if header.startswith("Basic "):
            try:
                user = base64.b64decode(header.removeprefix("Basic ")).decode().partition(":")[0]
            except (binascii.Error, UnicodeDecodeError):
                return False
            return user == self.api_key
        return request.bearer() == self.api_key

    def error(self, status: int, message: str) -> Reply:
        return lambda_error(status, CODES.get(status, "global/unknown"), message)

    def canned(self, kind: str, arg: str) -> Reply | None:
        if kind == "body":
            return Reply(200, json.loads(arg))
        if kind != "code":
            return None
        status, _, code = arg.partition(":")
        return lambda_error(int(status), code, f"canned {code}")

    def snapshot(self) -> dict[str, Any]:
        return asdict(self.state)

    def handle(self, request: FakeRequest) -> Reply:
        at = now()
        for instance in self.state.instances.values():
            instance.settle(at)
        path = request.path.removeprefix(API) if request.path.startswith(f"{API}/") else ""
        if request.method == "GET" and path == "/instances":
            live = [i.api() for i in self.state.instances.values() if i.status != "terminated"]
            return Reply(200, {"data": live})
        if request.method == "GET" and path.startswith("/instances/"):
            asked = self.state.instances.get(path.removeprefix("/instances/"))
            if asked is None:
                return no_such_instance()
            return Reply(200, {"data": asked.api()})
        if request.method == "GET" and path == "/file-systems":
            listed = [self._filesystem(fs) for fs in self.state.filesystems.values()]
            return Reply(200, {"data": listed})
        if request.method == "POST" and path == "/instance-operations/terminate":
            return self._terminate(request.body, at)
        return lambda_error(404, "global/not-found", "The requested resource was not found.")

    def _filesystem(self, fs: CloudFilesystem) -> dict[str, Any]:
        in_use = any(
            fs.name in i.file_system_names and i.status != "terminated"
            for i in self.state.instances.values()
        )
        listed = {key: value for key, value in asdict(fs).items() if value is not None}
        return {  # Lambda leaves bytes_used out until it has estimated it
            **listed,
            "region": {"name": fs.region, "description": fs.region},
            "created": "2026-01-01T00:00:00Z",
            "created_by": {"id": "user-1", "email": "me@example.com", "status": "active"},
            "is_in_use": in_use,
        }

    def _terminate(self, body: Any, at: datetime) -> Reply:
        ids = body.get("instance_ids") if isinstance(body, dict) else None
        self.state.terminate_calls.append({"instance_ids": ids, "at": at.isoformat()})
        if not isinstance(ids, list) or not ids:
            return lambda_error(400, CODES[400], "instance_ids must be a non-empty list.")
        known = [self.state.instances.get(str(ref)) for ref in ids]
        # Lambda documents no conflict for a terminate: an instance already gone is one
        # that does not exist (404), one already terminating is listed as it is.
        if any(i is None or i.status in ("terminated", "preempted") for i in known):
            return no_such_instance()
        instances = [i for i in known if i is not None]
        for instance in instances:
            if instance.status == "terminating":
                continue
            instance.status = "terminating"
            instance.terminated_at = (at + timedelta(seconds=self.terminate_delay_s)).isoformat()
        return Reply(200, {"data": {"terminated_instances": [i.api() for i in instances]}})


def no_such_instance() -> Reply:
    return lambda_error(404, CODES[404], "Specified instance does not exist.")


def lambda_error(status: int, code: str, message: str) -> Reply:
    error = {"code": code, "message": message}
    if code in SUGGESTIONS:
        error["suggestion"] = SUGGESTIONS[code]
    return Reply(status, {"error": error})


def main(argv: list[str] | None = None) -> None:
    http_cloud.main(FakeLambda, DEFAULT_API_KEY, argv, path=API)


if __name__ == "__main__":
    main()
