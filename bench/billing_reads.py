"""What reading the bills of a fleet's pods costs: the account at once against a call per pod.

The billing task asks each provider that says what it billed about every pod whose bill may
still change, every billing interval. This script points the real RunPod and Vast.ai adapters,
over HTTP, at the project's fake clouds holding --pods pods that have run for --hours hours,
and reads all their bills twice in the same run: once a pod at a time (`billed([ref])` for each,
how the billing task read them before: the baseline) and once for the whole account
(`billed(refs)`). For each it prints the requests sent, the bytes received and the seconds
taken, and the ratios. The fake clouds do work of their own on every request (they record it
and save their state), so the seconds overstate a real provider's; the requests are what a
provider's rate limit counts.

    .venv/bin/python bench/billing_reads.py --pods 10,100,1000
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx

from governor.adapters.providers.runpod import RunPodProvider
from governor.adapters.providers.vast import VastProvider
from governor.domain.ports import Billed
from governor.fakes.http_cloud import FakeCloud, running
from governor.fakes.runpod import FakeRunPod
from governor.fakes.vast import FakeVast

KEY = "bench-key"
TIMEOUT_S = 60.0


@dataclass
class Traffic:
    """What a client sent and received."""

    requests: int = 0
    received_bytes: int = 0

    def count(self, response: httpx.Response) -> None:
        response.read()
        self.requests += 1
        self.received_bytes += len(response.content)


def fleet(
    provider: str, pods: int, hours: float, folder: Path
) -> tuple[FakeCloud, dict[str, datetime]]:
    """A fake cloud of `provider` with `pods` pods started (and registered) `hours` ago; the
    refs, each with its registration."""
    started = datetime.now(UTC) - timedelta(hours=hours)
    refs = [str(1000 + i) for i in range(pods)]
    if provider == "vast":
        vast = FakeVast(folder / f"vast-{pods}.json", KEY)
        for ref in refs:
            vast.add_pod(ref, "0.44", started_at=started)
        return vast, dict.fromkeys(refs, started)
    runpod = FakeRunPod(folder / f"runpod-{pods}.json", KEY)
    for ref in refs:
        runpod.add_pod(ref, "0.44")
        runpod.state.pods[ref].started_at = started.isoformat()
    return runpod, dict.fromkeys(refs, started)


def adapter(provider: str, client: httpx.Client, url: str) -> VastProvider | RunPodProvider:
    if provider == "vast":
        return VastProvider(client, KEY, url)
    return RunPodProvider(client, KEY, f"{url}/graphql")


def read(
    provider: str, url: str, refs: dict[str, datetime], at_once: bool
) -> tuple[Traffic, float]:
    """The requests, bytes and seconds of reading every ref's bill, at once or one by one."""
    traffic = Traffic()
    with httpx.Client(timeout=TIMEOUT_S, event_hooks={"response": [traffic.count]}) as client:
        reader = adapter(provider, client, url)
        start = time.perf_counter()
        bills = reader.billed(refs) if at_once else one_by_one(reader, refs)
        elapsed = time.perf_counter() - start
    assert sorted(bills) == sorted(refs) and all(b.amount_usd > 0 for b in bills.values())
    return traffic, elapsed


def one_by_one(
    reader: VastProvider | RunPodProvider, refs: dict[str, datetime]
) -> dict[str, Billed]:
    return {ref: reader.billed({ref: since})[ref] for ref, since in refs.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", default="10,100,1000", help="fleet sizes (default 10,100,1000)")
    parser.add_argument(
        "--hours", type=float, default=3.0, help="how long the pods have run (default 3)"
    )
    parser.add_argument(
        "--providers", default="runpod,vast", help="adapters to read with (default runpod,vast)"
    )
    parser.add_argument("--quick", action="store_true", help="3 and 12 pods, 2 h: seconds")
    args = parser.parse_args(argv)
    if args.quick:
        args.pods, args.hours = "3,12", 2.0
    sizes = [int(n) for n in args.pods.split(",")]
    providers = args.providers.split(",")
    lines = []
    with tempfile.TemporaryDirectory(prefix="gov-bench-billing-") as folder:
        for provider in providers:
            for pods in sizes:
                cloud, refs = fleet(provider, pods, args.hours, Path(folder))
                with running(cloud) as server:
                    url = server.url
                    per_pod, per_pod_s = read(provider, url, refs, at_once=False)
                    account, account_s = read(provider, url, refs, at_once=True)
                record = {
                    "bench": "billing_reads",
                    "provider": provider,
                    "pods": pods,
                    "hours": args.hours,
                    "per_pod_requests": per_pod.requests,
                    "per_pod_bytes": per_pod.received_bytes,
                    "per_pod_s": round(per_pod_s, 4),
                    "account_requests": account.requests,
                    "account_bytes": account.received_bytes,
                    "account_s": round(account_s, 4),
                    "requests_ratio": round(account.requests / per_pod.requests, 5),
                    "seconds_ratio": round(account_s / per_pod_s, 5),
                }
                print(json.dumps(record), flush=True)
                lines.append(
                    f"  {provider:7} {pods:6} pods: per pod {per_pod.requests:6} requests "
                    f"{per_pod.received_bytes / 1e6:8.2f} MB {per_pod_s:8.2f} s | account "
                    f"{account.requests:4} requests {account.received_bytes / 1e6:8.2f} MB "
                    f"{account_s:7.3f} s | seconds x{account_s / per_pod_s:.3f}"
                )
    print(f"Reading the bills of pods that ran {args.hours} h, over HTTP from the fake clouds:")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
