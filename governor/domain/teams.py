"""Teams: an organisation holds teams, a team holds budgets. The default team, which holds
every budget declared without one; which teams a caller may see; a team's time zone."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from enum import StrEnum
from functools import cache
from zoneinfo import ZoneInfo, available_timezones

from governor.domain.money import dollars

DEFAULT_TEAM_ID = "team_default"
DEFAULT_TEAM_NAME = "default"
DEFAULT_TIME_ZONE = "UTC"


@dataclass(frozen=True)
class TeamScope:
    """The teams a caller may see: `team_ids` None is every team (an org-wide caller)."""

    team_ids: frozenset[str] | None = None

    def sees(self, team_id: str) -> bool:
        return self.team_ids is None or team_id in self.team_ids


EVERY_TEAM = TeamScope()


def time_zone(name: str) -> ZoneInfo:
    """The IANA time zone so named (`Europe/Berlin`, `UTC`); ValueError if there is none."""
    if name not in _zone_names():
        raise ValueError(f"{name!r} is not an IANA time zone name (e.g. 'Europe/Berlin', 'UTC')")
    return ZoneInfo(name)


@cache
def _zone_names() -> frozenset[str]:
    return frozenset(available_timezones() | {"UTC"})


class PeriodKind(StrEnum):
    MONTH = "month"  # the calendar month, in the team's time zone
    DAYS = "days"  # every N days from the local midnight of the day the ceiling was declared


@dataclass(frozen=True)
class Period:
    """One period of a team's ceiling: [start, end), both aware UTC."""

    start: datetime
    end: datetime

    def hours_left(self, now: datetime) -> Decimal:
        return Decimal(max(0.0, (self.end - now).total_seconds())) / Decimal(3600)


def period_at(
    now: datetime, zone: str, kind: PeriodKind, days: int | None, declared_at: datetime
) -> Period:
    """The period of a team's ceiling that holds `now`, its bounds at local midnights of the
    team's time zone (a calendar month's first day; or every `days` days from the day the
    ceiling was declared)."""
    tz = time_zone(zone)
    local = now.astimezone(tz)
    if kind is PeriodKind.MONTH:
        first = local.date().replace(day=1)
        following = (first + timedelta(days=32)).replace(day=1)
        return Period(_midnight(first, tz), _midnight(following, tz))
    if days is None or days < 1:
        raise ValueError("a period of days needs days >= 1")
    origin = declared_at.astimezone(tz).date()
    elapsed = (local.date() - origin).days
    start = origin + timedelta(days=elapsed - elapsed % days)
    return Period(_midnight(start, tz), _midnight(start + timedelta(days=days), tz))


def _midnight(day: date, tz: ZoneInfo) -> datetime:
    return datetime.combine(day, time(), tzinfo=tz).astimezone(UTC)


@dataclass(frozen=True)
class TeamFigures:
    """A team's money in one period: its ceiling (with the extensions approved in the
    period), what its budgets spent in the period, and what stopping its pods that bill
    compute will still cost (the same margin a budget's committed spend carries)."""

    ceiling: Decimal
    spent: Decimal
    shutdown: Decimal
    burn_per_hour: Decimal
    period: Period
    held: bool = False  # it reached its ceiling earlier in the period

    @property
    def committed(self) -> Decimal:
        return self.spent + self.shutdown

    @property
    def left(self) -> Decimal:
        """What a budget may still be declared with (or extended by): the ceiling less the
        period's spend."""
        return self.ceiling - self.spent

    @property
    def remaining(self) -> Decimal:
        return self.ceiling - self.committed

    @property
    def reached(self) -> bool:
        """At its ceiling: committed spend reached it, or did earlier in the period (a stop
        releases its margin, not the hold)."""
        return self.held or self.committed >= self.ceiling

    def forecast(self, now: datetime) -> Decimal:
        """The period's spend at its end, at the current burn."""
        return self.spent + self.burn_per_hour * self.period.hours_left(now)

    def ceiling_for(self, committed: Decimal, burn_per_hour: Decimal) -> Decimal:
        """The ceiling at which a budget with this committed spend and burn stops when the
        team's ceiling would: its committed spend at the instant the team's committed spend
        reaches the team's ceiling, at the current burns."""
        if self.reached:
            return committed
        if self.burn_per_hour <= 0:
            return committed + self.remaining  # not burning: the team's whole room
        return committed + self.remaining * burn_per_hour / self.burn_per_hour

    def refusal(self, what: str, amount: Decimal) -> str | None:
        """Why `amount` (a budget's ceiling, or an extension) does not fit in what the team
        has left this period, with the arithmetic; None if it fits."""
        if amount <= self.left:
            return None
        return (
            f"{what} of {dollars(amount)} is more than the team has left this period: "
            f"{dollars(self.left)} = ceiling {dollars(self.ceiling)} - spent "
            f"{dollars(self.spent)} ({self.period.start:%Y-%m-%d %H:%M} to "
            f"{self.period.end:%Y-%m-%d %H:%M} UTC)"
        )
