"""The read model of the operators' list of tokens: each token on file with what it is bound
to, by name: its run and that run's pod and budget, its pod and that pod's budget, its node,
or nothing (an operator's or a viewer's, for every budget)."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.orm import Session

from governor.db import repository as repo
from governor.domain.paging import PageRequest
from governor.domain.teams import TeamScope
from governor.services.security import token_model
from governor.services.security.token_model import TokenInfo


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


def token_list(session: Session, request: PageRequest, scope: TeamScope) -> TokenList:
    """A page of the tokens on file that the scope may see, each with its bindings named, in
    three statements more."""
    shown = token_model.page(session, request, scope)
    runs = repo.runs_by_id(session, sorted({t.run_id for t in shown.items if t.run_id}))
    pod_ids = {t.pod_id for t in shown.items if t.pod_id} | {r.pod_id for r in runs.values()}
    pods = repo.pods_by_id(session, sorted(pod_ids))
    budget_ids = {r.budget_id for r in runs.values()} | {p.budget_id for p in pods.values()}
    budgets = {b.id: b for b in repo.budgets_by_id(session, sorted(budget_ids))}

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
