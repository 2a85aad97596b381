"""Preflight admission on the real schema: verdicts judged on the budget's real money left,
kept with the budget, and read back in order (SQLite and PostgreSQL)."""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any

import pytest

from governor.db import repository as repo
from governor.db.tables import PlanCheckRow
from governor.domain.errors import Invalid, NotFound
from governor.domain.paging import FIRST
from governor.domain.preflight.rules import Verdict
from governor.services.plans import admission
from governor.services.plans.document import PlanIn
from tests.integration.conftest import Governor
from tests.plans import variant

D = Decimal
WORST_CASE = D("65.204859")  # the reference plan at max hours, storage and 15% contingency


def fresh(gov: Governor, changes: dict[str, Any] | None = None) -> dict[str, Any]:
    """The reference plan with its rate quoted today."""
    return variant(
        {"hardware.rate_quoted_at": gov.clock.now().date().isoformat(), **(changes or {})}
    )


def submit(gov: Governor, budget_id: str, doc: dict[str, Any]) -> PlanCheckRow:
    body = PlanIn.model_validate(doc)
    with gov.session() as s:
        row = admission.check(
            s, gov.ctx.config, budget_id, body.to_plan(), body.document(), gov.clock.now()
        )
        s.expunge(row)
        return row


def test_a_verdict_is_kept_with_its_plan_reasons_and_figures(gov: Governor) -> None:
    budget = gov.budget(ceiling="500")
    row = submit(gov, budget, fresh(gov))
    assert row.verdict is Verdict.GO
    assert row.worst_case_usd == WORST_CASE
    assert row.available_usd == D(450)  # $500 remaining less the $50 preflight reserve
    assert row.modeled_gib == pytest.approx(60.64, abs=0.01)
    with gov.session() as s:
        [stored] = repo.plan_checks_of(s, budget)
        assert stored.plan["job_id"] == "pilot-gemma3-lora-001"
        assert stored.plan["schema"] == "preflight-plan/0.1"
        assert [r["rule"] for r in stored.reasons][-2:] == ["memory_fit", "cost_fit"]
        assert stored.figures["cost"]["worst_case_usd"] == "65.204859"
        assert stored.figures["memory"]["usable_gib"] == 139.72
        assert stored.created_at == gov.clock.now()
        [event] = repo.events(s, budget_id=budget, subject=f"plan:{row.id}")
        assert event.evidence["verdict"] == "go"
        assert "go" in event.message


def test_the_cost_is_judged_on_the_budgets_real_remaining_money(gov: Governor) -> None:
    budget = gov.budget(ceiling="100", reserve="10")
    # Nothing spent: $90 remaining after the budget's reserve, $70 after the preflight one.
    first = submit(gov, budget, fresh(gov))
    assert (first.verdict, first.available_usd) == (Verdict.GO, D(70))

    gov.pod(budget)  # the fake cloud bills $3.60 an hour
    gov.tick(2 * 3600)
    remaining = gov.book(budget).figures.remaining
    assert remaining < D("85.20")  # 2 hours spent and the pod's own shutdown cost
    second = submit(gov, budget, fresh(gov))
    assert second.verdict is Verdict.NO_GO
    assert second.available_usd == remaining - 20
    assert second.available_usd < WORST_CASE
    assert second.reasons[-1]["rule"] == "cost_fit"
    assert second.reasons[-1]["verdict"] == "no_go"

    with gov.session() as s:
        kept = repo.plan_checks_of(s, budget)
    assert [r.id for r in kept] == [first.id, second.id]
    assert [r.verdict for r in kept] == [Verdict.GO, Verdict.NO_GO]


def test_verdicts_are_kept_per_budget(gov: Governor) -> None:
    mine, other = gov.budget(), gov.budget()
    no_canary = fresh(gov, {"phases.1.name": "warmup"})
    row = submit(gov, mine, no_canary)
    assert row.verdict is Verdict.NO_GO
    assert row.reasons[0]["rule"] == "canary_before_train"
    with gov.session() as s:
        assert [r.id for r in admission.history(s, mine, FIRST).items] == [row.id]
        assert admission.history(s, other, FIRST).items == []
        with pytest.raises(NotFound):
            admission.history(s, "bud_missing", FIRST)


def test_an_absurd_worst_case_is_refused_not_stored(gov: Governor) -> None:
    budget = gov.budget()
    huge = {
        "hardware.gpu_count": 1024,
        "hardware.nodes": 1024,
        "hardware.rate_usd_per_gpu_hour": 1e8,
    }
    with pytest.raises(Invalid, match=re.escape("over $100,000,000.00")):
        submit(gov, budget, fresh(gov, huge))
    with gov.session() as s:
        assert repo.plan_checks_of(s, budget) == []
