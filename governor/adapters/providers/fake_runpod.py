"""A fake RunPod cloud speaking the GraphQL subset the RunPod adapter uses, over real HTTP.

POST /graphql with {"query", "variables"} and the key as `Authorization: Bearer` or
`?api_key=` (both forms the real API accepts). It answers the `pod` query and the `podStop`
mutation; `podTerminate` is honoured (the volume is lost) and recorded, as every mutation
is, so a test can prove it never came. Pods bill costPerHr for every second they run, by
this process's clock. POST /_fake/answers {"answers": [...]} makes the next calls answer
"429", "429:<retry-after s>", "500", "malformed", "slow:<s>" or "graphql:<error message>".
GET /_fake/state returns the state, which is also written to the --state file.

    python -m governor.adapters.providers.fake_runpod --port 8765 --state cloud.json \\
        --pods 'pod-1=3600' [--api-key KEY]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import threading
import time
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from governor.domain.money import charge

DEFAULT_API_KEY = "fake-runpod-key"
_MUTATION_FIELD = re.compile(r"\b(pod\w+)\s*\(")


def _now() -> datetime:
    return datetime.now(UTC)


@dataclass
class CloudPod:
    id: str
    cost_per_hr: str
    started_at: str
    desired_status: str = "RUNNING"
    stopped_at: str | None = None
    volume_in_gb: int = 20
    container_disk_in_gb: int = 50

    def bill_usd(self, now: datetime) -> Decimal:
        """costPerHr for every second it ran, by the cloud's own clock."""
        end = datetime.fromisoformat(self.stopped_at) if self.stopped_at else now
        seconds = (min(end, now) - datetime.fromisoformat(self.started_at)).total_seconds()
        return charge(Decimal(self.cost_per_hr), max(0.0, seconds))

    def graphql(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "desiredStatus": self.desired_status,
            "costPerHr": float(self.cost_per_hr),
            "volumeInGb": self.volume_in_gb if self.desired_status != "TERMINATED" else 0,
            "containerDiskInGb": self.container_disk_in_gb,
        }


@dataclass
class CloudState:
    pods: dict[str, CloudPod] = field(default_factory=dict)
    mutations: list[dict[str, str]] = field(default_factory=list)
    calls: int = 0

    @classmethod
    def load(cls, path: Path) -> CloudState:
        if not path.exists():
            return cls()
        raw = json.loads(path.read_text())
        pods = {ref: CloudPod(**pod) for ref, pod in raw["pods"].items()}
        return cls(pods=pods, mutations=raw["mutations"], calls=raw["calls"])

    def save(self, path: Path) -> None:
        tmp = path.with_suffix(path.suffix + ".tmp")
        tmp.write_text(json.dumps(asdict(self), indent=2))
        os.replace(tmp, path)

    def mutation_names(self) -> list[str]:
        return [m["name"] for m in self.mutations]


class FakeRunPod:
    """The cloud: pods, the canned answers still to give, and the request handling."""

    def __init__(self, state_file: Path, api_key: str = DEFAULT_API_KEY) -> None:
        self.state_file = state_file
        self.api_key = api_key
        self.state = CloudState.load(state_file)
        self.answers: list[str] = []
        self.lock = threading.Lock()

    def add_pod(self, ref: str, cost_per_hr: str) -> None:
        with self.lock:
            if ref not in self.state.pods:
                self.state.pods[ref] = CloudPod(ref, cost_per_hr, _now().isoformat())
            self.state.save(self.state_file)

    def authorized(self, headers: Any, query: str) -> bool:
        keys = parse_qs(query).get("api_key", [])
        bearer = headers.get("Authorization", "").removeprefix("Bearer ")
        return self.api_key in (bearer, *keys)

    def next_answer(self) -> str | None:
        with self.lock:
            self.state.calls += 1
            return self.answers.pop(0) if self.answers else None

    def execute(self, body: dict[str, Any]) -> dict[str, Any]:
        query, variables = str(body.get("query", "")), body.get("variables") or {}
        literal = re.search(r'podId:\s*"([^"]+)"', query)
        ref = str(variables.get("podId") or (literal.group(1) if literal else ""))
        with self.lock:
            try:
                if query.lstrip().startswith("mutation"):
                    return self._mutate(query, ref)
                pod = self.state.pods.get(ref)
                return {"data": {"pod": pod.graphql() if pod else None}}
            finally:
                self.state.save(self.state_file)

    def _mutate(self, query: str, ref: str) -> dict[str, Any]:
        name = (_MUTATION_FIELD.findall(query) or ["(unknown)"])[0]
        self.state.mutations.append({"name": name, "pod_id": ref, "at": _now().isoformat()})
        pod = self.state.pods.get(ref)
        if pod is None or pod.desired_status == "TERMINATED":
            return _errors(f"pod not found to {name.removeprefix('pod').lower()}")
        if name not in ("podStop", "podTerminate"):
            return _errors(f"{name} is not supported by the fake RunPod")
        if pod.desired_status == "RUNNING":
            pod.stopped_at = _now().isoformat()
        pod.desired_status = "EXITED" if name == "podStop" else "TERMINATED"
        return {"data": {name: pod.graphql() if name == "podStop" else None}}


def _errors(message: str) -> dict[str, Any]:
    return {"data": None, "errors": [{"message": message}]}


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_GET(self) -> None:
        cloud = self.server.cloud
        if urlsplit(self.path).path != "/_fake/state":
            return self._reply(404, {"error": "not found"})
        with cloud.lock:
            self._reply(200, asdict(cloud.state))

    def do_POST(self) -> None:
        cloud = self.server.cloud
        url = urlsplit(self.path)
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        if url.path == "/_fake/answers":
            with cloud.lock:
                cloud.answers.extend(body["answers"])
            return self._reply(204, None)
        if url.path != "/graphql":
            return self._reply(404, {"error": "not found"})
        if not cloud.authorized(self.headers, url.query):
            return self._reply(401, {"errors": [{"message": "Unauthorized"}]})
        self._answer(cloud.next_answer(), body)

    def _answer(self, canned: str | None, body: dict[str, Any]) -> None:
        kind, _, arg = (canned or "").partition(":")
        if kind == "429":
            return self._reply(429, {"errors": [{"message": "Too Many Requests"}]}, arg)
        if kind == "500":
            return self._reply(500, {"errors": [{"message": "Internal Server Error"}]})
        if kind == "malformed":
            return self._send(200, b"<html>502 Bad Gateway</html>", "text/html")
        if kind == "graphql":
            return self._reply(200, _errors(arg))
        if kind == "slow":
            time.sleep(float(arg))
        self._reply(200, self.server.cloud.execute(body))

    def _reply(self, status: int, payload: Any, retry_after: str = "") -> None:
        data = b"" if payload is None else json.dumps(payload).encode()
        self._send(status, data, "application/json", retry_after)

    def _send(self, status: int, data: bytes, kind: str, retry_after: str = "") -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        if retry_after:
            self.send_header("Retry-After", retry_after)
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: request lines would carry ?api_key= when a caller uses that form."""


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, port: int, cloud: FakeRunPod) -> None:
        super().__init__(("127.0.0.1", port), _Handler)
        self.cloud = cloud


def serve(cloud: FakeRunPod, port: int = 0) -> ThreadingHTTPServer:
    """A server for `cloud` bound on 127.0.0.1 (port 0: any free one); call serve_forever()."""
    return _Server(port, cloud)


def parse_pods(spec: str) -> dict[str, str]:
    """'pod-1=3600,pod-2=0.44' as {ref: costPerHr}."""
    pairs = (item.split("=", 1) for item in spec.split(",") if item.strip())
    return {ref.strip(): str(Decimal(rate)) for ref, rate in pairs}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="A fake RunPod GraphQL cloud for tests and demos.")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--state", type=Path, required=True)
    parser.add_argument("--pods", default="", help="ref=costPerHr,... running from the start")
    parser.add_argument("--api-key", default=DEFAULT_API_KEY)
    args = parser.parse_args(argv)
    cloud = FakeRunPod(args.state, args.api_key)
    for ref, rate in parse_pods(args.pods).items():
        cloud.add_pod(ref, rate)
    server = serve(cloud, args.port)
    print(f"fake RunPod listening on http://127.0.0.1:{server.server_port}/graphql", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
