"""A small pilot against a real server, shared by the metrics, report and CLI tests: a budget,
a fake pod billing $1 a second, a training job checking in, one GPU sample, a harness
failure reported by the job, an approved extension, then a manual stop the job acknowledges.

After the stop the pod bills nothing (no storage), so every money figure holds still and
can be compared exactly.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import httpx

from tests.e2e.conftest import (
    GovernorServer,
    SimulatedJob,
    create_run,
    declare_budget,
    http_client,
    ok,
    register_pod,
    utcnow,
    wait_for,
    wait_pod_stopped,
)

CEILING_USD = "100000"
EXTENSION_USD = "250"
GIB = 1024**3
GPU = {
    "uuid": "GPU-e2e-0",
    "index": 0,
    "name": "NVIDIA H100 80GB HBM3",
    "utilization_pct": 87.5,
    "memory_total_bytes": 80 * GIB,
    "memory_used_bytes": 60 * GIB,
    "memory_free_bytes": 20 * GIB,
    "power_w": 612.5,
    "temperature_c": 61.0,
}
FAILURE = "the dataloader worker died (harness), restarted from the last batch"


@dataclass
class Pilot:
    server: GovernorServer
    budget_id: str
    pod_id: str
    run_id: str
    job: SimulatedJob
    extension_id: str | None = None

    def start(self) -> Pilot:
        """The job is training and checking in, one GPU sample is in, a failure is reported."""
        self.job.__enter__()
        wait_for(lambda: len(self.job.replies) >= 3, "three heartbeats")
        with self.server.client() as client:
            reading = {"at": utcnow().isoformat(), "gpus": [GPU]}
            ok(client.post(f"/v1/pods/{self.pod_id}/telemetry", json={"readings": [reading]}), 202)
        with http_client(self.server.url, self.job.token) as job:
            body = {"category": "harness", "severity": "warning", "message": FAILURE}
            ok(job.post(f"/v1/runs/{self.run_id}/events", json=body), 201)
        return self

    def finish(self, client: httpx.Client) -> dict[str, Any]:
        """Extend by $250 (approved), stop the pod by hand; returns the stopped pod."""
        body = {"amount_usd": EXTENSION_USD, "reason": "one more evaluation pass"}
        ext = ok(client.post(f"/v1/budgets/{self.budget_id}/extensions", json=body), 201)
        self.extension_id = ext["id"]
        note = {"note": "approved for the eval"}
        ok(client.post(f"/v1/extensions/{self.extension_id}/approve", json=note))
        ok(client.post(f"/v1/pods/{self.pod_id}/stop", json={"reason": "pilot done"}), 202)
        pod = wait_pod_stopped(client, self.pod_id)
        self.job.join()
        return pod


def pilot(server: GovernorServer, client: httpx.Client) -> Pilot:
    budget = declare_budget(client, CEILING_USD)
    pod = register_pod(client, budget["id"])
    run = create_run(client, budget["id"], pod["id"], heartbeat_timeout_s=30)
    job = SimulatedJob(server.url, run, phase="training", interval_s=0.1)
    return Pilot(server, budget["id"], pod["id"], run["id"], job)
