"""Teams: an organisation holds teams, a team holds budgets. The default team, which holds
every budget declared without one; which teams a caller may see; a team's time zone."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from zoneinfo import ZoneInfo, available_timezones

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
