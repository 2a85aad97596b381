"""The `governor` command: serve, migrate, agent, demo, plan, and the operator verbs."""

from __future__ import annotations

import argparse
import gc
import logging
import os
import sys
from collections.abc import Sequence
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from governor import __version__
from governor.operator import add_verbs
from governor.settings import load_settings

if TYPE_CHECKING:
    from governor.services.context import ServiceContext

log = logging.getLogger("governor")


def _serve(args: argparse.Namespace) -> int:
    import uvicorn
    from sqlalchemy.exc import OperationalError

    from governor.app import create_app
    from governor.bootstrap import (
        DatabaseBehind,
        bootstrap_operator,
        build_context,
        close_context,
        prepare_database,
    )
    from governor.db.schema import MigrationsMissing

    settings = load_settings()
    try:
        prepare_database(settings)
    except (DatabaseBehind, MigrationsMissing) as exc:
        print(f"governor: {exc}", file=sys.stderr)
        return 2
    except OperationalError as exc:
        print(
            f"governor: cannot reach the database ({exc.orig}); check GOVERNOR_DATABASE_URL",
            file=sys.stderr,
        )
        return 2
    try:
        ctx = build_context(settings)
    except ValueError as exc:  # a fake NVML scenario or a provider setup that cannot work
        print(f"governor: {exc}", file=sys.stderr)
        return 2
    token = bootstrap_operator(ctx, settings)
    url = f"http://{args.host}:{args.port}"
    print(f"governor {__version__} serving on {url}  (database: {_redact(settings.database_url)})")
    if token:
        print(
            "\nOperator token (shown once; store it now, or set GOVERNOR_OPERATOR_TOKEN "
            "yourself). For the README's tour, in the shell you run it from:\n"
            f"  export GOVERNOR_OPERATOR_TOKEN={token}\n"
        )
    print(f"API docs at {url}/docs; metering every {settings.enforce_interval_s:g} s.")
    print(f"GPU telemetry: {_describe_gpus(ctx)}")
    sys.stdout.flush()
    app = create_app(settings, ctx)
    _prepare_interpreter()
    uvicorn.run(
        app,
        host=args.host,
        port=args.port,
        log_level=settings.log_level,
        access_log=settings.access_log,
        workers=1,
    )
    close_context(ctx)
    return 0


# How long a thread that computes may keep the interpreter from one that waits for it (CPython:
# 5 ms). A heartbeat takes the interpreter back half a dozen times, after each wait on the
# database or the event loop; while a pass computes beside it, each of those cost up to the
# whole interval: a lone beat's service call took 27 ms on PostgreSQL and 36 ms on SQLite
# beside a computing thread, 4.8 and 1.9 ms at this interval.
SWITCH_INTERVAL_S = 0.0005


def _prepare_interpreter() -> None:
    """Keep what startup built (modules, the app, the context: some 200,000 objects) out of the
    collector's full passes for the life of the process. Each full pass stops every request
    while it looks at every object: at fleet scale one came every few seconds and took about
    120 ms, the worst of the heartbeats' tail; without startup's objects it takes about 10.
    And let a heartbeat's threads take the interpreter back from a pass sooner
    (SWITCH_INTERVAL_S)."""
    gc.collect()
    gc.freeze()
    sys.setswitchinterval(SWITCH_INTERVAL_S)


def _describe_gpus(ctx: ServiceContext) -> str:
    if ctx.telemetry is None:
        return "off"
    reading = ctx.telemetry.read()
    if not reading.available:
        return f"{reading.unavailable_reason}; pods marked local will have no GPU data."
    names = ", ".join(f"{g.index}: {g.name}" for g in reading.gpus) or "no GPUs"
    return f"{len(reading.gpus)} local GPU(s) ({names}), sampled for pods marked local."


def _agent(args: argparse.Namespace) -> int:
    import httpx

    from governor.agent import Agent, Target, run
    from governor.bootstrap import telemetry_source
    from governor.domain.ports import SystemClock

    token = args.token
    if args.token_file is not None:
        try:
            token = Path(args.token_file).read_text().strip()
        except OSError as exc:
            print(f"governor agent: cannot read --token-file: {exc}", file=sys.stderr)
            return 2
    if not token:
        print(
            "governor agent: give --token, --token-file or GOVERNOR_AGENT_TOKEN (an agent token "
            "from POST /v1/tokens with role agent and this pod's id, or this machine's node)",
            file=sys.stderr,
        )
        return 2
    gpus = tuple(g.strip() for g in (args.gpus or "").split(",") if g.strip()) or None
    try:
        pids = tuple(int(p) for p in (args.pids or "").split(",") if p.strip()) or None
    except ValueError:
        print(f"governor agent: --pids takes PIDs, as 123,456: not {args.pids!r}", file=sys.stderr)
        return 2
    pattern = args.process_pattern or None
    if (gpus, pids, pattern) != (None, None, None) and not args.pod:
        print(
            "governor agent: --gpus, --pids and --process-pattern name a pod's own GPUs and "
            "processes: give them with --pod",
            file=sys.stderr,
        )
        return 2
    target = Target("pod", args.pod, gpus, pids, pattern) if args.pod else Target("node", args.node)
    clock = SystemClock()
    try:
        source = telemetry_source(args.fake_nvml, clock)
    except ValueError as exc:
        print(f"governor agent: {exc}", file=sys.stderr)
        return 2
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=args.server, headers=headers, timeout=10) as client:
        agent = Agent(source, client, target, clock, backlog=args.backlog)
        log.info("agent for %s reporting to %s every %gs", target, args.server, args.interval)
        return run(agent, args.interval)


def _migrate(args: argparse.Namespace) -> int:
    from sqlalchemy.exc import OperationalError

    from governor.db import schema

    settings = load_settings()
    try:
        schema.migrations_dir()
    except schema.MigrationsMissing as exc:
        print(f"governor: {exc}", file=sys.stderr)
        return 2
    print(f"Migrating {_redact(settings.database_url)} to {args.revision} ...")
    try:
        schema.upgrade(settings.database_url, args.revision)
    except OperationalError as exc:
        print(
            f"governor: cannot reach the database ({exc.orig}); check GOVERNOR_DATABASE_URL",
            file=sys.stderr,
        )
        return 2
    print("Done: the schema is at", args.revision)
    return 0


def _rotate_bootstrap(_args: argparse.Namespace) -> int:
    from governor.bootstrap import build_context, close_context
    from governor.db.engine import unit_of_work
    from governor.services.security import tokens

    settings = load_settings()
    if settings.operator_token is None:
        print("governor: set GOVERNOR_OPERATOR_TOKEN to the new token first", file=sys.stderr)
        return 2
    ctx = build_context(settings)
    try:
        with unit_of_work(ctx.sessions) as session:
            revoked = tokens.rotate_bootstrap(
                session, settings.operator_token.get_secret_value(), ctx.clock.now()
            )
    finally:
        close_context(ctx)
    print(f"The bootstrap operator token is the configured one; {revoked} earlier one(s) revoked.")
    return 0


def _demo(args: argparse.Namespace) -> int:
    from governor.demo import run_demo

    return run_demo(port=args.port, keep_serving=not args.exit)


PLAN_EXIT = {"go": 0, "canary_only": 1, "no_go": 2}
PLAN_INVALID = 3


class _PlanParser(argparse.ArgumentParser):
    """Usage errors of `plan check` exit 3, as an invalid plan does: 1 and 2 are verdicts."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(PLAN_INVALID, f"{self.prog}: error: {message}\n")


def _usd_arg(text: str) -> Decimal:
    from governor.domain.money import MoneyError, parse_usd

    try:
        return parse_usd(text)
    except MoneyError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _plan_check(args: argparse.Namespace) -> int:
    import json
    from datetime import UTC, datetime

    from pydantic import ValidationError

    from governor.api.errors import problem
    from governor.api.schemas import PlanIn
    from governor.domain.preflight.rules import admit

    where = f"governor plan check: {args.file}"
    try:
        plan = PlanIn.model_validate_json(Path(args.file).read_bytes()).to_plan()
    except OSError as exc:
        print(f"{where}: cannot read it ({exc.strerror})", file=sys.stderr)
        return PLAN_INVALID
    except ValidationError as exc:
        for error in exc.errors():
            field = ".".join(str(p) for p in error["loc"]) or "the file"
            print(f"{where}: {field}: {problem(error)}", file=sys.stderr)
        return PLAN_INVALID
    if args.pod is not None:
        return _plan_check_on_pod(args, json.loads(Path(args.file).read_bytes()))
    admission = admit(plan, datetime.now(UTC).date(), args.remaining_usd)
    verdict = admission.as_json()
    if args.json:
        print(json.dumps(verdict, indent=2))
    else:
        print(_verdict_text(verdict, f"{plan.job_id} on {_gpus(verdict)}"))
    return PLAN_EXIT[admission.verdict.value]


PLAN_UNASKED = 4


def _plan_check_on_pod(args: argparse.Namespace, document: dict[str, object]) -> int:
    """The server's verdict on the plan, on the pod's budget and the pod's GPUs."""
    import json

    from governor.operator import POD, Api, OperatorError, resolve

    api = Api(args.url.rstrip("/"), args.token)
    try:
        pod_id = resolve(api, POD, args.pod)
        budget_id = api.call("GET", f"/v1/pods/{pod_id}")["budget_id"]
        verdict = api.call(
            "POST", f"/v1/budgets/{budget_id}/plans", body=document, params={"pod_id": pod_id}
        )
    except OperatorError as exc:
        print(f"governor plan check: {exc}", file=sys.stderr)
        return PLAN_UNASKED
    if args.json:
        print(json.dumps(verdict, indent=2))
    else:
        where = f"{verdict['job_id']} on pod {args.pod} (plan {verdict['id']}, kept with budget "
        print(_verdict_text(verdict, f"{where}{budget_id}), {_gpus(verdict)}"))
    return PLAN_EXIT[verdict["verdict"]]


def _gpus(verdict: dict[str, Any]) -> str:
    """The plan's GPUs as its verdict counts them: "1 x H200", "4 x H100 + 4 x H200"."""
    return " + ".join(f"{g['gpus']} x {g['gpu_type']}" for g in verdict["memory"]["groups"])


def _verdict_text(verdict: dict[str, Any], what: str) -> str:
    """A verdict as the API or `admit` gives it in JSON, for people; where the plan has
    several GPU models, a memory line and a cost line per model (the tightest first)."""
    from governor.domain.money import dollars

    def usd(text: str) -> str:
        return dollars(Decimal(text))

    memory, cost = verdict["memory"], verdict["cost"]
    available = cost["available_usd"]
    money = "not checked against a budget" if available is None else f"{usd(available)} available"
    mixed = len(memory["groups"]) > 1

    def fit(g: dict[str, Any]) -> str:
        return (
            f"{g['modeled_gib']:.1f} GiB modeled per GPU of {g['usable_gib']:.1f} GiB usable "
            f"({g['ratio']:.0%})"
        )

    lines = [f"{verdict['verdict'].upper()}: {what}"]
    if mixed:
        lines.append("memory, per GPU model (the tightest first):")
        lines += [
            f"  {g['gpus']} x {g['gpu_type']}: {fit(g)}: {g['verdict']}" for g in memory["groups"]
        ]
    else:
        lines.append(f"memory: {fit(memory)}")
    lines.append(
        f"cost:   worst case {usd(cost['worst_case_usd'])}, expected {usd(cost['expected_usd'])}; "
        f"{money}"
    )
    if mixed:
        lines += [
            f"  {g['gpus']} x {g['gpu_type']} at {usd(g['rate_usd_per_gpu_hour'])}/GPU-hour: "
            f"{usd(g['compute_usd'])} at max hours"
            for g in cost["groups"]
        ]
    lines.append("reasons:")
    for r in verdict["reasons"]:
        group = f" ({r['gpu_type']})" if mixed and r.get("gpu_type") else ""
        lines.append(f"  [{r['verdict']}] {r['rule']}{group}: {r['message']}")
    return "\n".join(lines)


def _redact(url: str) -> str:
    from sqlalchemy.engine import make_url

    return make_url(url).render_as_string(hide_password=True)


def _providers_check(_args: argparse.Namespace) -> int:
    from sqlalchemy.exc import OperationalError

    from governor.bootstrap import build_context, close_context
    from governor.db import schema
    from governor.domain.money import format_usd
    from governor.operator import table
    from governor.services.fleet import providers

    logging.getLogger("alembic").setLevel(logging.WARNING)  # only its schema check runs here
    settings = load_settings()
    try:
        ctx = build_context(settings)
    except ValueError as exc:  # a provider configured in a way that cannot work
        print(f"governor: {exc}", file=sys.stderr)
        return 2
    try:
        try:  # the pods registered here, if this governor's database is set up
            ready = schema.schema_status(ctx.engine).at_head
        except (OperationalError, schema.MigrationsMissing):
            ready = False
        registered = providers.registered_pods(ctx) if ready else {}
        checks = providers.check_all(ctx, registered)
    finally:
        close_context(ctx)
    for check in checks:
        mark = "ok" if check.ok else "FAILED"
        print(f"{check.name}: {mark} ({check.capability}): {check.said}")
        rows = [
            (
                pod.ref,
                pod.description.state.value,
                "-"
                if pod.description.hourly_rate_usd is None
                else format_usd(pod.description.hourly_rate_usd),
                "-"
                if pod.description.storage is None
                else f"{pod.description.storage.gb.normalize():f}",
                check.registered.get(pod.ref, "-"),
            )
            for pod in check.pods
        ]
        if rows:
            print(table(("REF", "STATE", "USD/H", "STORAGE GB", "GOVERNED AS"), rows))
        if check.ok and check.unseen:
            unseen = ", ".join(f"{ref} ({pod_id})" for ref, pod_id in sorted(check.unseen.items()))
            print(f"  governed here but not seen by {check.name}: {unseen}")
    for name, how in sorted(ctx.unconfigured.items()):
        print(f"{name}: not configured ({how})")
    return 0 if all(check.ok for check in checks) else 1


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="governor",
        description="Holds rented GPU pods under a hard dollar ceiling: meters spend, makes "
        "training jobs check in, and when a limit is hit has the job save, then stops the pod "
        "in the way that keeps its workspace.",
        epilog="Settings come from GOVERNOR_* environment variables (see the README).",
    )
    parser.add_argument("--version", action="version", version=f"governor {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    serve = commands.add_parser(
        "serve", help="run the governor: API and the periodic metering and enforcement"
    )
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=8000, help="port to bind (default 8000)")
    serve.set_defaults(handler=_serve)

    migrate = commands.add_parser("migrate", help="upgrade the database schema")
    migrate.add_argument("--revision", default="head", help="target revision (default head)")
    migrate.set_defaults(handler=_migrate)

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

    demo = commands.add_parser(
        "demo",
        help="watch a simulated pilot approach its ceiling, save, and stop (no cloud needed)",
    )
    demo.add_argument("--port", type=int, default=8000, help="port to serve on (default 8000)")
    demo.add_argument("--exit", action="store_true", help="exit when the demo ends")
    demo.set_defaults(handler=_demo)

    plan = commands.add_parser("plan", help="check a preflight plan before renting (offline)")
    plan_commands = plan.add_subparsers(
        dest="plan_command", required=True, metavar="VERB", parser_class=_PlanParser
    )
    check = plan_commands.add_parser(
        "check",
        help="go, canary_only or no_go, with every reason; exit 0, 1 or 2 (3: invalid plan)",
    )
    check.add_argument("file", help="the plan, as JSON (schema preflight-plan/0.1 or 0.2)")
    check.add_argument(
        "--remaining-usd",
        type=_usd_arg,
        metavar="USD",
        help="the budget's money left; without it the cost is reported but not checked",
    )
    check.add_argument("--json", action="store_true", help="print the verdict as JSON")
    check.add_argument(
        "--pod",
        metavar="POD",
        help="ask the server instead, judging the plan against this pod's budget and the free "
        "memory its GPUs report (POD: its name or id; the verdict is kept; exit 4 if the "
        "server cannot be asked)",
    )
    check.add_argument(
        "--url",
        default=os.environ.get("GOVERNOR_URL", "http://127.0.0.1:8000"),
        help="with --pod: the governor's URL (or GOVERNOR_URL)",
    )
    check.add_argument(
        "--token",
        default=os.environ.get("GOVERNOR_TOKEN"),
        help="with --pod: an operator token (or GOVERNOR_TOKEN)",
    )
    check.set_defaults(handler=_plan_check)
    providers = commands.add_parser(
        "providers", help="check the configured cloud providers (run where the server runs)"
    )
    provider_commands = providers.add_subparsers(
        dest="providers_command", required=True, metavar="VERB"
    )
    providers_check = provider_commands.add_parser(
        "check",
        help="verify each configured provider's credentials and list the pods it can see, "
        "with their rates; exit 1 if any provider failed",
    )
    providers_check.set_defaults(handler=_providers_check)
    groups = add_verbs(commands)
    rotate = groups["token"].add_parser(
        "rotate-bootstrap",
        help="make GOVERNOR_OPERATOR_TOKEN the only bootstrap operator token, revoking earlier "
        "ones (run once every replica has the new value; works on the database directly)",
    )
    rotate.set_defaults(handler=_rotate_bootstrap)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    from pydantic import ValidationError

    args = build_parser().parse_args(argv)
    try:
        settings = load_settings()
    except ValidationError as exc:
        from governor.api.errors import problem

        for error in exc.errors():
            if not error["loc"]:  # a rule across settings names them in its message
                print(f"governor: invalid settings: {problem(error)}", file=sys.stderr)
                continue
            name = "GOVERNOR_" + "_".join(str(p) for p in error["loc"]).upper()
            print(f"governor: invalid setting {name}: {problem(error)}", file=sys.stderr)
        return 2
    logging.basicConfig(
        level=settings.log_level.upper(),
        format="%(asctime)s %(levelname)-7s %(name)s: %(message)s",
    )
    # httpx and botocore at DEBUG would log request headers (botocore: the AWS key id)
    for noisy in ("apscheduler", "alembic.runtime.plugins", "httpx", "botocore", "urllib3"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    handler = args.handler
    try:
        return int(handler(args))
    except BrokenPipeError:  # the reader went away (`governor events | head`): not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
