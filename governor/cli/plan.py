"""`governor plan check`: a preflight plan's verdict before renting, offline or by the server
against a pod's budget and GPUs."""

from __future__ import annotations

import argparse
import os
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any, NoReturn

from governor.cli.http import DEFAULT_URL, Api, OperatorError
from governor.cli.names import POD, path_of
from governor.cli.output import usd
from governor.cli.verbs import Commands
from governor.domain.money import MoneyError, parse_usd

PLAN_EXIT = {"go": 0, "canary_only": 1, "no_go": 2}
PLAN_INVALID = 3
PLAN_UNASKED = 4


class _PlanParser(argparse.ArgumentParser):
    """Usage errors of `plan check` exit 3, as an invalid plan does: 1 and 2 are verdicts."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(PLAN_INVALID, f"{self.prog}: error: {message}\n")


def _usd_arg(text: str) -> Decimal:
    try:
        return parse_usd(text)
    except MoneyError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _plan_check(args: argparse.Namespace, api: Api) -> int:
    import json
    from datetime import UTC, datetime

    from pydantic import ValidationError

    from governor.api.errors import problem
    from governor.domain.preflight.rules import admit
    from governor.services.plans.document import PlanIn

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
        return _plan_check_on_pod(args, api, json.loads(Path(args.file).read_bytes()))
    admission = admit(plan, datetime.now(UTC).date(), args.remaining_usd)
    verdict = admission.as_json()
    if args.json:
        print(json.dumps(verdict, indent=2))
    else:
        print(_verdict_text(verdict, f"{plan.job_id} on {_gpus(verdict)}"))
    return PLAN_EXIT[admission.verdict.value]


def _plan_check_on_pod(args: argparse.Namespace, api: Api, document: dict[str, object]) -> int:
    """The server's verdict on the plan, on the pod's budget and the pod's GPUs."""
    import json

    try:
        pod = api.call("GET", path_of(api, POD, args.pod))
        pod_id, budget_id = pod["id"], pod["budget_id"]
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


def add_command(commands: Commands) -> None:
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
        default=os.environ.get("GOVERNOR_URL", DEFAULT_URL),
        help="with --pod: the governor's URL (or GOVERNOR_URL)",
    )
    check.add_argument(
        "--token",
        default=os.environ.get("GOVERNOR_TOKEN"),
        help="with --pod: an operator token (or GOVERNOR_TOKEN)",
    )
    check.set_defaults(remote=_plan_check)
