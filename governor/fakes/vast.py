"""A fake Vast.ai cloud speaking the REST subset the Vast adapter uses, over real HTTP.

    GET    /api/v0/instances/{id}/?owner=me   {"instances": {...}}, null when there is none
    GET    /api/v1/instances/?limit=          {"instances": [...], "next_token": ...}, in pages
    PUT    /api/v0/instances/{id}/            {"state": "stopped"|"running"} -> {"success": true}
    DELETE /api/v0/instances/{id}/            destroys it, disk and all (recorded)
    GET    /api/v0/charges/?select_filters=   its charges, one per hour, in pages

The key goes as `Authorization: Bearer` or `?api_key=` (the real API takes both). An instance
bills `dph_base` for every second it holds its GPU and `storage_total_cost` ($/hr) for every
second it exists, by this cloud's clock; a stop takes `stop_delay_s` to finish, and a start
has the GPU again at once (Vast itself accepts a start whose GPU is rented out and leaves the
instance `scheduling`, so a start is never refused for capacity). Errors come in
Vast's shape, {"success": false, "error": code, "msg": ...}, and a 429 is Vast's plain text,
without Retry-After unless a canned "429:<s>" asks for one. Besides the canned answers every
fake cloud has: "refused:<code>" answers HTTP 200 with success false and that code,
"error:<status>:<code>" answers that status with {"error": code, "message": ...} (the shape
some endpoints use), "declined:<msg>" answers HTTP 200 with {"success": false, "msg": msg}
and no code (the shape others use) and "body:<json>" answers HTTP 200 with exactly that
body.

    python -m governor.fakes.vast --port 8766 --state cloud.json \\
        --pods '1001=0.44' [--api-key KEY]
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

from governor.domain.money import charge
from governor.fakes import http_cloud
from governor.fakes.http_cloud import FakeCloud, FakeRequest, Reply, now

DEFAULT_API_KEY = "fake-vast-key"
INSTANCE_PATH = re.compile(r"^/api/v0/instances/([^/]+)/$")
CODES = {400: "invalid_args", 401: "invalid_token", 402: "missing_billing", 404: "not_found"}
TOO_FREQUENT = "API requests too frequent endpoint threshold=1.0"
HOUR = timedelta(hours=1)
DISK_GB = 40.0
DISK_USD_PER_HOUR = "0.0082"  # about $0.15 per GB-month for DISK_GB


@dataclass
class CloudInstance:
    id: str
    dph_base: str  # $/hr while it holds its GPU
    started_at: str
    storage_total_cost: str = DISK_USD_PER_HOUR  # its disk, in every state until destroyed
    disk_space: float = DISK_GB
    intended_status: str = "running"
    stops_at: str | None = None  # when the GPU is let go, once a stop was asked
    destroyed_at: str | None = None
    label: str | None = None  # the one free-text label Vast keeps per instance (label_instance)
    gpu_name: str = "RTX 4090"
    num_gpus: int = 1
    resumed_at: str | None = None  # when the GPU was had again, after a stop
    earlier_runs: list[list[str]] = field(default_factory=list)  # [from, until] with the GPU

    def actual_status(self, at: datetime) -> str:
        stopped = self.stops_at is not None and at >= datetime.fromisoformat(self.stops_at)
        return "stopped" if stopped else "running"

    def vast(self, at: datetime) -> dict[str, Any]:
        """The instance as Vast shows it: numbers as JSON floats, times as unix seconds."""
        total = Decimal(self.dph_base) + Decimal(self.storage_total_cost)
        actual = self.actual_status(at)
        return {
            "id": int(self.id),
            "actual_status": actual,
            "intended_status": self.intended_status,
            "cur_state": actual,
            "dph_base": float(self.dph_base),
            "dph_total": float(total),
            "storage_total_cost": float(self.storage_total_cost),
            "disk_space": self.disk_space,
            "label": self.label,
            "gpu_name": self.gpu_name,
            "num_gpus": self.num_gpus,
            "start_date": datetime.fromisoformat(self.started_at).timestamp(),
        }

    def charges(self, at: datetime) -> list[dict[str, Any]]:
        """A GPU and a storage charge for every hour of its life, the last hour in progress."""
        start = datetime.fromisoformat(self.started_at)
        gone = datetime.fromisoformat(self.destroyed_at) if self.destroyed_at else at
        exists_until = min(at, gone)
        latest = [self.resumed_at or self.started_at, self.stops_at]
        runs: list[Sequence[str | None]] = [*self.earlier_runs, latest]
        records = []
        hour = start
        while hour < exists_until:
            end = min(hour + HOUR, exists_until)
            records.append(self._charge(hour, end, "storage", self.storage_total_cost))
            for run_from, run_until in runs:
                gpu_from = max(hour, datetime.fromisoformat(str(run_from)))
                gpu_until = min(end, datetime.fromisoformat(run_until)) if run_until else end
                if gpu_until > gpu_from:
                    records.append(self._charge(gpu_from, gpu_until, "gpu", self.dph_base))
            hour = end
        return records

    def start(self, at: datetime) -> None:
        """Running again: a stopped instance has its GPU back from `at`; a stopping one keeps
        it."""
        if self.stops_at is not None and at >= datetime.fromisoformat(self.stops_at):
            self.earlier_runs.append([self.resumed_at or self.started_at, self.stops_at])
            self.resumed_at = at.isoformat()
        self.intended_status, self.stops_at = "running", None

    def bill_usd(self, at: datetime) -> Decimal:
        return sum((Decimal(str(c["amount"])) for c in self.charges(at)), Decimal(0))

    def _charge(self, start: datetime, end: datetime, what: str, rate: str) -> dict[str, Any]:
        return {
            "start": start.timestamp(),
            "end": end.timestamp(),
            "type": "instance",
            "source": f"instance-{self.id}",
            "description": f"instance {self.id} {what}",
            "amount": float(charge(Decimal(rate), (end - start).total_seconds())),
            "metadata": {},
        }


@dataclass
class CloudState:
    instances: dict[str, CloudInstance] = field(default_factory=dict)
    stop_delay_s: float = 0.0

    @classmethod
    def restore(cls, saved: dict[str, Any]) -> CloudState:
        instances = {ref: CloudInstance(**i) for ref, i in saved.get("instances", {}).items()}
        return cls(instances, saved.get("stop_delay_s", 0.0))


class FakeVast(FakeCloud):
    """The cloud: its instances, its charges and the REST calls it answers."""

    provider = "vast"

    def __init__(self, state_file: Path, api_key: str = DEFAULT_API_KEY) -> None:
        super().__init__(state_file, api_key)
        self.state = CloudState.restore(self.saved)
        self.clock: Callable[[], datetime] = now
        # Vast's own maxima; tests lower them to see paging
        self.charges_page_limit = 500
        self.instances_page_limit = 25

    def add_pod(
        self,
        ref: str,
        hourly_rate_usd: str,
        *,
        started_at: datetime | None = None,
        storage_total_cost: str = DISK_USD_PER_HOUR,
        disk_space: float = DISK_GB,
        label: str | None = None,
    ) -> None:
        """A running instance whose GPU bills `hourly_rate_usd` (its dph_base)."""
        with self.lock:
            if ref not in self.state.instances:
                started = (started_at or self.clock()).isoformat()
                self.state.instances[ref] = CloudInstance(
                    ref, hourly_rate_usd, started, storage_total_cost, disk_space, label=label
                )
            self.save()

    def authorized(self, request: FakeRequest) -> bool:
        return self.api_key in (request.bearer(), request.param("api_key"))

    def error(self, status: int, message: str) -> Reply:
        code = CODES.get(status, "server_error" if status >= 500 else "invalid_request")
        return Reply(status, {"success": False, "error": code, "msg": message})

    def rate_limited(self, retry_after: str) -> Reply:
        headers = {"Retry-After": retry_after} if retry_after else {}
        return Reply(429, text=TOO_FREQUENT, content_type="text/plain", headers=headers)

    def canned(self, kind: str, arg: str) -> Reply | None:
        if kind == "refused":
            return Reply(200, {"success": False, "error": arg, "msg": f"canned {arg}"})
        if kind == "error":
            status, _, code = arg.partition(":")
            return Reply(int(status), {"error": code, "message": f"canned {code}"})
        if kind == "declined":
            return Reply(200, {"success": False, "msg": arg})
        if kind == "body":
            return Reply(200, json.loads(arg))
        return None

    def snapshot(self) -> dict[str, Any]:
        return asdict(self.state)

    def live(self, ref: str) -> CloudInstance | None:
        instance = self.state.instances.get(ref)
        return None if instance is None or instance.destroyed_at else instance

    def handle(self, request: FakeRequest) -> Reply:
        at = self.clock()
        if request.path == "/api/v0/charges/" and request.method == "GET":
            return self._charges(request, at)
        if request.path == "/api/v1/instances/" and request.method == "GET":
            return self._instances(request, at)
        match = INSTANCE_PATH.match(request.path)
        if match is None or request.method not in ("GET", "PUT", "DELETE"):
            return Reply(404, text="<html><body>Not Found</body></html>", content_type="text/html")
        ref = match.group(1)
        if not ref.isdigit():
            return self.error(400, f"{ref!r} is not an instance id")
        instance = self.live(ref)
        if request.method == "GET":
            return Reply(200, {"instances": instance.vast(at) if instance else None})
        if instance is None:
            return Reply(404, {"success": False, "error": "no_such_instance", "msg": "no such id"})
        if request.method == "DELETE":
            instance.destroyed_at = at.isoformat()
            return Reply(200, {"success": True})
        body = request.body if isinstance(request.body, dict) else {}
        if body.get("state") == "running":
            instance.start(at)
        elif body.get("state") != "stopped":
            return self.error(400, "state must be 'stopped' or 'running'")
        elif instance.stops_at is None:
            instance.intended_status = "stopped"
            instance.stops_at = (at + timedelta(seconds=self.state.stop_delay_s)).isoformat()
        return Reply(200, {"success": True})

    def _charges(self, request: FakeRequest, at: datetime) -> Reply:
        try:
            filters = json.loads(request.param("select_filters") or "{}")
            gte, lte = float(filters["day"]["gte"]), float(filters["day"]["lte"])
            types = filters.get("type", {}).get("in", ["instance"])
            offset, limit = _cursor(request, self.charges_page_limit)
        except (ValueError, KeyError, TypeError, AttributeError):
            msg = "Must provide both 'day' gte and lte filters for instance charges"
            return self.error(400, msg)
        records = [
            c
            for i in self.state.instances.values()
            for c in i.charges(at)
            if "instance" in types and c["start"] <= lte and c["end"] >= gte
        ]
        records.sort(key=lambda c: (-c["start"], c["source"], c["description"]))
        sources = len({c["source"] for c in records})
        page, token = _page(records, offset, limit)
        return Reply(
            200,
            {
                "success": True,
                "count": sources,
                "total": sources,
                "results": page,
                "next_token": token,
            },
        )

    def _instances(self, request: FakeRequest, at: datetime) -> Reply:
        """The account's instances that are not destroyed, stopped ones included."""
        try:
            offset, limit = _cursor(request, self.instances_page_limit)
        except (ValueError, KeyError, TypeError):
            return self.error(400, "invalid after_token or limit")
        live = sorted((i for i in self.state.instances.values() if not i.destroyed_at), key=_id)
        page, token = _page([i.vast(at) for i in live], offset, limit)
        return Reply(
            200,
            {
                "success": True,
                "instances_found": len(page),
                "total_instances": len(live),
                "instances": page,
                "next_token": token,
            },
        )


def _id(instance: CloudInstance) -> int:
    return int(instance.id)


def _cursor(request: FakeRequest, most: int) -> tuple[int, int]:
    """Where the page a request asks for starts (its after_token) and how long it is."""
    token = request.param("after_token")
    offset = int(json.loads(base64.b64decode(token))["offset"]) if token else 0
    return offset, min(int(request.param("limit") or 100), most)


def _page(items: list[Any], offset: int, limit: int) -> tuple[list[Any], str | None]:
    """The page of `items` from `offset` and its next_token: an opaque keyset cursor, base64
    JSON as Vast's are, or None on the last page."""
    end = offset + limit
    if end >= len(items):
        return items[offset:], None
    return items[offset:end], base64.b64encode(json.dumps({"offset": end}).encode()).decode()


def main(argv: list[str] | None = None) -> None:
    http_cloud.main(FakeVast, DEFAULT_API_KEY, argv)


if __name__ == "__main__":
    main()
