"""A launch judged: priced at its dearest candidate x nodes x hours, against what its budget
has available or what its plan holds; the reasons carry the arithmetic."""

from __future__ import annotations

from decimal import Decimal

from governor.domain.launch_gate import Candidate, LaunchRequest, Money, decide, price
from governor.domain.rate_card import RateCard

CARD = RateCard.of({"aws:H100": "4", "gcp:A100": "3"})
H100 = Candidate("aws", "H100", 8)
A100 = Candidate("gcp", "A100", 8)
MONEY = Money(Decimal(1000), Decimal(100), Decimal(50))


def rates(c: Candidate) -> object:
    assert c.accelerator is not None
    return CARD.rate(c.provider, c.accelerator, spot=c.spot, region=c.region)


def priced(*candidates: Candidate, nodes: int = 1, hours: str = "10"):  # type: ignore[no-untyped-def]
    return price(LaunchRequest("test", candidates, nodes), Decimal(hours), rates)  # type: ignore[arg-type]


def test_the_dearest_candidate_prices_the_launch() -> None:
    p = priced(A100, H100, nodes=2)
    assert p.candidate == H100
    assert (p.per_hour, p.total) == (Decimal(64), Decimal(640))
    assert p.arithmetic == (
        "8 x H100 at $4.00/h per GPU (rate card aws:h100) x 2 nodes x 10 h = $640.00"
    )


def test_within_what_is_available_it_is_accepted_and_reserves_its_price() -> None:
    decision = decide(
        priced(H100, hours="20"), MONEY, budget="b", require_plan=False, plan=None, plan_holds=None
    )
    assert decision.accepted and decision.reserve == Decimal(640)
    assert "within the $850.00 budget b has available" in decision.reasons[0]


def test_over_what_is_available_it_is_refused_with_the_arithmetic() -> None:
    decision = decide(
        priced(H100, hours="27"), MONEY, budget="b", require_plan=False, plan=None, plan_holds=None
    )
    assert not decision.accepted and decision.reserve == 0
    assert decision.reasons[0].endswith(
        "$1,000.00 remaining - $100.00 held for plans - $50.00 reserved for launches = $850.00."
    )


def test_under_a_plan_it_must_fit_what_the_plan_holds_and_reserves_nothing_more() -> None:
    fits = decide(
        priced(H100), MONEY, budget="b", require_plan=True, plan="p", plan_holds=Decimal(320)
    )
    assert fits.accepted and fits.reserve == 0
    over = decide(
        priced(H100), MONEY, budget="b", require_plan=True, plan="p", plan_holds=Decimal(319)
    )
    assert not over.accepted and "more than plan p may still cost ($319.00)" in over.reasons[0]


def test_no_plan_or_no_rate_refuses_where_a_plan_is_required_and_warns_elsewhere() -> None:
    unplanned = decide(
        priced(H100), MONEY, budget="b", require_plan=True, plan=None, plan_holds=None
    )
    assert not unplanned.accepted and "requires an admitted plan" in unplanned.reasons[0]
    b200 = Candidate("aws", "B200", 1)
    required = decide(
        priced(b200), MONEY, budget="b", require_plan=True, plan="p", plan_holds=Decimal(1)
    )
    assert not required.accepted and "no rate is known for 1x B200 on aws" in required.reasons[0]
    let_through = decide(
        priced(b200), MONEY, budget="b", require_plan=False, plan=None, plan_holds=None
    )
    assert let_through.accepted and let_through.reserve == 0
    assert "No rate is known for 1x B200 on aws" in let_through.warnings[0]


def test_a_launch_without_gpus_costs_nothing_here() -> None:
    p = priced(Candidate("aws", None))
    assert (p.total, p.unpriced) == (0, ())
