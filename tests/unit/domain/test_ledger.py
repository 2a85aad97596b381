from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from governor.domain.ledger import (
    BudgetTerms,
    PodMeter,
    PodPosition,
    accrue,
    committed_in_parts,
    figures,
    forecast_at_completion,
)
from governor.domain.model import ChargeKind, PodState

T0 = datetime(2026, 1, 1, tzinfo=UTC)
D = Decimal


def pod(state: PodState = PodState.RUNNING, **kw: object) -> PodMeter:
    values: dict[str, object] = {
        "state": state,
        "hourly_rate": D("3.60"),
        "storage_gb": D(100),
        "storage_usd_per_gb_month": D("0.10"),
        "stopped_storage_usd_per_gb_month": D("0.20"),
        "accrued_until": T0,
        "stop_latency_s": 30.0,
    }
    values.update(kw)
    return PodMeter(**values)  # type: ignore[arg-type]


def terms(
    ceiling: str = "100",
    extensions: str = "0",
    reserve: str = "0",
    tail: str = "0",
    recorded: str = "0",
) -> BudgetTerms:
    return BudgetTerms(D(ceiling), D(extensions), D(reserve), D(tail), D(recorded))


@pytest.mark.parametrize(
    ("state", "seconds", "compute", "storage"),
    [
        (PodState.RUNNING, 3600, D("3.60"), D("10") / D("730")),
        (PodState.STOPPING, 1800, D("1.80"), D("5") / D("730")),
        (
            PodState.STOPPED,
            3600,
            None,
            D("20") / D("730"),
        ),  # storage keeps billing at the stopped rate
        (PodState.GONE, 3600, None, None),
    ],
)
def test_accrual_charges_the_state_rates(
    state: PodState, seconds: int, compute: Decimal | None, storage: Decimal | None
) -> None:
    charges = {c.kind: c.amount for c in accrue(pod(state), T0 + timedelta(seconds=seconds))}
    assert charges.get(ChargeKind.COMPUTE) == compute
    expected_storage = None if storage is None else storage.quantize(D("0.000001"))
    assert charges.get(ChargeKind.STORAGE) == expected_storage


def test_meters_that_share_rates_but_not_state_or_storage_keep_their_own_rates() -> None:
    # Rates are remembered by state, rates and storage: one pod's never stand in for another's.
    for _ in range(2):  # the second round finds every meter's rates remembered
        running, stopped, gone = (
            pod(s) for s in (PodState.RUNNING, PodState.STOPPED, PodState.GONE)
        )
        bigger = pod(storage_gb=D(200))
        assert (running.compute_per_hour, running.storage_per_hour) == (D("3.60"), D(10) / 730)
        assert running.burn_per_hour == D("3.60") + D(10) / 730
        assert (stopped.compute_per_hour, stopped.storage_per_hour) == (0, D(20) / 730)
        assert stopped.burn_per_hour == stopped.stopped_storage_per_hour == D(20) / 730
        assert (gone.burn_per_hour, gone.stopped_storage_per_hour) == (0, 0)
        assert bigger.storage_per_hour == D(20) / 730


def test_accrual_runs_from_the_last_accrued_instant_so_downtime_is_charged() -> None:
    meter = pod(storage_gb=D(0), accrued_until=T0)
    down_for_an_hour = T0 + timedelta(hours=1)
    [charge] = accrue(meter, down_for_an_hour)
    assert (charge.start, charge.end, charge.amount) == (T0, down_for_an_hour, D("3.60"))


def test_accrual_is_cut_at_every_utc_hour_so_no_entry_spans_two_hours_or_two_days() -> None:
    start = datetime(2026, 1, 1, 22, 40, tzinfo=UTC)
    meter = pod(storage_gb=D(0), accrued_until=start)
    charges = accrue(meter, datetime(2026, 1, 2, 0, 15, tzinfo=UTC))
    assert [(c.start.strftime("%d %H:%M"), c.end.strftime("%d %H:%M")) for c in charges] == [
        ("01 22:40", "01 23:00"),
        ("01 23:00", "02 00:00"),
        ("02 00:00", "02 00:15"),
    ]
    assert [c.amount for c in charges] == [D("1.20"), D("3.60"), D("0.90")]


def test_nothing_accrues_twice_for_the_same_instant() -> None:
    meter = pod(accrued_until=T0 + timedelta(minutes=5))
    assert accrue(meter, T0 + timedelta(minutes=5)) == []
    assert accrue(meter, T0) == []


@pytest.mark.parametrize(
    ("case", "kw", "spent", "committed"),
    [
        # spent 3.60 after an hour; shutdown = 3.60/h x (grace 300 + latency 30 + reaction 20) s
        ("plain", {}, "3.60", "3.95"),
        ("reserve", {"reserve": "10"}, "3.60", "13.95"),
        # storage tail: 100 GB x $0.20/GB-month x 730 h / 730 = $20 for a month
        ("tail", {"tail": "730"}, "3.60", "23.95"),
    ],
)
def test_committed_is_spent_plus_shutdown_plus_tail_plus_reserve(
    case: str, kw: dict[str, str], spent: str, committed: str
) -> None:
    gigabytes = D(100) if case == "tail" else D(0)
    meter = pod(storage_gb=gigabytes, storage_usd_per_gb_month=D(0))
    position = PodPosition(meter, 300.0)
    f = figures(terms(**kw, recorded="3.60"), [position], T0, reaction_s=20.0)
    assert f.spent == D(spent)
    assert f.committed == D(committed)
    # its parts, each as the formula names it, add up to it
    assert f.shutdown == D("0.35")
    assert f.storage_tail == (D(20) if case == "tail" else 0)
    assert f.reserve == D(kw.get("reserve", "0"))
    assert f.spent + f.shutdown + f.storage_tail + f.reserve == f.committed


@pytest.mark.parametrize(
    ("spent", "reserve", "ceiling", "extension", "said"),
    [
        # below the ceiling (its stop margin released): any extension, at least a cent
        ("10", "5", "100", "0.01", "$15.00 committed (spent $10.00 + shutdown $0.00 + storage tail "
         "$0.00 + reserve $5.00)"),
        # at it exactly: a cent puts the ceiling above committed spend
        ("30", "70", "100", "0.01", None),
        # $0.24 spent of $40 with a $39.80 reserve: the reserve is why it stopped
        ("0.24", "39.8", "40", "0.05", "$40.04 committed (spent $0.24 + shutdown $0.00 + storage "
         "tail $0.00 + reserve $39.80)"),
        # over by a fraction of a cent: the next whole cent above
        ("100.004", "0", "100", "0.01", None),
        ("100.011", "0", "100", "0.02", None),
    ],
)  # fmt: skip
def test_a_budget_at_its_ceiling_says_the_least_extension_that_lets_it_go_on(
    spent: str, reserve: str, ceiling: str, extension: str, said: str | None
) -> None:
    f = figures(terms(ceiling, reserve=reserve, recorded=spent), [], T0, 0.0)
    assert f.extension_to_go_on == D(extension)
    assert f.effective_ceiling + f.extension_to_go_on > f.committed
    if f.extension_to_go_on > D("0.01"):  # and a cent less would not do
        assert f.effective_ceiling + f.extension_to_go_on - D("0.01") <= f.committed
    if said is not None:
        assert committed_in_parts(f) == said


def test_figures_include_what_has_not_been_accrued_yet() -> None:
    meter = pod(storage_gb=D(0), accrued_until=T0)
    f = figures(terms(recorded="1.00"), [PodPosition(meter, 0.0)], T0 + timedelta(minutes=10), 0.0)
    assert f.spent == D("1.60")


def test_effective_ceiling_adds_approved_extensions_and_remaining_uses_committed() -> None:
    meter = pod(storage_gb=D(0))
    f = figures(terms("100", extensions="50", recorded="40"), [PodPosition(meter, 0.0)], T0, 0.0)
    assert f.effective_ceiling == D(150)
    assert f.remaining == D(150) - f.committed


def test_projected_exhaustion_follows_the_burn_rate() -> None:
    meter = pod(hourly_rate=D(10), storage_gb=D(0), stop_latency_s=0.0)
    f = figures(terms("100", recorded="40"), [PodPosition(meter, 0.0)], T0, 0.0)
    assert f.burn_per_hour == D(10)
    assert f.projected_exhaustion_at == T0 + timedelta(hours=6)


def test_no_exhaustion_without_burn() -> None:
    f = figures(terms(recorded="5"), [PodPosition(pod(PodState.GONE), 0.0)], T0, 0.0)
    assert f.burn_per_hour == 0
    assert f.projected_exhaustion_at is None


def test_a_stopped_pod_adds_no_shutdown_cost() -> None:
    running = figures(terms(recorded="1"), [PodPosition(pod(storage_gb=D(0)), 300.0)], T0, 0.0)
    stopped = figures(
        terms(recorded="1"), [PodPosition(pod(PodState.STOPPED, storage_gb=D(0)), 300.0)], T0, 0.0
    )
    assert running.committed > running.spent
    assert stopped.committed == stopped.spent


@pytest.mark.parametrize(
    ("steps_left", "steps_per_s", "expected"),
    [
        (3600, 1.0, "13.60"),  # an hour more at $10/h on top of committed $3.60
        (0, 1.0, "3.60"),
        (100, 0.0, None),
    ],
)
def test_forecast_at_completion(steps_left: int, steps_per_s: float, expected: str | None) -> None:
    meter = pod(hourly_rate=D(10), storage_gb=D(0), stop_latency_s=0.0)
    f = figures(terms(recorded="3.60"), [PodPosition(meter, 0.0)], T0, 0.0)
    result = forecast_at_completion(f, steps_left, steps_per_s)
    assert result == (None if expected is None else D(expected))
