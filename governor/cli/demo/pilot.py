"""`governor demo`: a simulated pilot nears its ceiling, saves, and stops with its workspace kept.

Everything is real except the cloud: the server, its SQLite database, the scheduler and the
HTTP API. The budget requires a plan, so the demo checks one (plan.py beside this) before it
registers the pod under it. The pod belongs to the fake provider and bills $18,000/h, so a $100
ceiling arrives in seconds; the training job is a thread that checks in over HTTP like a real
one would.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import socket
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx

from governor.app import create_app
from governor.bootstrap import bootstrap_operator, build_context, prepare_database
from governor.cli.demo import plan as demo_plan
from governor.cli.http import connect
from governor.cli.in_thread import in_thread
from governor.cli.output import refused, usd
from governor.db.schema import MigrationsMissing
from governor.domain.model import PodState
from governor.domain.money import dollars, dollars_per_hour
from governor.fakes.cloud import FakeProvider
from governor.settings import load_settings

HOST = "127.0.0.1"
RATE_USD_PER_HOUR = Decimal(18000)
CEILING_USD = "100.00"
POD_REF = "demo-pod-1"
TOTAL_STEPS = 400
STEPS_PER_BEAT = 4
HEARTBEAT_S = 0.3
SPEND_EVERY_S = 2.0
GIVE_UP_AFTER_S = 60.0
TIMEOUT_S = 10.0  # how long one of the pilot's or the job's calls may take
DEMO = "governor demo"


def say(line: str = "") -> None:
    print(line, flush=True)


def run_demo(port: int, keep_serving: bool) -> int:
    """Run the demo on `port`; 0 when the pod ended stopped, workspace kept, within the ceiling."""
    try:
        listener = socket.create_server((HOST, port))
    except OSError as exc:
        why = os.strerror(exc.errno) if exc.errno else str(exc)
        return refused(
            f"cannot listen on {HOST}:{port} ({why}); is 'governor serve' (make serve) running "
            f"there? Give the demo another port: --port {port + 1} (make demo PORT={port + 1}).",
            DEMO,
        )
    # Keep the terminal readable: no request logs, and the narration already prints events.
    logging.getLogger().setLevel(max(logging.getLogger().level, logging.WARNING))
    logging.getLogger("governor.events").disabled = True

    home = Path(tempfile.mkdtemp(prefix="governor-demo-"))
    token = "gov_op_demo_" + secrets.token_urlsafe(24)
    settings = load_settings(
        database_url=f"sqlite:///{home / 'governor.db'}",
        operator_token=token,
        enforce_interval_s=0.5,
        scheduler_enabled=True,
        fake_hourly_rate_usd=RATE_USD_PER_HOUR,
        fake_stop_latency_s=1.0,
        fake_stop_failures=0,
        fake_state_file=None,
        log_level="warning",
    )
    try:
        prepare_database(settings)
    except MigrationsMissing as exc:  # an install without the migrations/ folder
        listener.close()
        return refused(str(exc), DEMO)
    ctx = build_context(settings)
    bootstrap_operator(ctx, settings)
    fake = ctx.providers["fake"]
    assert isinstance(fake, FakeProvider)

    served = in_thread(create_app(settings, ctx), listener)
    halt = threading.Event()
    url = f"http://{HOST}:{port}"
    code = 130  # what an interruption before the end leaves
    try:
        if not served.start():
            print("governor demo: the server did not start (see the log above).", file=sys.stderr)
            return 1
        code = 0 if _pilot(url, token, fake, home, halt) else 1
        if keep_serving:
            say(f"\nThe server is still up at {url}: the dashboard at {url}/status, API docs at")
            say(f"{url}/docs; the curl commands above still work. Press Ctrl-C to stop.")
            while served.serving:
                served.thread.join(0.5)
    except KeyboardInterrupt:
        say("\nStopping.")
    finally:
        halt.set()
        served.stop()
        listener.close()
        ctx.engine.dispose()
    return code


def _pilot(url: str, token: str, fake: FakeProvider, home: Path, halt: threading.Event) -> bool:
    """Declare, register, start the job, narrate until the pod is stopped, then sum up."""
    started = time.time()
    with connect(url, token, timeout_s=TIMEOUT_S) as api:
        budget = _call(
            api,
            "POST",
            "/v1/budgets",
            {
                "name": "demo pilot",
                "ceiling_usd": CEILING_USD,
                "require_plan": True,
                "note": "governor demo: a simulated pod on the fake provider",
            },
        )
        today = datetime.now(UTC).date()
        plan = _call(
            api,
            "POST",
            f"/v1/budgets/{budget['id']}/plans",
            demo_plan.plan("demo-fine-tune", RATE_USD_PER_HOUR, today),
        )
        pod = _call(
            api,
            "POST",
            f"/v1/budgets/{budget['id']}/pods",
            {
                "provider": "fake",
                "provider_ref": POD_REF,
                "gpu_type": "H100",
                "gpu_count": 1,
                "plan_id": plan["id"],
            },
        )
        run = _call(
            api,
            "POST",
            f"/v1/budgets/{budget['id']}/runs",
            {
                "name": "demo fine-tune",
                "pod_id": pod["id"],
                "total_steps": TOTAL_STEPS,
                "heartbeat_timeout_s": 10,
                "checkpoint_grace_s": 2,
            },
        )
        _header(url, token, budget, plan, pod)
        workspace = home / "workspace"
        workspace.mkdir()
        job = threading.Thread(
            target=_job, args=(url, run["id"], run["token"], workspace, halt), daemon=True
        )
        job.start()
        pod = _watch(api, budget["id"], pod["id"], started)
        budget = _call(api, "GET", f"/v1/budgets/{budget['id']}")
    return _summary(budget, pod, fake, home, time.time() - started)


def _header(
    url: str, token: str, budget: dict[str, Any], plan: dict[str, Any], pod: dict[str, Any]
) -> None:
    rate = Decimal(pod["hourly_rate_usd"])
    auth = '-H "Authorization: Bearer $TOKEN"'
    say(f"gpu-governor demo: a real governor server at {url}, with a simulated cloud.")
    say(f"  dashboard       {url}/status (sign in with the operator token)")
    say(f"  API docs        {url}/docs")
    say(f"  operator token  {token}")
    say("  look for yourself while it runs, from another terminal:")
    say(f"    TOKEN={token}")
    say(f"    curl -s {auth} {url}/v1/budgets/{budget['id']}")
    say(f"    curl -s {auth} {url}/v1/pods/{pod['id']}")
    say(f'    curl -s {auth} "{url}/v1/events?limit=20"')
    say()
    say(f"Budget  a hard ceiling of {usd(budget['ceiling_usd'])}; no pod without a plan")
    say(
        f"Plan    {plan['job_id']}: {plan['verdict']}, worst case "
        f"{usd(plan['cost']['worst_case_usd'])} ({plan['id']})"
    )
    for reason in plan["reasons"]:
        say(f"          {reason['verdict']:<6} {reason['message']}")
    say(
        f"Pod     one simulated {pod['gpu_type']} at {dollars_per_hour(rate)} "
        f"({dollars(rate / 3600)} a second)"
    )
    say(f"Job     a {TOTAL_STEPS}-step training run that checks in every {HEARTBEAT_S:g} s")
    say(
        "The job cannot finish within the ceiling. The governor will ask it to save, then stop\n"
        "the pod, keeping its workspace, once the committed spend (spent so far plus what saving\n"
        "and stopping will still cost) reaches the ceiling."
    )
    say()


def _watch(api: httpx.Client, budget_id: str, pod_id: str, started: float) -> dict[str, Any]:
    """Print new events, and the meter every few seconds, until the pod is stopped."""
    seen, next_meter = 0, started
    while True:
        events = _call(api, "GET", "/v1/events", params={"limit": 100})["items"]
        pod = _call(api, "GET", f"/v1/pods/{pod_id}")
        budget = (
            _call(api, "GET", f"/v1/budgets/{budget_id}") if time.time() >= next_meter else None
        )
        for event in sorted(events, key=lambda e: e["id"]):
            if event["id"] > seen:
                at = datetime.fromisoformat(event["at"])
                say(f"{_stamp(at, started)}  {event['severity'].upper():<8}  {event['message']}")
                seen = event["id"]
        if pod["state"] == "stopped" or time.time() - started > GIVE_UP_AFTER_S:
            return pod
        if budget is not None:
            say(
                f"{_stamp(datetime.now(UTC), started)}  meter     committed "
                f"{usd(budget['committed_usd'])} of {usd(budget['effective_ceiling_usd'])} = "
                f"spent {usd(budget['spent_usd'])} + shutdown {usd(budget['shutdown_usd'])} + "
                f"storage tail {usd(budget['storage_tail_usd'])} + reserve "
                f"{usd(budget['reserve_usd'])}  (pod {pod['state']})"
            )
            next_meter = time.time() + SPEND_EVERY_S
        time.sleep(0.2)


def _stamp(at: datetime, started: float) -> str:
    return f"{at.astimezone():%H:%M:%S} {at.timestamp() - started:+5.1f}s"


def _job(url: str, run_id: str, token: str, workspace: Path, halt: threading.Event) -> None:
    """A training job: advance, check in, save when asked, save and acknowledge when stopped."""
    step, checkpoint = 0, None
    path = f"/v1/runs/{run_id}/heartbeat"
    try:
        with connect(url, token, timeout_s=TIMEOUT_S) as api:
            while not halt.is_set():
                beat = {"step": step, "total_steps": TOTAL_STEPS, "phase": "training"}
                directive = _call(api, "POST", path, {**beat, "checkpoint": checkpoint})
                checkpoint = None
                if directive["action"] == "checkpoint":
                    checkpoint = _save(workspace, step)  # reported with the next heartbeat
                elif directive["action"] == "stop":
                    saved = _save(workspace, step)
                    _call(api, "POST", path, {**beat, "status": "stopping", "checkpoint": saved})
                    return
                step = min(step + STEPS_PER_BEAT, TOTAL_STEPS)
                halt.wait(HEARTBEAT_S)
    except httpx.HTTPError as exc:
        if not halt.is_set():
            print(f"governor demo: the simulated job lost the governor ({exc})", file=sys.stderr)


def _save(workspace: Path, step: int) -> dict[str, Any]:
    """Write a (tiny, but real) checkpoint file and say where it is."""
    file = workspace / f"adapter-step-{step:04d}.json"
    file.write_text(json.dumps({"step": step, "saved_at": datetime.now().astimezone().isoformat()}))
    return {"step": step, "path": str(file)}


def _summary(
    budget: dict[str, Any], pod: dict[str, Any], fake: FakeProvider, home: Path, took: float
) -> bool:
    spent, ceiling = Decimal(budget["spent_usd"]), Decimal(budget["effective_ceiling_usd"])
    order = pod["stop_order"] or {}
    ack = order.get("ack_checkpoint") or {}
    kept = fake.describe(POD_REF).state is PodState.STOPPED  # stopped, not gone
    ok = pod["state"] == "stopped" and spent <= ceiling and kept
    say()
    say(f"Result after {took:.0f} s: {'OK' if ok else 'NOT OK'}")
    say(
        f"  spend        {dollars(spent)} of the {dollars(ceiling)} "
        f"ceiling ({'within' if spent <= ceiling else 'OVER'} it); budget {budget['state']}"
    )
    say(f"  pod          {pod['state']}; workspace kept: {'yes' if kept else 'NO'}")
    say(
        f"  stop order   {order.get('state', 'none')} (reason {order.get('reason', '-')}); "
        f"the job acknowledged with step {ack.get('step', '-')}"
    )
    say(f"  checkpoint   {ack.get('path', 'none acknowledged')}")
    say("  stop         the provider's stop that keeps the volume (it cannot terminate)")
    say(f"  files        {home} (the SQLite database and workspace/); delete it when done")
    return ok


def _call(
    api: httpx.Client,
    method: str,
    path: str,
    body: dict[str, Any] | None = None,
    params: dict[str, Any] | None = None,
) -> Any:
    response = api.request(method, path, json=body, params=params)
    response.raise_for_status()
    return response.json()
