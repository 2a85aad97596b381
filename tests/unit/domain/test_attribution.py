"""Spend by phase: each charge split over the phase the pod's run was in, to the micro-dollar."""

from datetime import UTC, datetime, timedelta
from decimal import Decimal

from governor.domain.attribution import (
    STOPPED_STORAGE,
    UNPHASED,
    PhaseSpan,
    attribute,
    phase_at,
    spans_of,
)
from governor.domain.ledger import Charge
from governor.domain.model import ChargeKind, Phase
from governor.domain.money import ZERO

T0 = datetime(2026, 1, 1, tzinfo=UTC)
D = Decimal


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def compute(amount: str, start: float, end: float) -> Charge:
    return Charge(ChargeKind.COMPUTE, D(amount), at(start), at(end))


def nonzero(totals: dict[str, Decimal]) -> dict[str, Decimal]:
    return {k: v for k, v in totals.items() if v != ZERO}


def test_a_run_s_phases_last_until_the_next_change_and_the_last_until_it_ended() -> None:
    changes = [(at(100), Phase.TRAINING), (at(0), Phase.LOADING)]
    assert spans_of(changes, at(300)) == [
        PhaseSpan(Phase.LOADING, at(0), at(100)),
        PhaseSpan(Phase.TRAINING, at(100), at(300)),
    ]
    assert spans_of([(at(0), Phase.EXPORT)], None) == [PhaseSpan(Phase.EXPORT, at(0), None)]
    assert spans_of([], at(5)) == []


def test_a_charge_is_split_in_proportion_to_the_time_in_each_phase() -> None:
    spans = spans_of([(at(0), Phase.LOADING), (at(30), Phase.TRAINING)], None)
    totals = attribute([compute("0.100000", 0, 100)], spans, None)
    assert nonzero(totals) == {"loading": D("0.03"), "training": D("0.07")}


def test_the_parts_add_up_to_the_charge_exactly() -> None:
    spans = spans_of(
        [(at(0), Phase.CANARY), (at(1), Phase.TRAINING), (at(2), Phase.CHECKPOINTING)], None
    )
    charges = [compute("0.000010", 0, 3), compute("0.333333", 0, 3)]
    totals = attribute(charges, spans, None)
    assert sum(totals.values()) == D("0.333343")
    assert all(v.as_tuple().exponent >= -6 for v in totals.values())


def test_time_with_no_phase_is_unphased() -> None:
    spans = spans_of([(at(50), Phase.TRAINING)], at(80))
    totals = attribute([compute("1.00", 0, 100)], spans, None)
    assert nonzero(totals) == {UNPHASED: D("0.70"), "training": D("0.30")}


def test_storage_after_the_stop_is_its_own_bucket() -> None:
    spans = spans_of([(at(0), Phase.TRAINING)], None)
    storage = Charge(ChargeKind.STORAGE, D("0.25"), at(100), at(200))
    totals = attribute([compute("0.10", 0, 100), storage], spans, stopped_at=at(100))
    assert nonzero(totals) == {"training": D("0.10"), STOPPED_STORAGE: D("0.25")}


def test_a_zero_length_charge_goes_to_the_phase_at_its_instant() -> None:
    spans = spans_of([(at(0), Phase.EVALUATION)], None)
    assert nonzero(attribute([compute("0.01", 5, 5)], spans, None)) == {"evaluation": D("0.01")}


def test_with_two_runs_on_a_pod_the_most_recent_phase_wins() -> None:
    spans = [
        PhaseSpan(Phase.TRAINING, at(0), None),
        PhaseSpan(Phase.EVALUATION, at(10), at(20)),
    ]
    assert [phase_at(spans, at(s)) for s in (5, 15, 25)] == ["training", "evaluation", "training"]
