"""The run report on the real schema: spend split by phase from the ledger and the phase
history (adding up to spent exactly), stops with why and when, failures by category,
extensions, measured peaks next to the preflight verdicts, and what each admitted plan holds
back against its spend (SQLite and PostgreSQL)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from datetime import timedelta
from decimal import Decimal
from urllib.parse import parse_qs, urlsplit

import pytest

from governor.api import report_view
from governor.db import repository as repo
from governor.domain.health import HealthRule, Kind, Response
from governor.domain.model import (
    Category,
    ChargeKind,
    EntryKind,
    ExtensionState,
    Phase,
    Reason,
    Requester,
    RunStatus,
    Severity,
)
from governor.domain.money import ZERO, dollars, format_usd
from governor.domain.paging import PageRequest
from governor.domain.ports import Billed
from governor.render import report_html
from governor.render.report_markdown import render
from governor.services import events
from governor.services.fleet import pods
from governor.services.jobs import checkins
from governor.services.money import billing, extensions, metering
from governor.services.plans import admission
from governor.services.plans.document import PlanIn
from governor.services.runs import lifecycle
from governor.services.view import report
from tests.integration.conftest import BY, WORST_CASE, Governor, check, gpu_sample, plan, register
from tests.plans import variant

D = Decimal


def beat(
    gov: Governor,
    run: str,
    phase: Phase | None,
    status: RunStatus = RunStatus.RUNNING,
    checkpoint: checkins.Checkpoint | None = None,
) -> None:
    heartbeat = checkins.Heartbeat(step=1, phase=phase, status=status, checkpoint=checkpoint)
    with gov.session() as s:
        checkins.heartbeat(s, gov.ctx.config, run, heartbeat, gov.clock.now())


def build(gov: Governor, budget: str) -> report.Report:
    with gov.session() as s:
        return report.build(s, gov.ctx.config, budget, gov.clock.now())


def by_phase(r: report.Report) -> dict[str, Decimal]:
    return {line.phase: line.spent for line in r.spend.by_phase}


def failures_of(r: report.Report, category: Category) -> report.Failures:
    [found] = [f for f in r.failures if f.category is category]
    return found


def pilot(gov: Governor) -> tuple[str, str, str]:
    """$3.60/h ($0.001 a second) of compute, $1/h of storage once stopped: 100 s loading,
    80 s training, 51 s checkpointing until the manual stop is confirmed, then an hour
    stopped; an approved extension and a harness failure reported by the job."""
    budget = gov.budget(ceiling="100")
    pod = gov.pod(budget, storage_gb=73, storage="0", stopped_storage="10")
    run = gov.run(budget, pod, timeout_s=100_000, grace_s=60)
    beat(gov, run, Phase.LOADING)
    gov.tick(100)
    beat(gov, run, Phase.TRAINING)
    gov.tick(50)
    gov.clock.advance(30)
    beat(gov, run, Phase.CHECKPOINTING)
    gov.tick(20)
    with gov.session() as s:
        pods.stop_manually(s, gov.ctx, pod, "end of day", gov.clock.now(), by=BY)
    saved = checkins.Checkpoint(1, "/workspace/ckpt-1")
    beat(gov, run, None, RunStatus.STOPPING, saved)
    gov.tick(1)  # the stop is sent
    gov.tick(30)  # and confirmed (the fake cloud takes 30 s)
    gov.tick(3600)
    with gov.session() as s:
        ext = extensions.request(
            s, budget, D("20"), "eval rerun", Requester.OPERATOR, gov.clock.now()
        )
    with gov.session() as s:
        extensions.decide(s, gov.ctx.config, ext.id, True, "last one", gov.clock.now(), by=BY)
    with gov.session() as s:
        events.record(
            s,
            gov.clock.now(),
            Severity.WARNING,
            Category.HARNESS,
            f"run:{run}",
            "dataloader worker crashed",
            budget_id=budget,
        )
    return budget, pod, run


def test_spend_is_split_by_the_phase_the_run_was_in(gov: Governor) -> None:
    budget, pod, _ = pilot(gov)
    r = build(gov, budget)
    phases = {k: v for k, v in by_phase(r).items() if v != ZERO}
    assert phases == {
        "loading": D("0.100000"),
        "training": D("0.080000"),
        "checkpointing": D("0.051000"),  # from the phase change to the confirmed stop
        "stopped_storage": D("1.000000"),
    }
    assert sum(by_phase(r).values()) == r.budget.spent == D("1.231000")
    assert [p.pod_id for p in r.spend.by_pod] == [pod]


def test_what_has_not_been_accrued_yet_and_time_without_a_phase_count_too(gov: Governor) -> None:
    budget = gov.budget()
    pod = gov.pod(budget)
    gov.tick(10)  # the pod bills before any run: no phase
    run = gov.run(budget, pod, timeout_s=100_000)
    beat(gov, run, None)
    gov.clock.advance(5)  # a job that never says its phase
    beat(gov, run, Phase.EVALUATION)
    gov.clock.advance(7)  # not accrued yet
    r = build(gov, budget)
    assert by_phase(r)["unphased"] == D("0.015000")
    assert by_phase(r)["evaluation"] == D("0.007000")
    assert sum(by_phase(r).values()) == r.budget.spent


def test_true_ups_and_adjustments_are_lines_of_their_own(gov: Governor) -> None:
    budget = gov.budget()
    pod = gov.pod(budget)
    now = gov.clock.now()
    with gov.session() as s:
        row = repo.get_pod(s, pod)
        for kind, amount in ((EntryKind.TRUE_UP, "0.50"), (EntryKind.ADJUSTMENT, "1.25")):
            metering.post(s, row, kind, ChargeKind.COMPUTE, D(amount), (now, now), now)
    r = build(gov, budget)
    assert (by_phase(r)["true_up"], by_phase(r)["adjustment"]) == (D("0.50"), D("1.25"))
    assert sum(by_phase(r).values()) == r.budget.spent == D("1.75")


def test_stops_failures_and_extensions_are_on_record(gov: Governor) -> None:
    budget, pod, run = pilot(gov)
    r = build(gov, budget)

    [stop] = r.stops
    assert (stop.pod_id, stop.reason) == (pod, Reason.MANUAL)
    assert stop.why is not None and stop.why.startswith("Stop ordered (manual)")
    assert stop.ack_checkpoint == {"step": 1, "path": "/workspace/ckpt-1"}
    assert stop.confirmed_at is not None

    assert {f.category.value: f.total for f in r.failures} == {
        "harness": 1,  # the checkpoint notes are info, not failures
        "model": 0,
        "provider": 0,
    }
    assert failures_of(r, Category.HARNESS).events[0].message == "dataloader worker crashed"
    [ext] = r.extensions
    assert (ext.state, ext.amount, ext.decision_note) == (
        ExtensionState.APPROVED,
        D("20"),
        "last one",
    )
    assert [e.id for e in r.timeline] == sorted(e.id for e in r.timeline)
    assert any(e.subject == f"run:{run}" for e in r.timeline)
    assert (r.timeline_left_out, r.earlier_events, r.timeline_note) == (0, None, None)


def crashed(gov: Governor, budget: str, run: str, workers: Iterable[int]) -> None:
    """A harness warning on the run for each of `workers`: "worker N crashed"."""
    with gov.session() as s:
        for n in workers:
            events.record(
                s,
                gov.clock.now(),
                Severity.WARNING,
                Category.HARNESS,
                f"run:{run}",
                f"worker {n} crashed",
                budget_id=budget,
            )


def test_a_capped_report_lists_the_latest_events_says_what_it_left_out_and_still_adds_up(
    gov: Governor,
) -> None:
    budget, _, run = pilot(gov)
    crashed(gov, budget, run, (1, 2, 3, 4, 5, 5))  # the last one twice: folded into one
    whole = build(gov, budget)
    with gov.session() as s:
        capped = report.build(
            s, replace(gov.ctx.config, report_timeline_events=3), budget, gov.clock.now()
        )

    every = whole.timeline
    assert whole.timeline_left_out == 0 and len(every) > 3
    assert [e.id for e in capped.timeline] == [e.id for e in every[-3:]]  # oldest first
    assert capped.timeline_left_out == len(every) - 3
    with gov.session() as s:  # the call it names pages through exactly those left out
        query = parse_qs(urlsplit(capped.earlier_events or "").query)
        assert query["budget_id"] == [budget]
        earlier = repo.events_page(s, PageRequest(1000, query["cursor"][0]), budget_id=budget)
        assert [e.id for e in earlier.items[::-1]] == [e.id for e in every[:-3]]

    harness = failures_of(capped, Category.HARNESS)
    assert [e.message for e in harness.events] == [f"worker {n} crashed" for n in (3, 4, 5)]
    assert (harness.total, harness.left_out, harness.occurrences) == (6, 3, 7)
    assert "The latest 3 of 6 events are listed; the 3 earlier ones are left out" in (
        harness.note or ""
    )
    # the figures count everything: the same as the whole report's
    assert capped.spend.by_phase == whole.spend.by_phase and sum(by_phase(capped).values()) == (
        capped.budget.spent
    )
    assert [(s.id, s.why) for s in capped.stops] == [(s.id, s.why) for s in whole.stops]
    assert capped.stops[0].why is not None  # its decision is long out of the timeline
    out = report_view.ReportOut.model_validate(capped)
    assert out.timeline_left_out == len(every) - 3 and out.earlier_events == capped.earlier_events
    assert {f.category: (f.count, f.events_left_out) for f in out.failures}[Category.HARNESS] == (
        7,
        3,
    )
    text = render(capped)
    assert "- harness: 6" in text and f"the {len(every) - 3} earlier ones are left out" in text
    assert f"GET {capped.earlier_events} pages through them" in text
    page = report_html.document(capped)
    assert 'data-field="left-out"' in page and "earlier ones are left out" in page


def test_a_failure_category_lists_only_its_latest_few_and_counts_them_all(
    gov: Governor, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(report, "FAILURES_LISTED", 2)
    budget, _, run = pilot(gov)
    crashed(gov, budget, run, range(5))
    r = build(gov, budget)

    harness = failures_of(r, Category.HARNESS)
    assert [e.message for e in harness.events] == ["worker 3 crashed", "worker 4 crashed"]
    every = [  # the timeline lists them all
        e for e in r.timeline if e.category is Category.HARNESS and e.severity is not Severity.INFO
    ]
    assert r.timeline_left_out == 0 and len(every) >= 5
    assert (harness.total, harness.left_out) == (len(every), len(every) - 2)
    assert harness.occurrences == sum(e.count for e in every)
    assert f"The latest 2 of {len(every)} events are listed" in (harness.note or "")


def test_the_html_report_escapes_what_people_typed_and_keeps_every_section(
    gov: Governor,
) -> None:
    budget, _, _ = pilot(gov)
    with gov.session() as s:
        reason = "<script>alert('more')</script> & more"
        extensions.request(s, budget, D(5), reason, Requester.OPERATOR, gov.clock.now())
    page = report_html.document(build(gov, budget))
    assert "<script>" not in page
    assert "&lt;script&gt;alert(&#39;more&#39;)&lt;/script&gt; &amp; more" in page
    sections = ["Runs", "Training metrics", "Spend by phase", "Spend by pod", "Stops"]
    sections += ["Failures by category", "Extensions", "Memory: measured peaks", "Timeline"]
    for heading in sections:
        assert f"<h3>{heading}" in page, heading
    assert "dataloader worker crashed" in page and "last one" in page


def test_peaks_are_shown_next_to_the_preflight_verdicts(gov: Governor) -> None:
    budget = gov.budget(ceiling="500")
    pod = gov.pod(budget)
    gov.run(budget, pod)
    doc = PlanIn.model_validate(
        variant({"hardware.rate_quoted_at": gov.clock.now().date().isoformat()})
    )
    with gov.session() as s:
        admission.check(s, gov.ctx.config, budget, doc.to_plan(), doc.document(), gov.clock.now())
    gov.report(pod, gpu_sample(used_gib=60.0), gpu_sample(used_gib=50.0, index=1))
    gov.clock.advance(5)
    gov.report(pod, gpu_sample(used_gib=70.5), gpu_sample(used_gib=40.0, index=1))
    r = build(gov, budget)
    assert [(p.gpu_uuid, p.peak_used_bytes / 2**30) for p in r.memory.peaks] == [
        ("GPU-0", 70.5),
        ("GPU-1", 50.0),
    ]
    [plan] = r.memory.plans
    text = render(r)
    memory = text[text.index("## Memory") : text.index("## Timeline")]
    assert "| H100 GPU-0 | 70.5 | 80.0 |" in memory
    assert f"| {plan.job_id} | {plan.verdict.value} | H200 | {plan.modeled_gib:.1f} |" in memory


def test_each_runs_metrics_end_at_their_last_values_and_health_findings_are_model_failures(
    gov: Governor,
) -> None:
    budget = gov.budget(ceiling="1000")
    pod = gov.pod(budget)
    flat = HealthRule(Kind.FLATLINE, "reward_variance", Response.WARN, window=3)
    with gov.session() as s:
        spec = lifecycle.RunSpec("rl", pod, heartbeat_timeout_s=3600, health=(flat,))
        run = lifecycle.create(s, gov.ctx.config, budget, spec, gov.clock.now())[0].id
    beats = (
        (1, {"loss": 2.5, "reward_variance": 0.0, "lr": 1e-4}),
        (2, {"loss": 2.0, "reward_variance": 0.0}),
        (3, {"reward_variance": 0.0}),  # flat for 3 beats: the flatline warning
        (4, {"loss": "NaN"}),  # the non_finite stop; the series keeps its last finite value
    )
    at = {}
    for step, metrics in beats:
        gov.clock.advance(10)
        at[step] = gov.clock.now()
        beat = checkins.Heartbeat(step=step, metrics=metrics)
        checkins.check_in(gov.ctx.sessions, gov.ctx.config, run, beat, gov.clock.now())

    r = build(gov, budget)
    out = report_view.ReportOut.model_validate(r)
    last = [(m.name, m.value, m.step, m.at) for m in r.metrics if m.run_id == run]
    assert last == [
        ("loss", 2.0, 2, at[2]),
        ("lr", 1e-4, 1, at[1]),
        ("reward_variance", 0.0, 3, at[3]),
    ]
    assert [(m.run_id, m.run_name, m.name, m.value, m.step) for m in out.metrics] == [
        (run, "rl", "loss", 2.0, 2),
        (run, "rl", "lr", 1e-4, 1),
        (run, "rl", "reward_variance", 0.0, 3),
    ]

    model = failures_of(r, Category.MODEL).events
    assert [(e.severity, e.evidence["rule"], e.evidence["step"]) for e in model] == [
        (Severity.WARNING, "flatline", 3),
        (Severity.CRITICAL, "non_finite", 4),
        (Severity.CRITICAL, "training_health", 4),  # the stop it ordered
    ]
    assert model[-1].message.startswith("Stop ordered (non-finite)")
    assert {f.category: f.count for f in out.failures}[Category.MODEL] == 3

    text = render(r)
    metrics = text[text.index("## Training metrics") : text.index("## Spend by phase")]
    assert "| rl | loss | 2 | 2 |" in metrics
    assert "| rl | lr | 0.0001 | 1 |" in metrics
    assert "| rl | reward_variance | 0 | 3 |" in metrics
    failures = text[text.index("## Failures") : text.index("## Extensions")]
    assert "- model: 3" in failures
    assert "reward_variance has flatlined" in failures and "loss is NaN" in failures


def test_a_run_that_reported_no_metrics_says_so(gov: Governor) -> None:
    budget, _, _ = pilot(gov)
    r = build(gov, budget)
    assert r.metrics == ()
    assert "## Training metrics\n\nThe last value" in render(r)
    assert "No metrics were reported." in render(r)


def test_a_stop_that_took_attempts_without_an_error_says_no_error(gov: Governor) -> None:
    budget, _, _ = pilot(gov)  # the fake cloud answers "pending" for 30 s, then "stopped"
    [stop] = build(gov, budget).stops
    assert stop.attempts > 1 and stop.last_error is None
    text = render(build(gov, budget))
    assert f"  - provider attempts: {stop.attempts}\n" in text
    assert "None" not in text


def test_the_markdown_report_names_pods_with_their_providers_reference_beside(
    gov: Governor,
) -> None:
    budget = gov.budget(ceiling="100")
    with gov.session() as s:
        named = pods.Registration("fake", "pod-1", name="h100-sft")
        pod = pods.register(s, gov.ctx, budget, named, gov.clock.now()).id
    run = gov.run(budget, pod)
    gov.tick(10)
    with gov.session() as s:
        pods.stop_manually(s, gov.ctx, pod, "end of day", gov.clock.now(), by=BY)
    text = render(build(gov, budget))
    runs_md = text[text.index("## Runs") : text.index("## Training metrics")]
    assert f"| job | {run} | h100-sft | running |" in runs_md
    by_pod = text[text.index("## Spend by pod") : text.index("## Stops")]
    assert f"| h100-sft | {pod} | fake pod-1 | — | stopping |" in by_pod
    stops = text[text.index("## Stops") : text.index("## Failures")]
    assert f"- **h100-sft** (fake pod-1, {pod}): `manual`" in stops
    assert "  - asked: Pod stop asked by operator token 'tests' (tok_tests): end of day\n" in stops
    timeline = text[text.index("## Timeline") :]
    assert f"`run:{run}` (run job on pod h100-sft): Run 'job' created" in timeline
    assert f"`pod:{pod}` (pod h100-sft): Pod stop asked" in timeline
    page = report_html.document(build(gov, budget))  # the same names on the HTML report
    assert "<td>h100-sft</td>" in page
    assert f'<b>h100-sft</b> (fake pod-1, <span class="mono">{pod}</span>)' in page
    asked = "<li>asked: Pod stop asked by operator token &#39;tests&#39; (tok_tests): end of day"
    assert asked in page
    assert f'<span class="mono">run:{run}</span> · run job on pod h100-sft</span>' in page


def test_each_admitted_plan_shows_what_it_holds_back_against_what_it_spent(gov: Governor) -> None:
    budget = gov.budget(ceiling="300")
    first = check(gov, budget, plan(gov, "arm-a"))
    check(gov, budget, plan(gov, "arm-b"))
    run = gov.run(budget, register(gov, budget, first.id), timeout_s=10**6)
    gov.beat(run, step=1)
    gov.tick(3600)  # an hour at $3.60 on arm a's pod
    gov.beat(run, step=2, status=RunStatus.FINISHED)

    r = build(gov, budget)
    spent = r.budget.spent
    assert spent > 0
    lines = sorted((p.job_id, p.spent, p.held, p.released) for p in r.memory.admitted)
    assert lines == [("arm-a", spent, D(0), True), ("arm-b", D(0), WORST_CASE, False)]
    # What the plans hold is beside committed spend, never in it
    assert r.budget.held_for_plans == WORST_CASE
    b = r.budget
    assert b.committed == spent + b.shutdown + b.storage_tail + b.reserve < WORST_CASE

    report = report_view.ReportOut.model_validate(r).model_dump(mode="json")
    out = report["memory"]["admitted"]
    assert sorted((p["job_id"], p["spent_usd"], p["held_usd"]) for p in out) == [
        ("arm-a", format_usd(spent), "0.00"),
        ("arm-b", "0.00", format_usd(WORST_CASE)),
    ]
    assert all(p["reserved_usd"] == p["held_usd"] for p in out)  # its former name, still sent
    assert report["budget"]["held_for_plans_usd"] == format_usd(WORST_CASE)
    text = render(r)
    admitted = text[text.index("### Admitted plans") : text.index("## Timeline")]
    assert f"| arm-a | go | $65.20 | {dollars(spent)} | $0.00 | yes |" in admitted
    assert "| arm-b | go | $65.20 | $0.00 | $65.20 | no |" in admitted
    page = report_html.document(r)
    row = page[page.index(f'data-plan-id="{first.id}"') :]
    assert row.index("$0.00") < row.index("yes") < row.index("</tr>")


def test_each_pod_shows_the_last_bill_read_and_the_instant_it_runs_to(gov: Governor) -> None:
    budget = gov.budget(ceiling="100")
    billed, unbilled = gov.pod(budget), gov.pod(budget, ref="pod-2")
    registered = gov.clock.now()
    gov.tick(7200)
    through = registered + timedelta(hours=1)  # the bill lags an hour
    with gov.session() as s:
        bill = Billed(D("3.59"), through, since=registered)
        billing.book_billed(s, billed, bill, gov.clock.now())
    r = build(gov, budget)
    shown = {p.pod_id: p.bill for p in report_view.ReportOut.model_validate(r).spend.by_pod}
    assert shown[billed].model_dump(mode="json") == {
        "billed_usd": "3.59",
        "billed_through": "2026-01-01T13:00:00Z",
    }
    assert shown[unbilled].model_dump() == {"billed_usd": None, "billed_through": None}
    text = render(r)
    by_pod = text[text.index("## Spend by pod") : text.index("## Stops")]
    assert f"| {dollars(D('3.59'))} | 2026-01-01 13:00:00 UTC |" in by_pod
    [row] = [line for line in by_pod.splitlines() if unbilled in line]
    assert row.endswith("| — | no bill read yet |")
    page = report_html.document(r)
    assert "<td>2026-01-01 13:00:00 UTC</td>" in page
    assert page.count("no bill read yet") == 1
