"""The read model of the operators' list of tokens: each token on file with what it is bound
to, by name: its run and that run's pod and budget, its pod and that pod's budget, its node,
or nothing (an operator's or a viewer's, for every budget)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeVar

from sqlalchemy import select
from sqlalchemy.orm import Session

from governor.db.tables import BudgetRow, PodRow, RunRow
from governor.domain.paging import PageRequest
from governor.services.security import token_model
from governor.services.security.token_model import TokenInfo

Row = TypeVar("Row", RunRow, PodRow, BudgetRow)


@dataclass(frozen=True)
class Binding:
    kind: str  # run, pod, budget or node
    name: str  # what people call it (a node: its machine's name)
    id: str | None  # none for a node


@dataclass(frozen=True)
class TokenLine:
    token: TokenInfo
    bound_to: tuple[Binding, ...]  # the run, its pod, their budget; or the node; none: all


@dataclass(frozen=True)
class TokenList:
    tokens: tuple[TokenLine, ...]  # newest first
    more: bool  # more are on file than one page holds


def token_list(session: Session, request: PageRequest) -> TokenList:
    """A page of the tokens on file, each with its bindings named, in three statements more."""
    shown = token_model.page(session, request)
    runs = _named(session, RunRow, {t.run_id for t in shown.items if t.run_id})
    pod_ids = {t.pod_id for t in shown.items if t.pod_id} | {r.pod_id for r in runs.values()}
    pods = _named(session, PodRow, pod_ids)
    budget_ids = {r.budget_id for r in runs.values()} | {p.budget_id for p in pods.values()}
    budgets = _named(session, BudgetRow, budget_ids)

    def bound(t: TokenInfo) -> tuple[Binding, ...]:
        if t.node is not None:
            return (Binding("node", t.node, None),)
        run = runs.get(t.run_id or "")
        pod = pods.get(t.pod_id or (run.pod_id if run else ""))
        budget = budgets.get(pod.budget_id if pod else "")
        found = [
            Binding(kind, row.name, row.id)
            for kind, row in (("run", run), ("pod", pod), ("budget", budget))
            if row is not None
        ]
        return tuple(found)

    lines = tuple(TokenLine(t, bound(t)) for t in shown.items)
    return TokenList(lines, shown.next_cursor is not None)


def _named(session: Session, table: type[Row], ids: set[str]) -> dict[str, Row]:
    if not ids:
        return {}
    return {r.id: r for r in session.scalars(select(table).where(table.id.in_(ids)))}
