"""GPU telemetry end to end: fake NVML driver -> `governor agent` -> `governor serve` -> policy.

Every scenario goes the real way: a scripted fake NVML driver under a real `governor agent`
process, its readings over real HTTP to a real `governor serve` process, the policy's verdict
recorded as events and stop orders and handed to the job on its next heartbeat.

Thresholds are the run's own (seconds, in its `policy`); the server enforces every 0.2 s and
the agent polls every 0.3 s. The ceiling is far away, so it is never the reason. Each timing
assertion has two sides: a lower bound the policy must never undercut, measured from the
server's own stored samples and times (exact, no slack), and an upper bound of one window plus
one enforcement interval, plus one agent poll or two, plus generous slack for a loaded
2-core machine.

To keep the runtime modest, the deadlock (the whole path, peaks included) and the cheap
scenarios (no NVML, local sampling, a wrong agent token, an OOM report) run on SQLite and
PostgreSQL; the other slow ones (compile stall, near-OOM, lost GPU, agent backlog) on SQLite.
"""

from __future__ import annotations

import ctypes
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from itertools import pairwise
from typing import Any

import httpx
import pytest

from governor.fakes.nvml import GIB, H100, uuid_for
from tests.e2e.conftest import (
    AgentFactory,
    GovernorServer,
    ServerFactory,
    SimulatedJob,
    agent_token,
    budget_events,
    create_run,
    declare_budget,
    get_pod,
    gpu_samples,
    http_client,
    idle_from,
    ok,
    parse_time,
    register_pod,
    utcnow,
    wait_for,
    wait_pod_stopped,
)

pytestmark = pytest.mark.e2e

ENFORCE_S = 0.2  # the server's enforcement interval
AGENT_S = 0.3  # the agent's poll interval
SLACK_S = 6.0  # a loaded 2-core machine: process starts, SQLite commits, three busy processes
FAR_CEILING = "1000000.00"  # at $1 a second, days away: never the reason for anything here
TELEMETRY_ENV = {"GOVERNOR_ENFORCE_INTERVAL_S": str(ENFORCE_S)}
STOP_TIMEOUT_S = 60.0

sqlite_only = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)


# --- helpers ---------------------------------------------------------------------------


def seconds(delta: timedelta) -> float:
    return delta.total_seconds()


def later(at: datetime, s: float) -> datetime:
    return at + timedelta(seconds=s)


def by_rule(events: list[dict[str, Any]], rule: str) -> list[dict[str, Any]]:
    return [e for e in events if e["evidence"].get("rule") == rule]


def replies_with_times(job: SimulatedJob) -> list[tuple[datetime, dict[str, Any]]]:
    return list(zip(job.replied_at, job.replies, strict=True))


def first_stop_heard(job: SimulatedJob) -> tuple[datetime, dict[str, Any]]:
    heard = [(at, r) for at, r in replies_with_times(job) if r["action"] == "stop"]
    assert heard, f"the job never heard stop: {job.replies[-5:]}"
    return heard[0]


def assert_told_stop_on_next_heartbeat(
    job: SimulatedJob, ordered_at: datetime, reason: str
) -> None:
    """Every reply before the order said continue; the first one after it said stop."""
    assert job.errors == []
    before = [r for at, r in replies_with_times(job) if at < ordered_at]
    assert before, "the job never checked in before the stop"
    assert all(r["action"] == "continue" for r in before), [r["action"] for r in before]
    heard_at, stop = first_stop_heard(job)
    assert stop["reason"] == reason, stop
    assert stop["deadline"] is not None
    assert heard_at >= ordered_at
    assert seconds(heard_at - ordered_at) <= job.interval_s + SLACK_S, (
        f"the job heard stop {seconds(heard_at - ordered_at):.2f} s after it was ordered"
    )
    assert job.ack_reply is not None and job.ack_reply["action"] == "stop"


def assert_stopped_keeping_the_volume(server: GovernorServer, pod: dict[str, Any]) -> None:
    assert pod["state"] == "stopped"
    assert server.cloud().pods[pod["provider_ref"]].stopped_at is not None


def telemetry_of(client: httpx.Client, pod_id: str) -> dict[str, Any]:
    telemetry: dict[str, Any] = get_pod(client, pod_id)["telemetry"]
    return telemetry


def latest_at(client: httpx.Client, pod_id: str, uuid: str) -> datetime | None:
    for gpu in telemetry_of(client, pod_id)["gpus"]:
        if gpu["uuid"] == uuid:
            return parse_time(gpu["at"])
    return None


def machine_has_nvml() -> bool:
    """Whether this machine has an NVIDIA driver library (pynvml loads libnvidia-ml.so.1)."""
    try:
        ctypes.CDLL("libnvidia-ml.so.1")
    except OSError:
        return False
    return True


def start_pilot(
    operator: httpx.Client, policy: dict[str, float] | None = None
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any], str]:
    """A far ceiling, one fake pod, a run on it with `policy`, and an agent token for the pod.

    The run must check in every 10 s (its job beats every 0.2 s) and gets 1 s to save.
    """
    budget, pod, token = start_pod(operator)
    run = create_run(
        operator,
        budget["id"],
        pod["id"],
        heartbeat_timeout_s=10,
        checkpoint_grace_s=1,
        policy=policy,
    )
    return budget, pod, run, token


def start_pod(operator: httpx.Client) -> tuple[dict[str, Any], dict[str, Any], str]:
    """A far ceiling, one fake pod with no run on it, and an agent token for the pod."""
    budget = declare_budget(operator, FAR_CEILING)
    pod = register_pod(operator, budget["id"], "pod-1")
    return budget, pod, agent_token(operator, pod["id"])


def wait_for_event(
    client: httpx.Client,
    budget_id: str,
    match: Callable[[dict[str, Any]], bool],
    what: str,
    timeout_s: float = STOP_TIMEOUT_S,
) -> dict[str, Any]:
    def found() -> dict[str, Any] | None:
        return next((e for e in budget_events(client, budget_id) if match(e)), None)

    return wait_for(found, what, timeout_s, interval_s=0.1)


# --- 1. a deadlock after training: warned, then stopped for idle-hang --------------------

TRAIN_S = 3.0
IDLE_WINDOW_S = 3.0  # its warning comes at half: 1.5 s for a pass to land in, however loaded


def test_deadlock_is_warned_then_stopped_for_idle_hang_keeping_the_training_peak(
    start_server: ServerFactory, spawn_agent: AgentFactory, database_url: str
) -> None:
    server = start_server(**TELEMETRY_ENV)
    policy = {"idle_window_s": IDLE_WINDOW_S, "stall_window_s": 600}  # the idle rule, alone
    with server.client() as operator:
        budget, pod, run, token = start_pilot(operator, policy)
        assert ok(operator.get(f"/v1/runs/{run['id']}"))["policy"]["idle_window_s"] == IDLE_WINDOW_S
        with SimulatedJob(server.url, run, phase="training", max_s=90) as job:
            agent = spawn_agent(
                server.url,
                pod["id"],
                token,
                interval_s=AGENT_S,
                fake_nvml=f"deadlock:train_s={TRAIN_S:g}",
            )
            first = wait_for(
                lambda: gpu_samples(database_url, pod["id"]), "the agent's first reading", 60
            )[0]
            # The fake's clock starts just before the agent's first reading: training ends
            # TRAIN_S later, and then the job, hung, keeps checking in without a new step.
            training_ends = later(first.at, TRAIN_S)
            job.steps_until = training_ends
            stopped = wait_pod_stopped(operator, pod["id"], STOP_TIMEOUT_S)
            job.join()
        assert agent.alive, agent.tail()
        samples = gpu_samples(database_url, pod["id"])
        events = budget_events(operator, budget["id"])
        run_now = ok(operator.get(f"/v1/runs/{run['id']}"))

    order = stopped["stop_order"]
    assert order["reason"] == "idle-hang"
    assert order["state"] == "stopped"
    ordered_at = parse_time(order["created_at"])

    # A warning first, then the stop; nothing else about idleness.
    hung = by_rule(events, "idle_hang")
    assert [e["severity"] for e in hung] == ["warning", "critical"], hung
    warning, stop = hung
    assert "may be hung" in warning["message"]
    assert warning["category"] == "telemetry"
    assert stop["message"].startswith("Stop ordered (idle-hang)")
    assert stop["evidence"]["stop_order"] == order["id"]
    assert stop["evidence"]["held_gib"] == 19.5
    assert stop["evidence"]["idle_s"] >= IDLE_WINDOW_S
    assert by_rule(events, "stalled") == []

    # Never early: half a window to the warning and a full one to the stop, counted from the
    # first idle sample the server holds. Not late: one window and one pass after training
    # ended on the fake's timeline (+ up to two polls to see it, + slack).
    idle_since = idle_from(samples, ordered_at)
    # (training_ends is a little late: the agent reads first a moment after the fake starts)
    assert idle_since >= later(training_ends, -1.0)
    warned_at = parse_time(warning["at"])
    assert warned_at >= later(idle_since, IDLE_WINDOW_S / 2)
    assert warned_at < ordered_at
    assert ordered_at >= later(idle_since, IDLE_WINDOW_S)
    took = seconds(ordered_at - training_ends)
    assert took <= IDLE_WINDOW_S + ENFORCE_S + 2 * AGENT_S + SLACK_S, f"stopped {took:.2f} s late"

    assert_told_stop_on_next_heartbeat(job, ordered_at, "idle-hang")
    assert_stopped_keeping_the_volume(server, stopped)

    # The run's peak is the training phase's 60 GiB, not the 19.5 GiB held while hung.
    peaks = run_now["peaks"]
    assert [p["gpu_uuid"] for p in peaks] == [uuid_for(0)], peaks
    assert peaks[0]["peak_used_bytes"] == 60 * GIB
    assert peaks[0]["gpu_name"] == H100
    assert parse_time(peaks[0]["at"]) < training_ends


# --- 2. compiling before step 0: alerted at the stall window, stopped after the allowance --

COMPILE_IDLE_WINDOW_S = 1.0
STALL_WINDOW_S = 2.0
COMPILE_ALLOWANCE_S = 6.0


@sqlite_only
def test_compile_stall_is_alerted_at_the_stall_window_and_stopped_only_after_the_allowance(
    start_server: ServerFactory, spawn_agent: AgentFactory, database_url: str
) -> None:
    server = start_server(**TELEMETRY_ENV)
    policy = {
        "idle_window_s": COMPILE_IDLE_WINDOW_S,  # shorter than all: must not stop while compiling
        "stall_window_s": STALL_WINDOW_S,
        "compile_allowance_s": COMPILE_ALLOWANCE_S,
    }
    with server.client() as operator:
        budget, pod, run, token = start_pilot(operator, policy)
        created = parse_time(run["created_at"])  # no step since: the stall clock starts here
        with SimulatedJob(server.url, run, phase="compiling", steps_until=created, max_s=90) as job:
            wait_for(lambda: job.replies, "the job's first heartbeat (phase compiling)")
            agent = spawn_agent(
                server.url, pod["id"], token, interval_s=AGENT_S, fake_nvml="compile-stall"
            )
            stopped = wait_pod_stopped(operator, pod["id"], STOP_TIMEOUT_S)
            job.join()
        assert agent.alive, agent.tail()
        samples = gpu_samples(database_url, pod["id"])
        events = budget_events(operator, budget["id"])

    order = stopped["stop_order"]
    assert order["reason"] == "stalled"
    assert order["state"] == "stopped"
    ordered_at = parse_time(order["created_at"])

    stalled = by_rule(events, "stalled")
    assert [e["severity"] for e in stalled] == ["warning", "critical"], stalled
    alert, stop = stalled
    assert alert["category"] == "harness"
    assert alert["evidence"]["phase"] == "compiling"
    assert alert["evidence"]["step"] == 0
    assert alert["evidence"]["stop_after_s"] == COMPILE_ALLOWANCE_S
    assert stop["message"].startswith("Stop ordered (stalled)")
    assert stop["evidence"]["stop_order"] == order["id"]

    # The alert at the stall window, the stop only once the compile allowance is spent.
    alerted_at = parse_time(alert["at"])
    assert alerted_at >= later(created, STALL_WINDOW_S)
    assert seconds(alerted_at - created) <= STALL_WINDOW_S + ENFORCE_S + SLACK_S
    assert ordered_at >= later(created, COMPILE_ALLOWANCE_S), "stopped before the allowance"
    took = seconds(ordered_at - created)
    assert took <= COMPILE_ALLOWANCE_S + ENFORCE_S + SLACK_S, f"stopped {took:.2f} s late"
    assert alerted_at < ordered_at

    # The GPU sat idle holding 3 GiB for longer than the idle window, and yet no idle-hang:
    # compiling is the stall rule's business. The idle rule said so once, promising no stop.
    assert seconds(ordered_at - idle_from(samples, ordered_at)) >= COMPILE_IDLE_WINDOW_S
    [idle] = by_rule(events, "idle_hang")
    assert idle["severity"] == "warning" and idle["evidence"]["phase"] == "compiling"
    assert "does not stop a job while it is compiling" in idle["message"]
    assert "stopped if this lasts" not in idle["message"]
    assert idle["evidence"]["stop_after_s"] == COMPILE_ALLOWANCE_S
    assert samples[-1].memory_used_bytes == 3 * GIB

    told = [r for r in job.replies if r["action"] == "continue" and r["reason"] == "stalled"]
    assert told, "the job was never told about the stall before the stop"
    assert_told_stop_on_next_heartbeat(job, ordered_at, "stalled")
    assert all(r["reason"] != "idle-hang" for r in job.replies if r["action"] == "stop")
    assert_stopped_keeping_the_volume(server, stopped)


# --- 3. near out-of-memory: a warning, and the pod keeps running ----------------------------

HEADROOM_IDLE_WINDOW_S = 1.0
HEADROOM_HOLD_S = 4.0  # four idle windows after the warning


@sqlite_only
def test_near_oom_warns_about_memory_headroom_and_the_pod_keeps_running(
    start_server: ServerFactory, spawn_agent: AgentFactory
) -> None:
    server = start_server(**TELEMETRY_ENV)
    policy = {"idle_window_s": HEADROOM_IDLE_WINDOW_S, "stall_window_s": 4.0}
    with server.client() as operator:
        budget, pod, run, token = start_pilot(operator, policy)
        with SimulatedJob(server.url, run, phase="training", max_s=90) as job:
            agent = spawn_agent(
                server.url, pod["id"], token, interval_s=AGENT_S, fake_nvml="near-oom"
            )
            warning = wait_for_event(
                operator,
                budget["id"],
                lambda e: e["evidence"].get("rule") == "memory_headroom",
                "a memory headroom warning",
            )
            replies_then = len(job.replies)
            time.sleep(HEADROOM_HOLD_S)
            pod_now = get_pod(operator, pod["id"])
            events = budget_events(operator, budget["id"])
        assert agent.alive, agent.tail()

    assert warning["severity"] == "warning"
    assert warning["category"] == "telemetry"
    assert "nearly full" in warning["message"]
    free = warning["evidence"]["gpus"][uuid_for(0)]
    assert 0 < free < 0.05, warning["evidence"]
    assert len(by_rule(events, "memory_headroom")) == 1, "warned more than once"

    assert pod_now["state"] == "running"
    assert pod_now["stop_order"] is None
    assert [e for e in events if e["message"].startswith("Stop ordered")] == []
    gpu = pod_now["telemetry"]["gpus"][0]
    assert gpu["memory_free_bytes"] / gpu["memory_total_bytes"] < 0.05

    assert job.errors == []
    assert all(r["action"] == "continue" for r in job.replies), [r["action"] for r in job.replies]
    after = job.replies[replies_then:]
    assert len(after) >= 5, f"only {len(after)} heartbeats in {HEADROOM_HOLD_S} s"
    assert any(r["reason"] == "headroom" for r in after), after[-3:]


# --- 4. a GPU falls off the bus: a critical event, and the others are still watched ------

LOST_AT_S = 2.0


@sqlite_only
def test_lost_gpu_is_reported_and_the_other_gpu_is_still_polled(
    start_server: ServerFactory, spawn_agent: AgentFactory
) -> None:
    server = start_server(**TELEMETRY_ENV)
    with server.client() as operator:
        budget, pod, token = start_pod(operator)
        agent = spawn_agent(
            server.url,
            pod["id"],
            token,
            interval_s=AGENT_S,
            fake_nvml=f"gpu-lost:lost_s={LOST_AT_S:g}",
        )
        lost = wait_for_event(
            operator,
            budget["id"],
            lambda e: e["category"] == "telemetry" and e["severity"] == "critical",
            "a critical telemetry event",
        )
        lost_at = parse_time(lost["at"])
        telemetry = telemetry_of(operator, pod["id"])
        assert telemetry["lost_gpus"] == [uuid_for(1)]

        # GPU 0 is still read, poll after poll, after GPU 1 was lost.
        wait_for(
            lambda: (
                (at := latest_at(operator, pod["id"], uuid_for(0))) is not None
                and at > later(lost_at, 4 * AGENT_S)
            ),
            "GPU 0's samples to keep coming after the loss",
            timeout_s=STOP_TIMEOUT_S,
        )
        telemetry = telemetry_of(operator, pod["id"])
        events = budget_events(operator, budget["id"])
        assert agent.alive, agent.tail()

    assert f"GPU 1 ({uuid_for(1)}) is lost" in lost["message"], lost["message"]
    assert lost["evidence"]["index"] == 1
    assert lost["evidence"]["uuid"] == uuid_for(1)
    assert lost["subject"] == f"pod:{pod['id']}"
    lost_events = [e for e in events if e["severity"] == "critical"]
    assert lost_events == [lost], "a lost GPU is reported once, not on every poll"

    assert telemetry["lost_gpus"] == [uuid_for(1)]
    gpus = {g["uuid"]: g for g in telemetry["gpus"]}
    assert set(gpus) == {uuid_for(0), uuid_for(1)}
    assert parse_time(gpus[uuid_for(1)]["at"]) <= lost_at  # its last sample is from before
    assert parse_time(gpus[uuid_for(0)]["at"]) > later(lost_at, 4 * AGENT_S)
    assert gpus[uuid_for(0)]["utilization_pct"] > 50


# --- 5. no NVML at all: everything starts, says so, and keeps working ---------------------


def test_without_nvml_serve_and_agent_say_so_and_keep_running(
    start_server: ServerFactory, spawn_agent: AgentFactory
) -> None:
    # As on a machine without a driver: no fake at all. Where a driver exists, the fake
    # "no-nvml" driver (init answers LibraryNotFound) stands in for its absence.
    fake = "no-nvml" if machine_has_nvml() else None
    server = start_server(**TELEMETRY_ENV, GOVERNOR_FAKE_NVML=fake)
    assert "GPU telemetry: no NVML" in server.output(), server.output()
    with server.client() as operator:
        budget, pod, run, token = start_pilot(operator)
        with SimulatedJob(server.url, run, max_s=90) as job:
            agent = spawn_agent(server.url, pod["id"], token, interval_s=AGENT_S, fake_nvml=fake)
            note = wait_for(
                lambda: telemetry_of(operator, pod["id"])["note"],
                "the pod's telemetry note",
                STOP_TIMEOUT_S,
            )
            wait_for(lambda: "no NVML" in agent.output(), "the agent to say there is no NVML")
            beats = len(job.replies)
            time.sleep(6 * AGENT_S)  # several polls, none of them fatal
            assert agent.alive, f"the agent exited:\n{agent.tail()}"
            wait_for(lambda: len(job.replies) > beats + 3, "heartbeats to keep working")
        telemetry = telemetry_of(operator, pod["id"])
        events = budget_events(operator, budget["id"])

    assert "NVML" in note
    assert telemetry["gpus"] == []
    assert telemetry["lost_gpus"] == []
    unavailable = [e for e in events if e["category"] == "telemetry"]
    assert len(unavailable) == 1, "the missing NVML is noted once, not on every reading"
    assert unavailable[0]["severity"] == "warning"
    assert "no NVML" in unavailable[0]["message"]
    assert "keeps running" in agent.output()
    assert job.errors == []
    assert all(r["action"] == "continue" for r in job.replies)


# --- 6. local sampling: serve reads its own machine's GPUs for pods marked local ------------


def test_serve_samples_local_gpus_for_pods_marked_local_without_an_agent(
    start_server: ServerFactory,
) -> None:
    server = start_server(
        **TELEMETRY_ENV, GOVERNOR_FAKE_NVML="healthy", GOVERNOR_TELEMETRY_INTERVAL_S="0.3"
    )
    assert "1 local GPU(s) (0: NVIDIA H100" in server.output(), server.output()
    with server.client() as operator:
        budget = declare_budget(operator, FAR_CEILING)
        local = register_pod(operator, budget["id"], "local-1", local=True)
        remote = register_pod(operator, budget["id"], "remote-1")
        assert local["local"] is True
        assert remote["local"] is False

        first = wait_for(lambda: latest_at(operator, local["id"], uuid_for(0)), "local GPU samples")
        wait_for(
            lambda: (
                (at := latest_at(operator, local["id"], uuid_for(0))) is not None and at > first
            ),
            "a later local sample",
        )
        telemetry = telemetry_of(operator, local["id"])
        remote_telemetry = telemetry_of(operator, remote["id"])

    assert telemetry["note"] is None
    assert len(telemetry["gpus"]) == 1
    gpu = telemetry["gpus"][0]
    assert gpu["name"] == H100
    assert gpu["utilization_pct"] >= 90
    assert gpu["memory_used_bytes"] == 60 * GIB
    assert gpu["processes"] and gpu["processes"][0]["used_memory_bytes"] == 60 * GIB
    # A pod not marked local is not given this machine's GPUs.
    assert remote_telemetry == {"note": None, "lost_gpus": [], "gpus": []}


@sqlite_only
def test_a_node_agent_reports_for_the_pods_on_its_machine_and_only_its_own(
    start_server: ServerFactory, spawn_agent: AgentFactory
) -> None:
    server = start_server(**TELEMETRY_ENV)
    with server.client() as operator:
        budget = declare_budget(operator, FAR_CEILING)
        body = {"provider": "fake", "provider_ref": "on-node-7", "node": "gpu-node-7"}
        here = ok(operator.post(f"/v1/budgets/{budget['id']}/pods", json=body), 201)
        elsewhere = register_pod(operator, budget["id"], "on-node-8")
        assert here["node"] == "gpu-node-7" and elsewhere["node"] is None
        made = ok(operator.post("/v1/tokens", json={"role": "agent", "node": "gpu-node-7"}), 201)
        for wrong in (
            {"role": "agent"},
            {"role": "agent", "node": "gpu-node-7", "pod_id": here["id"]},
            {"role": "viewer", "node": "gpu-node-7"},
            {"role": "agent", "node": "-not a node name"},
        ):
            assert operator.post("/v1/tokens", json=wrong).status_code == 422, wrong
        assert made["node"] == "gpu-node-7" and made["pod_id"] is None

        agent = spawn_agent(
            server.url,
            here["id"],
            made["token"],
            interval_s=AGENT_S,
            fake_nvml="healthy",
            node="gpu-node-7",
        )
        wait_for(lambda: latest_at(operator, here["id"], uuid_for(0)), "the node's GPU samples")
        assert telemetry_of(operator, elsewhere["id"])["gpus"] == []

        batch = {"readings": [{"at": utcnow().isoformat(), "gpus": []}]}
        with http_client(server.url, made["token"]) as node_agent:
            other_node = node_agent.post("/v1/nodes/gpu-node-8/telemetry", json=batch)
            one_pod = node_agent.post(f"/v1/pods/{here['id']}/telemetry", json=batch)
    assert other_node.status_code == 403 and "its own node" in other_node.text
    assert one_pod.status_code == 403
    assert agent.alive, agent.tail()


# --- 7. the agent buffers through an outage; a wrong token stops it -------------------------


@sqlite_only
def test_agent_buffers_readings_while_the_server_is_down_and_delivers_them_in_order(
    start_server: ServerFactory, spawn_agent: AgentFactory, database_url: str
) -> None:
    server = start_server(**TELEMETRY_ENV)
    with server.client() as operator:
        _, pod, token = start_pod(operator)
    server.kill()
    down_since = utcnow()

    agent = spawn_agent(server.url, pod["id"], token, interval_s=AGENT_S, fake_nvml="healthy")
    wait_for(
        lambda: "cannot reach the server" in agent.output(),
        "the agent to notice the server is down",
        STOP_TIMEOUT_S,
    )
    time.sleep(6 * AGENT_S)  # a few more readings wait in the backlog
    assert agent.alive, agent.tail()
    still_down_at = utcnow()

    server.start().wait_ready()
    up_at = utcnow()
    with server.client() as operator:
        wait_for(
            lambda: (at := latest_at(operator, pod["id"], uuid_for(0))) is not None and at > up_at,
            "readings to flow again after the restart",
            STOP_TIMEOUT_S,
        )
    samples = gpu_samples(database_url, pod["id"])
    assert agent.alive, agent.tail()
    assert "sending" in agent.output() and "buffered readings" in agent.output(), agent.tail()

    ats = [s.at for s in samples]
    assert ats == sorted(ats), "the backlog arrived out of order"
    outage = [at for at in ats if at < still_down_at]
    assert len(outage) >= 5, f"only {len(outage)} readings from the outage arrived"
    assert ats[0] >= down_since
    assert ats[0] <= later(still_down_at, -5 * AGENT_S), "the outage's first readings are missing"
    gaps = [seconds(b - a) for a, b in pairwise(ats) if b <= up_at]
    assert max(gaps) <= AGENT_S + SLACK_S / 2, f"readings missing from the outage: gaps {gaps}"
    assert all(s.memory_used_bytes == 60 * GIB for s in samples)


def test_agent_with_a_wrong_token_exits_with_a_clear_message(
    server: GovernorServer, operator: httpx.Client, spawn_agent: AgentFactory
) -> None:
    budget = declare_budget(operator, FAR_CEILING)
    pod = register_pod(operator, budget["id"], "pod-1")

    agent = spawn_agent(
        server.url, pod["id"], "gov_agent_not-a-real-token", interval_s=AGENT_S, fake_nvml="healthy"
    )
    code = agent.wait(STOP_TIMEOUT_S)

    output = agent.output()
    assert code != 0, output
    assert "401" in output and "check --token" in output, output
    assert telemetry_of(operator, pod["id"])["gpus"] == []


# --- 8. an OOM reported by the job is a model failure --------------------------------------


def test_job_reported_oom_is_recorded_as_a_model_failure(
    server: GovernorServer, operator: httpx.Client
) -> None:
    budget, _, run, _ = start_pilot(operator)
    body = {"category": "harness", "kind": "oom", "message": "CUDA out of memory"}
    with http_client(server.url, run["token"]) as job:
        event = ok(job.post(f"/v1/runs/{run['id']}/events", json=body), 201)

    assert event["category"] == "model"
    assert event["message"] == "CUDA out of memory"
    assert event["subject"] == f"run:{run['id']}"
    assert event["evidence"]["kind"] == "oom"
    assert event["evidence"]["reported_by"] == "job"
    stored = [e for e in budget_events(operator, budget["id"]) if e["id"] == event["id"]]
    assert len(stored) == 1 and stored[0]["category"] == "model"
