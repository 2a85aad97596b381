"""`governor plan check`: a preflight plan's verdict before renting, offline or by the server
against a pod's budget and GPUs; `governor plan submit`: the server's verdict against a
budget, kept there, whose plan id `pod add --plan` names."""

from __future__ import annotations

import argparse
import os
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any, NoReturn

from governor.cli.http import DEFAULT_URL, Api, OperatorError
from governor.cli.names import BUDGET, POD, path_of, resolve
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


def _read(args: argparse.Namespace, where: str) -> tuple[Any, dict[str, Any]] | None:
    """The plan in `args.file`, validated, and the document as written; None (said on stderr)
    if it cannot be read or is not a valid plan."""
    import json

    from pydantic import ValidationError

    from governor.api.errors import problem
    from governor.services.plans.document import PlanIn

    try:
        text = Path(args.file).read_bytes()
        plan = PlanIn.model_validate_json(text).to_plan()
    except OSError as exc:
        print(f"{where}: cannot read it ({exc.strerror})", file=sys.stderr)
        return None
    except ValidationError as exc:
        for error in exc.errors():
            field = ".".join(str(p) for p in error["loc"]) or "the file"
            print(f"{where}: {field}: {problem(error)}", file=sys.stderr)
        return None
    return plan, json.loads(text)


def _plan_check(args: argparse.Namespace, api: Api) -> int:
    import json
    from datetime import UTC, datetime

    from governor.domain.preflight.rules import admit

    read = _read(args, f"governor plan check: {args.file}")
    if read is None:
        return PLAN_INVALID
    plan, document = read
    if args.pod is not None:
        return _asked(args, api, document, "check", budget=None, pod=args.pod)
    admission = admit(plan, datetime.now(UTC).date(), args.remaining_usd)
    verdict = admission.as_json()
    if args.json:
        print(json.dumps(verdict, indent=2))
    else:
        print(_verdict_text(verdict, f"{plan.job_id} on {_gpus(verdict)}"))
    return PLAN_EXIT[admission.verdict.value]


def _plan_submit(args: argparse.Namespace, api: Api) -> int:
    read = _read(args, f"governor plan submit: {args.file}")
    if read is None:
        return PLAN_INVALID
    return _asked(args, api, read[1], "submit", budget=args.budget, pod=args.pod)


def _asked(
    args: argparse.Namespace,
    api: Api,
    document: dict[str, Any],
    verb: str,
    *,
    budget: str | None,
    pod: str | None,
) -> int:
    """The server's verdict on the plan, kept with the budget (the pod's, if only a pod is
    named); with a pod, also judged against the free memory its GPUs report."""
    import json

    try:
        budget_id = None if budget is None else resolve(api, BUDGET, budget)
        pod_id = None
        if pod is not None:
            found = api.call("GET", path_of(api, POD, pod))
            pod_id, budget_id = found["id"], budget_id or found["budget_id"]
        verdict = api.call(
            "POST", f"/v1/budgets/{budget_id}/plans", body=document, params={"pod_id": pod_id}
        )
    except OperatorError as exc:
        print(f"governor plan {verb}: {exc}", file=sys.stderr)
        return PLAN_UNASKED
    if args.json:
        print(json.dumps(verdict, indent=2))
    else:
        on = f" on pod {pod}" if pod is not None else ""
        where = f"{verdict['job_id']}{on} (plan {verdict['id']}, kept with budget {budget_id})"
        print(_verdict_text(verdict, f"{where}, {_gpus(verdict)}"))
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
    plan = commands.add_parser(
        "plan", help="check a preflight plan before renting (offline), or submit it to a budget"
    )
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
        help="with --pod: an operator token (or GOVERNOR_OPERATOR_TOKEN)",
    )
    check.set_defaults(remote=_plan_check)

    submit = plan_commands.add_parser(
        "submit",
        help="have the server check the plan against a budget and keep it: the verdict and the "
        "plan's id (for 'pod add --plan'); exit 0, 1 or 2 (3: invalid plan, 4: not asked)",
    )
    submit.add_argument("file", help="the plan, as JSON (schema preflight-plan/0.1 or 0.2)")
    submit.add_argument(
        "--budget", required=True, metavar="BUDGET", help="the budget to judge it against"
    )
    submit.add_argument(
        "--pod",
        metavar="POD",
        help="also judge the free memory this pod's GPUs report (its name or id)",
    )
    submit.add_argument("--json", action="store_true", help="print the verdict as JSON")
    submit.add_argument(
        "--url",
        default=os.environ.get("GOVERNOR_URL", DEFAULT_URL),
        help="the governor's URL (or GOVERNOR_URL)",
    )
    submit.add_argument("--token", help="an operator token (or GOVERNOR_OPERATOR_TOKEN)")
    submit.set_defaults(remote=_plan_submit)
