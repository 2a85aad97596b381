"""When a pass is judged stuck: three of its intervals (and half a minute) without finishing,
counted from its last finish or from when its replica began to lead, whichever is later;
never while the database refuses its writes (it waits on the database)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from governor.services.replica.health import Tick, TickLog

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def test_a_pass_is_stale_after_three_intervals_and_half_a_minute() -> None:
    tick = Tick(T0, 5.0)
    assert tick.state(at(45), T0) == "ok"
    assert tick.state(at(45.1), T0) == "stale"
    assert Tick(None, 5.0).state(at(45.1), T0) == "stale"  # never finished since it led


def test_a_replica_that_leads_again_after_an_outage_counts_from_its_new_term() -> None:
    """Its passes could not run while no one led: they are due from the new term on."""
    tick = Tick(T0, 5.0)  # the last finish before a two-minute outage
    term = at(120)
    assert not tick.stale(at(121), term)
    assert not tick.stale(term + timedelta(seconds=45), term)
    assert tick.stale(term + timedelta(seconds=46), term)


def test_a_pass_the_database_refuses_waits_and_is_never_stale() -> None:
    ticks = TickLog()
    ticks.expect("accrue", 5.0)
    ticks.succeeded("accrue", T0)
    ticks.failed("accrue", refused=True)
    [tick] = ticks.ticks().values()
    assert tick.waiting and tick.state(at(3600), T0) == "waiting"

    ticks.failed("accrue")  # it fails for a reason of its own: judged as any pass again
    [tick] = ticks.ticks().values()
    assert not tick.waiting and tick.state(at(3600), T0) == "stale"

    ticks.failed("accrue", refused=True)
    ticks.succeeded("accrue", at(3600))
    [tick] = ticks.ticks().values()
    assert not tick.waiting and tick.state(at(3601), T0) == "ok"
    assert ticks.failures() == {"accrue": 3}
