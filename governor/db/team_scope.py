"""Which rows a caller scoped to some teams may see: a filter for each list, the team an
object belongs to (its budget's), and the teams a token is for."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from sqlalchemy import ColumnElement, and_, delete, exists, or_, select, true
from sqlalchemy.orm import InstrumentedAttribute, Session

from governor.db.tables import (
    BudgetRow,
    ExtensionRow,
    LaunchRow,
    PlanCheckRow,
    PodRow,
    RunRow,
    TokenRow,
    TokenTeamRow,
)
from governor.domain.teams import TeamScope


def budgets_in(scope: TeamScope, budget_id: InstrumentedAttribute[Any]) -> ColumnElement[bool]:
    """Rows whose budget (`budget_id`, a column naming it) is in one of the scope's teams:
    every row for an org-wide scope."""
    if scope.team_ids is None:
        return true()
    return budget_id.in_(select(BudgetRow.id).where(BudgetRow.team_id.in_(scope.team_ids)))


def tokens_in(scope: TeamScope) -> ColumnElement[bool]:
    """The tokens a scope may see: for an org-wide scope every one; for a team's, those
    scoped to its teams alone (an org-wide token, or one also for another team, is not), and
    the job and agent tokens of its runs and pods (a node agent's serves every team: not)."""
    if scope.team_ids is None:
        return true()
    theirs = TokenTeamRow.token_id == TokenRow.id
    scoped = and_(
        exists().where(theirs),
        ~exists().where(theirs, TokenTeamRow.team_id.not_in(scope.team_ids)),
    )
    return or_(
        scoped,
        budgets_in(scope, TokenRow.budget_id),
        TokenRow.run_id.in_(select(RunRow.id).where(budgets_in(scope, RunRow.budget_id))),
        TokenRow.pod_id.in_(select(PodRow.id).where(budgets_in(scope, PodRow.budget_id))),
    )


# each kind of object the API's paths name: its id, and the column naming its budget
_BUDGET_OF: dict[str, tuple[InstrumentedAttribute[str], InstrumentedAttribute[str]]] = {
    "budget": (BudgetRow.id, BudgetRow.id),
    "pod": (PodRow.id, PodRow.budget_id),
    "run": (RunRow.id, RunRow.budget_id),
    "extension": (ExtensionRow.id, ExtensionRow.budget_id),
    "plan": (PlanCheckRow.id, PlanCheckRow.budget_id),
    "launch": (LaunchRow.id, LaunchRow.budget_id),
}


def team_of(session: Session, kind: str, key: str) -> str | None:
    """The team a budget, pod, run, extension, plan or launch belongs to (its budget's); None:
    there is no such object (its route answers 404 itself)."""
    key_column, budget_id = _BUDGET_OF[kind]
    query = select(BudgetRow.team_id).where(BudgetRow.id == budget_id, key_column == key)
    return session.scalar(query)


def token_seen(session: Session, scope: TeamScope, token_id: str) -> bool:
    """Whether the scope may see this token (`tokens_in`); False too if there is none."""
    return bool(session.scalar(select(exists().where(TokenRow.id == token_id, tokens_in(scope)))))


def token_teams(session: Session, token_id: str) -> frozenset[str] | None:
    """The teams a token is for; None: it is for every team (org-wide)."""
    teams = session.scalars(
        select(TokenTeamRow.team_id).where(TokenTeamRow.token_id == token_id)
    ).all()
    return frozenset(teams) or None


def teams_of_tokens(session: Session, token_ids: Sequence[str]) -> dict[str, tuple[str, ...]]:
    """The teams each of these tokens is for, in id order (a token for every team: absent)."""
    rows = session.execute(
        select(TokenTeamRow.token_id, TokenTeamRow.team_id)
        .where(TokenTeamRow.token_id.in_(token_ids))
        .order_by(TokenTeamRow.team_id)
    ).all()
    found: dict[str, tuple[str, ...]] = {}
    for token_id, team_id in rows:
        found[token_id] = (*found.get(token_id, ()), team_id)
    return found


def scope_token(session: Session, token_id: str, teams: Collection[str]) -> None:
    """Scope a new token to these teams."""
    session.add_all(TokenTeamRow(token_id=token_id, team_id=t) for t in sorted(teams))


def rescope_token(session: Session, token_id: str, teams: Collection[str] | None) -> None:
    """Scope a token to these teams from now on (None: every team)."""
    session.execute(delete(TokenTeamRow).where(TokenTeamRow.token_id == token_id))
    scope_token(session, token_id, teams or ())
