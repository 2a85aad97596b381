"""A team's periods in its time zone, and its figures: what is left, when it is reached,
the ceiling that binds a budget first, and a refusal's arithmetic."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from governor.domain.teams import (
    EVERY_TEAM,
    Period,
    PeriodKind,
    TeamFigures,
    TeamScope,
    period_at,
    time_zone,
)

DECLARED = datetime(2026, 1, 10, 15, 0, tzinfo=UTC)


def at(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)  # type: ignore[misc]


def test_a_calendar_month_runs_between_local_midnights() -> None:
    january = period_at(at(2026, 1, 31, 22, 59), "Europe/Berlin", PeriodKind.MONTH, None, DECLARED)
    assert (january.start, january.end) == (at(2025, 12, 31, 23), at(2026, 1, 31, 23))
    february = period_at(at(2026, 1, 31, 23), "Europe/Berlin", PeriodKind.MONTH, None, DECLARED)
    assert february.start == january.end
    utc = period_at(at(2026, 12, 31, 23, 59), "UTC", PeriodKind.MONTH, None, DECLARED)
    assert (utc.start, utc.end) == (at(2026, 12, 1), at(2027, 1, 1))


def test_a_month_follows_daylight_saving() -> None:
    march = period_at(at(2026, 3, 15), "Europe/Berlin", PeriodKind.MONTH, None, DECLARED)
    assert march.end - march.start == timedelta(hours=31 * 24 - 1)
    assert (march.start, march.end) == (at(2026, 2, 28, 23), at(2026, 3, 31, 22))


def test_periods_of_days_follow_each_other_from_the_day_the_ceiling_was_declared() -> None:
    zone = "America/New_York"  # declared on Jan 10 at 10:00 local time
    first = period_at(DECLARED, zone, PeriodKind.DAYS, 7, DECLARED)
    assert (first.start, first.end) == (at(2026, 1, 10, 5), at(2026, 1, 17, 5))
    second = period_at(first.end, zone, PeriodKind.DAYS, 7, DECLARED)
    assert (second.start, second.end) == (first.end, at(2026, 1, 24, 5))
    assert period_at(second.end - timedelta(seconds=1), zone, PeriodKind.DAYS, 7, DECLARED) == (
        second
    )
    with pytest.raises(ValueError, match="days >= 1"):
        period_at(DECLARED, zone, PeriodKind.DAYS, None, DECLARED)


def test_a_time_zone_is_an_iana_name() -> None:
    assert str(time_zone("Asia/Kolkata")) == "Asia/Kolkata"
    for name in ("CEST", "Mars/Olympus", "", "../../etc/passwd"):
        with pytest.raises(ValueError, match="IANA"):
            time_zone(name)


def figures(spent: str, shutdown: str = "0", burn: str = "0", held: bool = False) -> TeamFigures:
    period = Period(at(2026, 1, 1), at(2026, 2, 1))
    return TeamFigures(
        Decimal(100), Decimal(spent), Decimal(shutdown), Decimal(burn), period, held=held
    )


def test_what_is_left_and_when_it_is_reached() -> None:
    f = figures("60", shutdown="10", burn="5")
    assert (f.committed, f.remaining, f.left, f.reached) == (70, 30, 40, False)
    assert figures("90", shutdown="10").reached
    assert figures("10", held=True).reached  # the hold outlives the stop's released margin
    assert f.forecast(at(2026, 1, 31)) == Decimal(60 + 5 * 24)


def test_the_ceiling_that_binds_a_budget_first() -> None:
    f = figures("60", shutdown="10", burn="4")  # the team's 30 left at 4/h: 7.5 h
    # a budget burning 1/h of the team's 4 reaches the team's stop with 7.5 more committed
    assert f.ceiling_for(Decimal(20), Decimal(1)) == Decimal("27.5")
    assert figures("95", shutdown="10").ceiling_for(Decimal(20), Decimal(1)) == 20
    assert figures("60").ceiling_for(Decimal(20), Decimal(0)) == 60  # nothing burns


def test_a_refusal_shows_the_arithmetic() -> None:
    f = figures("60.5")
    assert f.refusal("a budget's ceiling", Decimal("39.50")) is None
    refused = f.refusal("a budget's ceiling", Decimal("40"))
    assert refused is not None
    assert refused.startswith(
        "a budget's ceiling of $40.00 is more than the team has left this period: "
        "$39.50 = ceiling $100.00 - spent $60.50 (2026-01-01 00:00 to 2026-02-01 00:00 UTC)"
    )


def test_a_scope_sees_its_teams_and_every_team_sees_all() -> None:
    assert EVERY_TEAM.sees("team_x")
    scope = TeamScope(frozenset({"team_a"}))
    assert scope.sees("team_a") and not scope.sees("team_b")
