"""The dashboard's detail pages on both databases: a budget's card, events and report; a run's
metric history, its pod's GPU history over the run, its phases and its events."""

from __future__ import annotations

import pytest

from governor.domain.errors import NotFound
from governor.domain.model import Phase
from governor.services.jobs import checkins
from governor.services.view import pages
from tests.integration.conftest import Governor, gpu_sample


def test_a_budget_page_holds_its_card_its_events_and_its_report(gov: Governor) -> None:
    budget = gov.budget(ceiling="1000")
    gov.pod(budget)
    other = gov.budget(ceiling="50")
    gov.tick(600)
    with gov.session() as s:
        page = pages.budget_page(s, gov.ctx.config, budget, gov.clock.now())
    assert page.budget.id == budget and page.at == gov.clock.now()
    assert page.events and {e.budget_id for e in page.events} == {budget}
    assert page.events[-1].message.startswith("Budget 'pilot' declared")
    assert page.report.budget.spent == page.budget.spent > 0
    assert all(e.budget_id != other for e in page.report.timeline)
    with gov.session() as s, pytest.raises(NotFound):
        pages.budget_page(s, gov.ctx.config, "bud_nope", gov.clock.now())


def test_a_run_page_holds_its_metric_history_gpu_history_and_phases(gov: Governor) -> None:
    budget = gov.budget(ceiling="1000")
    pod = gov.pod(budget)
    gov.report(pod, gpu_sample(10, 5, 0))  # before the run: not its history
    gov.clock.advance(30)
    run = gov.run(budget, pod, timeout_s=3600)
    for step, phase, loss in ((1, Phase.LOADING, None), (2, Phase.TRAINING, 2.5), (3, None, 2.0)):
        gov.clock.advance(10)
        gov.report(pod, gpu_sample(90, 60 + step, 0))
        metrics = {"loss": loss, "lr": 1e-4} if loss is not None else None
        beat = checkins.Heartbeat(step=step, phase=phase, metrics=metrics)
        checkins.check_in(gov.ctx.sessions, gov.ctx.config, run, beat, gov.clock.now())

    with gov.session() as s:
        page = pages.run_page(s, gov.ctx.config, run, gov.clock.now())
    assert (page.run.id, page.budget_id, page.pod.id, page.ended_at) == (run, budget, pod, None)
    assert [p.phase for p in page.phases] == [Phase.LOADING, Phase.TRAINING]
    assert [m.name for m in page.metrics] == ["loss", "lr"]  # loss is watched on every run
    assert [(p.step, p.value) for p in page.metrics[0].points] == [(2, 2.5), (3, 2.0)]
    [gpu] = page.gpus
    assert [p.utilization_pct for p in gpu.points] == [90, 90, 90]  # from the run's start on
    assert page.events and all(e.subject in (f"run:{run}", f"pod:{pod}") for e in page.events)
    with gov.session() as s, pytest.raises(NotFound):
        pages.run_page(s, gov.ctx.config, "run_nope", gov.clock.now())
