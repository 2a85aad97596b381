"""Budget extensions: requested by an operator or the budget's job, decided once by an
operator or an approver of its team (an org-wide one over the team's `org_approval_over_usd`).

A pending request changes nothing: the ceiling in force is the declared one plus approved
extensions, so a stop is never delayed while someone thinks it over (fail closed).
"""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

from sqlalchemy.orm import Session

from governor.db import repository as repo
from governor.db.tables import BudgetRow, ExtensionRow, TeamRow
from governor.domain.budget_lifecycle import after_extension
from governor.domain.errors import Conflict, Forbidden
from governor.domain.model import BudgetState, Category, ExtensionState, Requester, Severity
from governor.domain.money import dollars, format_usd
from governor.services import events
from governor.services.context import GovernorConfig
from governor.services.ids import new_id
from governor.services.money import team_money
from governor.services.money.book import keep_figures, open_book
from governor.services.security.tokens import Principal


def request(
    session: Session,
    budget_id: str,
    amount: Decimal,
    reason: str,
    requester: Requester,
    now: datetime,
    *,
    run_id: str | None = None,
) -> ExtensionRow:
    budget = repo.get_budget(session, budget_id, lock=True)
    if budget.state is BudgetState.CLOSED:
        raise Conflict(f"budget {budget.id} is closed: it takes no extensions")
    if run_id is not None:
        _refuse_a_second(session, budget.id, run_id)
    row = ExtensionRow(
        id=new_id("ext"),
        budget_id=budget.id,
        amount_usd=amount,
        reason=reason,
        requested_by=requester,
        run_id=run_id,
        state=ExtensionState.PENDING,
        created_at=now,
    )
    session.add(row)
    session.flush()
    events.record(
        session,
        now,
        Severity.WARNING,
        Category.OPERATOR,
        f"extension:{row.id}",
        f"Extension of {dollars(amount)} requested by the {requester.value}: {reason}",
        budget_id=budget.id,
        evidence={
            "amount_usd": format_usd(amount),
            "requested_by": requester.value,
            "run_id": run_id,
        },
    )
    return row


def _refuse_a_second(session: Session, budget_id: str, run_id: str) -> None:
    """A job has at most one request pending: a second waits for the first to be decided."""
    pending = repo.pending_extension_of_run(session, budget_id, run_id)
    if pending is not None:
        raise Conflict(
            f"run {run_id} already has extension request {pending.id} pending "
            f"({dollars(pending.amount_usd)}): wait for an operator to decide it"
        )


def decide(
    session: Session,
    config: GovernorConfig,
    extension_id: str,
    approve: bool,
    note: str | None,
    now: datetime,
    *,
    by: Principal,
) -> ExtensionRow:
    """Approve or deny a pending request. Exactly one decision wins; any other gets Conflict.
    Who decided is in the event (its message and `by`): the row keeps the note. An approval
    over the team's `org_approval_over_usd` by a token scoped to teams is Forbidden."""
    asked = repo.get_extension(session, extension_id)
    budget_id = asked.budget_id
    budget = repo.get_budget(session, budget_id, lock=True)
    if approve:  # by one who may approve it, and within what the budget's team has left
        _require_authority(session, asked.amount_usd, budget, by)
        what = f"extension {extension_id}"
        team_money.refuse_beyond_left(session, budget.team_id, what, asked.amount_usd, now)
    state = ExtensionState.APPROVED if approve else ExtensionState.DENIED
    if not repo.decide_extension(session, extension_id, state, now, note):
        current = repo.get_extension(session, extension_id)
        session.refresh(current)
        raise Conflict(f"extension {extension_id} was already {current.state.value}")
    row = repo.get_extension(session, extension_id)
    session.refresh(row)
    book = open_book(session, budget_id, now, config)
    keep_figures(book)  # heartbeats answer with the new ceiling at once
    evidence = {
        "amount_usd": format_usd(row.amount_usd),
        "note": note,
        "effective_ceiling_usd": format_usd(book.figures.effective_ceiling),
        "committed_usd": format_usd(book.figures.committed),
        "by": by.evidence,
    }
    events.record(
        session,
        now,
        Severity.INFO,
        Category.OPERATOR,
        f"extension:{row.id}",
        f"Extension of {dollars(row.amount_usd)} {state.value} by {by.said}"
        + (f": {_sentence(note)}" if note else ".")
        + (f" Effective ceiling now {dollars(book.figures.effective_ceiling)}." if approve else ""),
        budget_id=budget_id,
        evidence=evidence,
    )
    covers = book.figures.committed < book.figures.effective_ceiling
    budget_state = after_extension(budget.state, covers=covers) if approve else budget.state
    if budget_state is not budget.state:
        budget.state = budget_state
        events.record(
            session,
            now,
            Severity.INFO,
            Category.BUDGET,
            f"budget:{budget.id}",
            "Budget reopened by an approved extension; its stopped pods stay stopped until an "
            "operator resumes them.",
            budget_id=budget.id,
            evidence=evidence,
        )
    return row


def _require_authority(session: Session, amount: Decimal, budget: BudgetRow, by: Principal) -> None:
    """Forbidden when `by` is scoped to teams and `amount` is over what the budget's team lets
    its own operators and approvers approve (`org_approval_over_usd`)."""
    if by.team_ids is None:
        return
    team = session.get(TeamRow, budget.team_id)
    limit = None if team is None else team.org_approval_over_usd
    if team is not None and limit is not None and amount > limit:
        raise Forbidden(
            f"an extension of {dollars(amount)} is over {dollars(limit)}, the most team "
            f"{team.name!r} lets its own operators and approvers approve "
            "(org_approval_over_usd): it needs an org-wide operator or approver token"
        )


def _sentence(note: str) -> str:
    """The operator's note, ending as a sentence does (a sentence may follow it)."""
    return note if note[-1] in ".!?" else f"{note}."
