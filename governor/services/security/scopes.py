"""What a caller scoped to some teams may reach through a path or a query's filter: another
team, or its budget, pod, run, extension, plan, launch or token, answers 404, as one that does
not exist does, so a team learns nothing of another's. An org-wide caller, and a job's or
agent's token (bound to its own run or pod instead), is asked only about a query's filters
(that what it names exists): paths cost them nothing.
"""

from __future__ import annotations

from collections.abc import Mapping

from sqlalchemy.orm import Session

from governor.db import team_scope
from governor.domain.errors import Forbidden, NotFound
from governor.services.security.tokens import Principal

# the path parameters that name an object of one team, and what each names
_OWNED = (
    ("budget_id", "budget"),
    ("pod_id", "pod"),
    ("run_id", "run"),
    ("extension_id", "extension"),
    ("plan_id", "plan"),
    ("launch_id", "launch"),
)
# every path parameter a team-scoped caller is checked against
SCOPED = frozenset({name for name, _ in _OWNED} | {"team_id", "token_id", "node"})
# the query parameters that filter or qualify by an object of one team (`?budget_id=`)
FILTERS = frozenset(name for name, _ in _OWNED)


def require_filters_seen(session: Session, caller: Principal, params: Mapping[str, str]) -> None:
    """NotFound (404) when a query parameter (`?budget_id=`, `?pod_id=`) names an object the
    caller may not see, worded alike whether there is none or it is another team's: a list
    filtered by another team's budget is not an empty list, which would tell the two apart.
    Asked of every caller: a filter naming nothing is 404 for an org-wide caller too."""
    scope = caller.teams
    for name, kind in _OWNED:
        key = params.get(name)
        if key is None:
            continue
        team = team_scope.team_of(session, kind, key)
        if team is None or not scope.sees(team):
            raise NotFound(f"no {kind} {key!r}")


def require_seen(session: Session, caller: Principal, params: Mapping[str, str]) -> None:
    """NotFound (404) when a path parameter names another team's object, worded as for one
    that does not exist; Forbidden for a machine's node telemetry (it reaches every team's
    pods on the machine: org-wide callers and the node's agent only)."""
    scope = caller.teams
    if scope.team_ids is None:
        return
    team_id = params.get("team_id")
    if team_id is not None and not scope.sees(team_id):
        raise NotFound(f"no team {team_id!r}")
    for name, kind in _OWNED:
        key = params.get(name)
        if key is None:
            continue
        team = team_scope.team_of(session, kind, key)
        if team is not None and not scope.sees(team):
            raise NotFound(f"no {kind} {key!r}")
    token_id = params.get("token_id")
    if token_id is not None and not team_scope.token_seen(session, scope, token_id):
        raise NotFound(f"no token {token_id!r}")
    if "node" in params:
        raise Forbidden(
            "a machine's telemetry reaches every team's pods on it: it needs an org-wide "
            "operator token or the node's agent token"
        )
