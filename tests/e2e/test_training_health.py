"""Training health and GPU ownership end to end: a job's heartbeat metrics over real HTTP to a
real `governor serve`, judged by the run's health rules; a shared machine's GPUs read by a
scripted fake NVML under real `governor agent` processes, judged for the pod that owns them.

Windows are short (beats, or seconds in the run's `policy`), so each test takes seconds. Every
wait is a bounded poll on a condition, with deadlines generous for a loaded 2-core machine.
"""

from __future__ import annotations

from contextlib import ExitStack
from datetime import datetime, timedelta
from typing import Any

import httpx
import pytest

from governor.fakes.nvml import GIB, uuid_for
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
    ok,
    parse_time,
    utcnow,
    wait_for,
    wait_pod_stopped,
)

pytestmark = pytest.mark.e2e

FAR_CEILING = "1000000.00"  # at $1 a second, days away: never the reason for anything here
STOP_TIMEOUT_S = 60.0
sqlite_only = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)


def model_events(events: list[dict[str, Any]], run_id: str) -> list[dict[str, Any]]:
    return [e for e in events if e["category"] == "model" and e["subject"] == f"run:{run_id}"]


def start_run(
    operator: httpx.Client, policy: dict[str, Any] | None = None, **pod: Any
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """A far ceiling, one fake pod (`pod`: more of its registration), and a run on it."""
    budget = declare_budget(operator, FAR_CEILING)
    body = {"provider": "fake", "provider_ref": "pod-1", **pod}
    pod_row = ok(operator.post(f"/v1/budgets/{budget['id']}/pods", json=body), 201)
    run = create_run(operator, budget["id"], pod_row["id"], heartbeat_timeout_s=10, policy=policy)
    return budget, pod_row, run


# --- a reward collapse: warned at half the window, stopped at the full one ------------------

FLAT_WINDOW = 6  # beats
HEALTHY_STEPS = 4  # the variance is alive for these steps, then collapses to 0.0


def rl_metrics(step: int) -> dict[str, Any]:
    variance = 0.3 + 0.01 * (step % 4) if step <= HEALTHY_STEPS else 0.0
    return {"reward_mean": 0.5, "reward_variance": variance, "kl": 0.01}


def test_a_reward_collapse_is_warned_then_stopped_naming_the_flatline_rule(
    server: GovernorServer, operator: httpx.Client
) -> None:
    rule = {
        "kind": "flatline",
        "metric": "reward_variance",
        "action": "stop",
        "window": FLAT_WINDOW,
    }
    budget, pod, run = start_run(operator, {"health": [rule]})
    rules = ok(operator.get(f"/v1/runs/{run['id']}"))["health_rules"]
    assert {(r["kind"], r["metric"], r["action"]) for r in rules} == {
        ("non_finite", "loss", "stop"),  # on for every run
        ("flatline", "reward_variance", "stop"),
    }

    with SimulatedJob(server.url, run, metrics=rl_metrics) as job:
        stopped = wait_pod_stopped(operator, pod["id"], STOP_TIMEOUT_S)
        job.join()
    events = model_events(budget_events(operator, budget["id"]), run["id"])
    series = ok(operator.get(f"/v1/runs/{run['id']}/metrics", params={"name": "reward_variance"}))[
        "items"
    ]

    assert job.errors == []
    assert stopped["stop_order"]["reason"] == "flatline"
    assert stopped["stop_order"]["ack_checkpoint"] is not None  # the job was asked to save
    # Continue, then a warning (still continue) naming the rule, then stop naming it.
    actions = [r["action"] for r in job.replies]
    assert actions == ["continue"] * (len(actions) - 1) + ["stop"], actions
    warned = [r for r in job.replies if r["action"] == "continue" and r["reason"] == "flatline"]
    assert warned and "reward_variance has flatlined" in warned[0]["message"], job.replies
    stop = job.stop_replies[0]
    assert stop["reason"] == "flatline" and stop["deadline"] is not None
    assert "save now" in stop["message"]

    # The collapse begins at step 5: the warning at half the window, the stop at the full one,
    # each with the window of flat values that made it fire.
    assert [(e["severity"], e["evidence"]["action"]) for e in events] == [
        ("warning", "warn"),
        ("critical", "stop"),
    ], events
    warning, critical = events
    for event in events:
        assert event["evidence"]["rule"] == "flatline"
        assert event["evidence"]["metric"] == "reward_variance"
        assert event["evidence"]["window"] == FLAT_WINDOW
    assert warning["evidence"]["step"] == HEALTHY_STEPS + FLAT_WINDOW // 2
    assert warning["evidence"]["values"] == [0.0] * (FLAT_WINDOW // 2)
    assert critical["evidence"]["step"] == HEALTHY_STEPS + FLAT_WINDOW
    assert critical["evidence"]["values"] == [0.0] * FLAT_WINDOW
    assert parse_time(warning["at"]) < parse_time(critical["at"])

    # The series holds every beat's value, the healthy ones and the flat ones.
    values = [p["value"] for p in series]
    assert values[: HEALTHY_STEPS + FLAT_WINDOW] == [
        rl_metrics(step)["reward_variance"] for step in range(1, HEALTHY_STEPS + FLAT_WINDOW + 1)
    ]


# --- a NaN loss: stopped at once, told not to save -----------------------------------------


def test_a_nan_loss_is_stopped_naming_non_finite_without_asking_for_a_save(
    server: GovernorServer, operator: httpx.Client
) -> None:
    budget, pod, run = start_run(operator)  # no rules of its own: non_finite on loss is always on
    beat_path = f"/v1/runs/{run['id']}/heartbeat"
    checkpoint = {"step": 2, "path": "/workspace/ckpt-2"}
    with http_client(server.url, run["token"]) as job:
        replies = [
            ok(job.post(beat_path, json={"step": 1, "metrics": {"loss": 2.5}})),
            ok(job.post(beat_path, json={"step": 2, "metrics": {"loss": 2.1}})),
            ok(job.post(beat_path, json={"step": 2, "checkpoint": checkpoint})),
        ]
        nan = ok(job.post(beat_path, json={"step": 3, "metrics": {"loss": "NaN", "lr": 1e-4}}))
        # A well-behaved job does as it is told: it stops without saving.
        ack = ok(job.post(beat_path, json={"step": 3, "status": "stopped"}))
    stopped = wait_pod_stopped(operator, pod["id"], STOP_TIMEOUT_S)
    events = model_events(budget_events(operator, budget["id"]), run["id"])
    run_now = ok(operator.get(f"/v1/runs/{run['id']}"))
    series = ok(operator.get(f"/v1/runs/{run['id']}/metrics", params={"name": "loss"}))["items"]

    assert [r["action"] for r in replies] == ["continue"] * 3
    assert (nan["action"], nan["reason"]) == ("stop", "non-finite")
    assert nan["deadline"] is not None
    assert "loss is NaN" in nan["message"]
    assert "Do not save" in nan["message"]
    assert "the last good checkpoint is step 2, /workspace/ckpt-2" in nan["message"]
    assert ack["action"] == "stop"

    order = stopped["stop_order"]
    assert order["reason"] == "non-finite"
    assert order["acked_at"] is not None and order["ack_checkpoint"] is None
    assert run_now["checkpoint"]["path"] == "/workspace/ckpt-2"  # the last good one stands

    [event] = events  # at once: no warning first
    assert event["severity"] == "critical"
    assert event["evidence"]["rule"] == "non_finite"
    assert event["evidence"]["metric"] == "loss"
    assert event["evidence"]["values"] == ["NaN"]
    assert event["evidence"]["step"] == 3
    assert [(p["step"], p["value"]) for p in series] == [(1, 2.5), (2, 2.1)]  # no NaN stored


# --- GPU ownership on a shared machine --------------------------------------------------

OWN_IDLE_WINDOW_S = 2.0  # the idle-hang rule's window, in each run's policy
ENFORCE_S = 0.2
AGENT_S = 0.3
SLACK_S = 8.0  # a loaded 2-core machine: a server, three agents and three jobs at once
NEIGHBOUR, HUNG = uuid_for(0), uuid_for(1)


def later(at: datetime, s: float) -> datetime:
    return at + timedelta(seconds=s)


def first_sample_at(database_url: str, pod_id: str) -> datetime:
    samples = wait_for(
        lambda: [s for s in gpu_samples(database_url, pod_id) if s.uuid == HUNG],
        f"pod {pod_id}'s first reading of the hung GPU",
        STOP_TIMEOUT_S,
    )
    return samples[0].at


@sqlite_only
def test_on_a_shared_machine_a_pod_owning_the_idle_gpu_is_stopped_for_idle_hang(
    start_server: ServerFactory, spawn_agent: AgentFactory, database_url: str
) -> None:
    """GPU 0 is a neighbour's, busy; GPU 1 is the pod's, idle while holding memory. A pod that
    owns GPU 1 (named at registration, or by its agent's --gpus) is warned, then stopped for
    idle-hang; the same pod owning nothing judges both GPUs, and a busy one is not a hang."""
    server = start_server(GOVERNOR_ENFORCE_INTERVAL_S=str(ENFORCE_S))
    policy = {"idle_window_s": OWN_IDLE_WINDOW_S, "stall_window_s": 600}
    with server.client() as operator:
        pilots = {
            "registered": start_run(operator, policy, provider_ref="registered", gpu_uuids=[HUNG]),
            "claimed": start_run(operator, policy, provider_ref="claimed"),
            "unowned": start_run(operator, policy, provider_ref="unowned"),
        }
        with ExitStack() as running:
            jobs = {
                name: running.enter_context(
                    SimulatedJob(server.url, run, phase="training", max_s=150)
                )
                for name, (_, _, run) in pilots.items()
            }
            for job in jobs.values():
                wait_for(lambda job=job: job.replies, "the job's first heartbeat")
                job.steps_until = utcnow()  # hung: checking in, no step moves from here on
            for name, (_, pod, _) in pilots.items():
                gpus = ["--gpus", HUNG] if name == "claimed" else []
                spawn_agent(
                    server.url,
                    pod["id"],
                    agent_token(operator, pod["id"]),
                    interval_s=AGENT_S,
                    fake_nvml="shared",
                    extra_args=gpus,
                )
            idle_from = {
                name: first_sample_at(database_url, pod["id"])
                for name, (_, pod, _) in pilots.items()
            }
            stopped = {
                name: wait_pod_stopped(operator, pilots[name][1]["id"], STOP_TIMEOUT_S)
                for name in ("registered", "claimed")
            }
            # The pod that owns nothing has seen the same idle GPU for twice the window, and a
            # pass has judged its budget since: still no hang, as before ownership existed.
            unowned_job = jobs["unowned"]
            judged_after = later(idle_from["unowned"], 2 * OWN_IDLE_WINDOW_S)
            wait_for(
                lambda: (
                    unowned_job.replies
                    and parse_time(unowned_job.replies[-1]["budget"]["as_of"]) > judged_after
                ),
                "a pass over the unowned pod's budget two windows into its idleness",
                STOP_TIMEOUT_S,
            )
            pods = {name: get_pod(operator, pod["id"]) for name, (_, pod, _) in pilots.items()}
            events = {
                name: budget_events(operator, budget["id"])
                for name, (budget, _, _) in pilots.items()
            }

    for name in ("registered", "claimed"):
        pod, order = stopped[name], stopped[name]["stop_order"]
        assert order["reason"] == "idle-hang", (name, order)
        assert pod["gpu_uuids"] == [HUNG], name
        hung = [e for e in events[name] if e["evidence"].get("rule") == "idle_hang"]
        assert [e["severity"] for e in hung] == ["warning", "critical"], (name, hung)
        warning, stop = hung
        assert "may be hung" in warning["message"]
        assert stop["message"].startswith("Stop ordered (idle-hang)")
        assert stop["evidence"]["stop_order"] == order["id"]
        for event in hung:
            assert event["evidence"]["gpus"] == [HUNG], (name, event)  # the neighbour's: not
            assert event["evidence"]["held_gib"] == 19.5
        ordered_at = parse_time(order["created_at"])
        assert parse_time(warning["at"]) >= later(idle_from[name], OWN_IDLE_WINDOW_S / 2)
        assert ordered_at >= later(idle_from[name], OWN_IDLE_WINDOW_S), f"{name}: stopped early"
        took = (ordered_at - idle_from[name]).total_seconds()
        assert took <= OWN_IDLE_WINDOW_S + ENFORCE_S + 2 * AGENT_S + SLACK_S, (name, took)
        assert jobs[name].stop_replies[0]["reason"] == "idle-hang"
        # Its agent still reports the machine's other GPU: kept and shown, marked not its own.
        shown = {g["uuid"]: g["own"] for g in pods[name]["telemetry"]["gpus"]}
        assert shown == {NEIGHBOUR: False, HUNG: True}, (name, shown)
    claimed = [e for e in events["claimed"] if e["message"].startswith("The pod's own GPUs")]
    assert len(claimed) == 1 and claimed[0]["evidence"]["to"] == [HUNG], claimed

    unowned = pods["unowned"]
    assert unowned["state"] == "running" and unowned["stop_order"] is None
    assert unowned["gpu_uuids"] is None
    assert [e for e in events["unowned"] if e["evidence"].get("rule") == "idle_hang"] == []
    assert all(r["action"] == "continue" for r in jobs["unowned"].replies)
    gpus = {g["uuid"]: g for g in unowned["telemetry"]["gpus"]}
    assert {uuid: g["own"] for uuid, g in gpus.items()} == {NEIGHBOUR: True, HUNG: True}
    assert gpus[HUNG]["utilization_pct"] == 0 and gpus[HUNG]["memory_used_bytes"] > GIB
    assert gpus[NEIGHBOUR]["utilization_pct"] > 40
