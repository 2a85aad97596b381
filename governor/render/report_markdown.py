"""The run report as Markdown, for people: figures first, each run's last metric values, then
stops, failures, extensions, memory, and the whole timeline of decisions with their evidence.
Pods are named as people call them, their provider's reference beside the name. A character
that does not show what it is is written as its escape (`visible`), wherever it came from."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from governor.domain.money import ZERO, dollars, dollars_per_hour
from governor.domain.text import visible
from governor.render.format import in_gib, instant, share
from governor.render.report_text import about, evidence, spend_line
from governor.services.events import Event
from governor.services.money.pod_bill_model import PodBill
from governor.services.view.report import Report

POD_HEADERS = ("pod", "id", "provider", "GPUs", "state", "rate", "spent", "billed", "bill through")
NO_BILL = "no bill read yet"


def render(r: Report) -> str:
    sections = [
        _summary(r),
        _runs(r),
        _metrics(r),
        _spend(r),
        _stops(r),
        _failures(r),
        _extensions(r),
        _memory(r),
        _timeline(r),
    ]
    return visible("\n\n".join(sections) + "\n")


def _summary(r: Report) -> str:
    budget = r.budget
    rows = [
        ("Ceiling (declared)", dollars(budget.ceiling)),
        ("Approved extensions", dollars(budget.approved_extensions)),
        ("Effective ceiling", dollars(budget.effective_ceiling)),
        ("Spent", dollars(budget.spent)),
        ("+ shutdown", dollars(budget.shutdown)),
        ("+ storage tail", dollars(budget.storage_tail)),
        ("+ reserve", dollars(budget.reserve)),
        ("= Committed (stops at the effective ceiling)", dollars(budget.committed)),
        ("Remaining", dollars(budget.remaining)),
        ("Held for plans (not committed)", dollars(budget.held_for_plans)),
        ("Reserved for launches (not committed)", dollars(budget.reserved_for_launches)),
        ("Burn rate", dollars_per_hour(budget.burn_rate_per_hour)),
    ]
    return "\n".join(
        [
            f"# Run report: {budget.name} ({budget.id})",
            "",
            f"Generated {instant(r.generated_at)}. Budget state: **{budget.state.value}**."
            + (f" Note: {budget.note}" if budget.note else ""),
            "",
            _table(("", "amount"), rows, right=(1,)),
        ]
    )


def _runs(r: Report) -> str:
    rows = []
    for run in r.runs:
        steps = f"{run.step}" + (f" / {run.total_steps}" if run.total_steps else "")
        saved = run.checkpoint
        checkpoint = f"step {saved.step} at {saved.path}" if saved else "—"
        phase = run.phase.value if run.phase else "—"
        pod = r.pods[run.pod_id].name
        rows.append((run.name, run.id, pod, run.status.value, phase, steps, checkpoint))
    headers = ("run", "id", "pod", "status", "last phase", "step", "last checkpoint")
    return "## Runs\n\n" + (_table(headers, rows) if rows else "No runs.")


def _metrics(r: Report) -> str:
    rows = [(m.run_name, m.name, f"{m.value:.6g}", str(m.step), instant(m.at)) for m in r.metrics]
    headers = ("run", "metric", "last value", "step", "at")
    return "\n\n".join(
        [
            "## Training metrics",
            "The last value of each metric a run's job reported (training-health findings are "
            "model failures, below).",
            _table(headers, rows, right=(2, 3)) if rows else "No metrics were reported.",
        ]
    )


def _spend(r: Report) -> str:
    spent = r.spend.spent
    phases = [
        (spend_line(p.phase), dollars(p.spent), share(p.spent, spent))
        for p in r.spend.by_phase
        if p.spent != ZERO
    ]
    phases.append(("**total**", f"**{dollars(spent)}**", share(spent, spent)))
    pods = [
        (
            s.name,
            s.pod_id,
            f"{s.provider} {s.provider_ref}",
            f"{s.gpu_count or '?'} x {s.gpu_type}" if s.gpu_type else "—",
            s.state.value,
            dollars_per_hour(s.hourly_rate),
            dollars(s.spent),
            *_bill(s.bill),
        )
        for s in r.spend.by_pod
    ]
    return "\n\n".join(
        [
            "## Spend by phase",
            "Each accrual is split over the phase the pod's run was in at the time.",
            _table(("phase", "spent", "share"), phases, right=(1, 2)),
            "## Spend by pod",
            _table(POD_HEADERS, pods, right=(5, 6, 7)) if pods else "No pods.",
            *_losses(r),
        ]
    )


def _losses(r: Report) -> list[str]:
    """The pods registered though their stop loses their workspace, and why."""
    lines = [
        f"- **{s.name}** ({s.pod_id}): a stop loses {' '.join(loss.lost.split())}. "
        f"Acknowledged{'' if loss.by is None else f' by {loss.by}'}: {' '.join(loss.why.split())}"
        for s in r.spend.by_pod
        if (loss := s.acknowledged_loss) is not None
    ]
    return ["### Losses acknowledged at registration", "\n".join(lines)] if lines else []


def _bill(bill: PodBill) -> tuple[str, str]:
    """What the provider billed and the instant that bill runs to, if it was read."""
    if bill.billed is None or bill.through is None:
        return "—", NO_BILL
    return dollars(bill.billed), instant(bill.through)


def _stops(r: Report) -> str:
    if not r.stops:
        return "## Stops\n\nNo stop was ordered."
    lines = ["## Stops", ""]
    pods = r.pods
    for o in r.stops:
        pod = pods[o.pod_id]
        lines.append(
            f"- **{pod.name}** ({pod.provider} {pod.provider_ref}, {pod.pod_id}): "
            f"`{o.reason.value}`, ordered {instant(o.created_at)}"
            f" (state `{o.state.value}`). Why: {o.why or 'not recorded'}"
        )
        if o.asked:
            lines.append(f"  - asked: {' '.join(o.asked.split())}")
        steps = [("save deadline", o.deadline), ("job notified", o.notified_at)]
        steps += [("job acknowledged", o.acked_at), ("provider stop sent", o.sent_at)]
        steps += [("stop confirmed", o.confirmed_at)]
        lines += [f"  - {what}: {instant(at)}" for what, at in steps if at is not None]
        if o.ack_checkpoint:
            checkpoint = o.ack_checkpoint
            lines.append(f"  - saved: step {checkpoint.get('step')} at {checkpoint.get('path')}")
        if o.attempts > 1 or o.last_error:
            error = f"; last error: {o.last_error}" if o.last_error else ""
            lines.append(f"  - provider attempts: {o.attempts}{error}")
    return "\n".join(lines)


def _failures(r: Report) -> str:
    lines = ["## Failures by category", ""]
    lines += [f"- {f.category.value}: {f.total}" for f in r.failures]
    for f in r.failures:
        if f.events:
            lines += ["", f"### {f.category.value}", "", *_listed(f.events, f.note)]
    return "\n".join(lines)


def _extensions(r: Report) -> str:
    rows = [
        (
            instant(e.created_at),
            dollars(e.amount),
            e.requested_by.value,
            e.reason,
            e.state.value,
            instant(e.decided_at),
            e.decision_note or "—",
        )
        for e in r.extensions
    ]
    headers = ("requested", "amount", "by", "reason", "state", "decided", "note")
    return "## Extensions\n\n" + (_table(headers, rows, right=(1,)) if rows else "None requested.")


def _memory(r: Report) -> str:
    peaks = [
        (
            p.run_name,
            f"{p.gpu_name} {p.gpu_uuid}",
            in_gib(p.peak_used_bytes),
            in_gib(p.memory_total_bytes),
            instant(p.at),
        )
        for p in r.memory.peaks
    ]
    floors = [
        (
            f.run_name,
            f.run_status.value + (", out of memory" if f.out_of_memory else ""),
            f.phase,
            f"{f.gpu_name} {f.gpu_uuid}",
            in_gib(f.peak_used_bytes),
            f"{f.model_id}" + (f"@{f.model_revision}" if f.model_revision else ""),
            f"{f.gpu_count} GPUs, recipe {f.recipe}",
        )
        for f in r.memory.floors
    ]
    floor_headers = ("run", "ended", "phase", "GPU", "floor GiB", "model", "configuration")
    plans = [
        (
            p.job_id,
            p.verdict.value
            + (f" (overridden: {p.override_reason})" if p.override_reason else "")
            + (" (withdrawn)" if p.withdrawn_at else ""),
            p.gpu_type,
            f"{p.modeled_gib:.1f}",
            f"{p.usable_gib:.1f}",
            dollars(p.worst_case),
            dollars(p.available),
            instant(p.created_at),
        )
        for p in r.memory.plans
    ]
    plan_headers: tuple[str, ...] = ("plan", "verdict", "GPU", "modeled GiB/GPU", "usable GiB")
    plan_headers += ("worst case", "available", "checked")
    admitted = [
        (
            p.job_id,
            p.verdict.value + (" (overridden)" if p.overridden else ""),
            dollars(p.worst_case),
            dollars(p.spent),
            dollars(p.held),
            "yes" if p.released else "no",
        )
        for p in r.memory.admitted
    ]
    admitted_headers = ("plan", "verdict", "worst case", "spent", "held back", "released")
    return "\n\n".join(
        [
            "## Memory: measured peaks and preflight verdicts",
            "### Measured peak per GPU",
            _table(("run", "GPU", "peak GiB", "total GiB", "at"), peaks, right=(2, 3))
            if peaks
            else "No GPU telemetry was recorded while a run was live.",
            "### Measured floors: each run's peak per GPU and phase, kept for later plans",
            _table(floor_headers, floors, right=(4,))
            if floors
            else "No run's plan named its model (model.id): no floor was kept.",
            "### Preflight verdicts",
            _table(plan_headers, plans, right=(3, 4, 5, 6)) if plans else "No plan was checked.",
            "### Admitted plans: held back vs actually spent (never committed spend)",
            _table(admitted_headers, admitted, right=(2, 3, 4))
            if admitted
            else "No plan is admitted.",
        ]
    )


def _timeline(r: Report) -> str:
    return "\n".join(["## Timeline", "", *(_listed(r.timeline, r.timeline_note) or ["No events."])])


def _listed(events: Sequence[Event], note: str | None) -> list[str]:
    lines = [f"*{note}*", ""] if note else []
    for e in events:
        lines.append(
            f"- {instant(e.at)} **{e.severity.value}** {e.category.value} `{e.subject}`"
            + (f" ({named})" if (named := about(e)) else "")
            + ": "
            + " ".join(e.message.split())
            + (f" ({e.count} times, last {instant(e.last_at)})" if e.count > 1 else "")
        )
        if e.evidence:
            written = evidence(e.evidence).replace("`", "'")
            lines.append(f"  - evidence: `{written}`")
    return lines


def _table(headers: Sequence[str], rows: Iterable[Sequence[str]], right: Sequence[int] = ()) -> str:
    rule = ["---:" if i in right else "---" for i in range(len(headers))]
    lines = [_row(headers), _row(rule)]
    lines += [_row([_cell(c) for c in row]) for row in rows]
    return "\n".join(lines)


def _row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")
