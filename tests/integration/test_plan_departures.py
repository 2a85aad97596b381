"""A plan kept true (SQLite and PostgreSQL): a pod billed far from its plan's quote, and a plan
whose spend passes its worst case, are each warned of once, with both figures and the plan's
reservation checked again."""

from __future__ import annotations

from decimal import Decimal

from governor.db import repository as repo
from governor.domain.model import Severity
from governor.domain.preflight.rules import Verdict
from tests.integration.conftest import Governor, check, plan, register


def warnings(gov: Governor, subject: str) -> list[str]:
    with gov.session() as s:
        return [e.message for e in repo.events(s, subject=subject, severity=Severity.WARNING)]


def test_a_pod_billed_far_over_its_plans_quote_is_warned_of_once(gov: Governor) -> None:
    budget = gov.budget("500")
    admitted = check(gov, budget, plan(gov, **{"hardware.rate_usd_per_gpu_hour": 2.00}))
    assert admitted.verdict is Verdict.GO
    pod = register(gov, budget, admitted.id)  # the provider bills $3.60/h
    for _ in range(3):
        gov.tick(60)
    [told] = warnings(gov, f"pod:{pod}")
    assert "bills $3.60/h, +80% from the $2.00/h its plan 'arm-a' quoted" in told
    assert "contingency ±15%" in told
    assert "Its reservation checked again: at this rate the plan's worst case is" in told
    assert "the budget still covers it" in told
    with gov.session() as s:
        [event] = [e for e in repo.events(s, subject=f"pod:{pod}") if "quoted" in e.message]
        evidence = event.evidence
    assert (evidence["billed_usd_per_hour"], evidence["quoted_usd_per_hour"]) == ("3.60", "2.00")
    assert evidence["departure"] == 0.8 and evidence["contingency"] == 0.15
    assert Decimal(evidence["worst_case_at_billed_rate_usd"]) > admitted.worst_case_usd


def test_a_pod_billed_within_the_contingency_is_not_warned_of(gov: Governor) -> None:
    budget = gov.budget("500")
    admitted = check(gov, budget, plan(gov, **{"hardware.rate_usd_per_gpu_hour": 3.30}))
    pod = register(gov, budget, admitted.id)  # $3.60/h: +9%
    gov.tick(60)
    assert not [m for m in warnings(gov, f"pod:{pod}") if "quoted" in m]


def test_a_plan_whose_spend_passes_its_worst_case_is_warned_of_once(gov: Governor) -> None:
    budget = gov.budget("500")
    admitted = check(gov, budget, plan(gov, **{"hardware.rate_usd_per_gpu_hour": 3.60}))
    register(gov, budget, admitted.id)
    hours = int(admitted.worst_case_usd / Decimal("3.60")) + 2
    for _ in range(hours):
        gov.tick(3600)
    [told] = warnings(gov, f"plan:{admitted.id}")
    assert f"past its worst case of ${admitted.worst_case_usd:.2f}" in told
    assert "billing $3.60/h against $3.60/h quoted" in told
    assert "Its reservation checked again: it holds nothing more" in told
    with gov.session() as s:
        [event] = repo.events(s, subject=f"plan:{admitted.id}", severity=Severity.WARNING)
        assert Decimal(event.evidence["spent_usd"]) > admitted.worst_case_usd


def test_a_pod_billed_far_under_its_plans_quote_is_told_as_information(gov: Governor) -> None:
    budget = gov.budget("500")
    admitted = check(gov, budget, plan(gov))  # quoted $4.59/h; the provider bills $3.60/h
    pod = register(gov, budget, admitted.id)
    gov.tick(60)
    assert not [m for m in warnings(gov, f"pod:{pod}") if "quoted" in m]
    with gov.session() as s:
        [told] = [e for e in repo.events(s, subject=f"pod:{pod}") if "quoted" in e.message]
    assert told.severity is Severity.INFO
    assert "bills $3.60/h, -22% from the $4.59/h its plan 'arm-a' quoted" in told.message
