"""A budget's lifecycle: open until its ceiling is reached, closed when its work is over.

    open -> stopping        committed spend reached the effective ceiling: its pods are stopping
    stopping -> exhausted   every pod has stopped (storage still counts)
    stopping | exhausted -> open      an approved extension puts the ceiling above committed spend
    open | exhausted -> closed        an operator closes it, no pod billing compute

A closed budget stays closed: no new pods, runs, extensions or resumes.
"""

from __future__ import annotations

from governor.domain.model import BudgetState


def after_ceiling(state: BudgetState) -> BudgetState:
    """Its committed spend has reached the ceiling and a stop is ordered."""
    return BudgetState.STOPPING if state is BudgetState.OPEN else state


def after_pods_stopped(state: BudgetState) -> BudgetState:
    """None of its pods bills compute any more."""
    return BudgetState.EXHAUSTED if state is BudgetState.STOPPING else state


def after_extension(state: BudgetState, *, covers: bool) -> BudgetState:
    """An extension was approved; `covers`: the new ceiling is above committed spend."""
    reopens = state in (BudgetState.STOPPING, BudgetState.EXHAUSTED) and covers
    return BudgetState.OPEN if reopens else state


def may_close(state: BudgetState) -> bool:
    """A stopping budget closes once its pods have stopped; a closed one is closed already."""
    return state in (BudgetState.OPEN, BudgetState.EXHAUSTED)
