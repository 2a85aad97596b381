"""`governor agent`: its options, and what it checks before it starts the agent (loop.py)."""

from __future__ import annotations

import argparse
import logging
import os
from pathlib import Path

from governor.cli.http import connect
from governor.cli.output import refused
from governor.cli.verbs import Commands

log = logging.getLogger("governor")

AGENT = "governor agent"
TIMEOUT_S = 10.0  # how long one push of readings may take


def _agent(args: argparse.Namespace) -> int:
    from governor.bootstrap import telemetry_source
    from governor.cli.agent.loop import Agent, Target, run
    from governor.domain.ports import SystemClock

    token = args.token
    if args.token_file is not None:
        try:
            token = Path(args.token_file).read_text().strip()
        except OSError as exc:
            return refused(f"cannot read --token-file: {exc}", AGENT)
    if not token:
        return refused(
            "give --token, --token-file or GOVERNOR_AGENT_TOKEN (an agent token from POST "
            "/v1/tokens with role agent and this pod's id, or this machine's node)",
            AGENT,
        )
    gpus = tuple(g.strip() for g in (args.gpus or "").split(",") if g.strip()) or None
    try:
        pids = tuple(int(p) for p in (args.pids or "").split(",") if p.strip()) or None
    except ValueError:
        return refused(f"--pids takes PIDs, as 123,456: not {args.pids!r}", AGENT)
    pattern = args.process_pattern or None
    if (gpus, pids, pattern) != (None, None, None) and not args.pod:
        return refused(
            "--gpus, --pids and --process-pattern name a pod's own GPUs and processes: give "
            "them with --pod",
            AGENT,
        )
    target = Target("pod", args.pod, gpus, pids, pattern) if args.pod else Target("node", args.node)
    clock = SystemClock()
    try:
        source = telemetry_source(args.fake_nvml, clock)
    except ValueError as exc:
        return refused(str(exc), AGENT)
    with connect(args.server, token, timeout_s=TIMEOUT_S) as client:
        agent = Agent(source, client, target, clock, backlog=args.backlog)
        log.info("agent for %s reporting to %s every %gs", target, args.server, args.interval)
        return run(agent, args.interval)


def add_command(commands: Commands) -> None:
    agent = commands.add_parser(
        "agent", help="sample this machine's GPUs and push them to a governor server"
    )
    agent.add_argument(
        "--server",
        default=os.environ.get("GOVERNOR_URL"),
        required="GOVERNOR_URL" not in os.environ,
        help="the governor's URL (or GOVERNOR_URL)",
    )
    whom = agent.add_mutually_exclusive_group(required=True)
    whom.add_argument("--pod", help="report for this pod (its id on the governor)")
    whom.add_argument(
        "--node",
        help="report for every pod registered on this machine under this node name "
        "(a DaemonSet on GPU nodes: the Kubernetes node name)",
    )
    agent.add_argument(
        "--token",
        default=os.environ.get("GOVERNOR_AGENT_TOKEN"),
        help="an agent token for this pod or node (or GOVERNOR_AGENT_TOKEN)",
    )
    agent.add_argument(
        "--token-file", help="read the agent token from this file (a mounted Secret)"
    )
    agent.add_argument(
        "--gpus",
        metavar="UUID,...",
        help="with --pod on a shared machine: the pod's own GPUs by UUID (nvidia-smi -L); "
        "the rules judge these alone, the others are shown as context",
    )
    agent.add_argument(
        "--pids",
        metavar="PID,...",
        help="with --pod on a shared machine: the pod's own processes by PID, as NVML lists "
        "them (host PIDs); the GPU rules judge the memory they hold",
    )
    agent.add_argument(
        "--process-pattern",
        metavar="GLOB",
        help="with --pod on a shared machine: the pod's own processes by name, a glob matching "
        "NVML's process name or its last part (e.g. 'python3*')",
    )
    agent.add_argument(
        "--interval", type=float, default=5.0, help="seconds between polls (default 5)"
    )
    agent.add_argument(
        "--backlog",
        type=int,
        default=10_000,
        help="readings kept while the server is unreachable (default 10000)",
    )
    agent.add_argument(
        "--fake-nvml",
        default=os.environ.get("GOVERNOR_FAKE_NVML"),
        metavar="SCENARIO",
        help="read a scripted fake GPU driver instead of NVML, e.g. 'deadlock'",
    )
    agent.set_defaults(handler=_agent)
