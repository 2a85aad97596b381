"""A budget, pod or run named by its id or by its name: a name is looked up first (one more
call), and a name that matches none or several is refused with the candidates."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from governor.cli.http import Api, OperatorError


@dataclass(frozen=True)
class Kind:
    """What a name or an id may name: its word, its ids' prefix, its list and its state."""

    noun: str
    prefix: str
    path: str
    state: str

    def is_id(self, given: str) -> bool:
        return re.fullmatch(rf"{self.prefix}_[0-9a-f]{{16}}", given) is not None

    def candidate(self, found: dict[str, Any], budgets: dict[str, str]) -> str:
        """One of several that share a name, told apart: where it is (its budget by name and
        id), and its state."""
        if "budget_id" in found:
            budget_id = found["budget_id"]
            name = budgets.get(budget_id)
            where = f"budget {budget_id}" if name is None else f"budget {name!r} {budget_id}"
        else:
            where = f"declared {found['created_at'][:10]}"
        return f"{found['id']} ({where}, {found[self.state]})"


BUDGET = Kind("budget", "bud", "/v1/budgets", "state")
POD = Kind("pod", "pod", "/v1/pods", "state")
RUN = Kind("run", "run", "/v1/runs", "status")


def resolve(api: Api, kind: Kind, given: str, budget_id: str | None = None) -> str:
    """The id of the budget, pod or run that `given` names: an id as it is; a name looked
    up (within `budget_id`, if given), which must match exactly one — or, for a budget, one
    not closed (a closed budget's name is free for a new one, which the name then means)."""
    if kind.is_id(given):
        return given
    found = api.items(kind.path, {"name": given, "budget_id": budget_id})
    within = "" if budget_id is None else f" in budget {budget_id}"
    if not found:
        raise OperatorError(
            f"no {kind.noun} named {given!r}{within}; 'governor {kind.noun} list' shows them"
        )
    if kind is BUDGET and len(found) > 1:
        found = [f for f in found if f["state"] != "closed"] or found
    if len(found) > 1:
        budgets = {} if kind is BUDGET else names(api, BUDGET)
        candidates = ", ".join(kind.candidate(f, budgets) for f in found)
        raise OperatorError(
            f"{len(found)} {kind.noun}s are named {given!r}{within}: {candidates}; give the id"
        )
    return str(found[0]["id"])


def path_of(api: Api, kind: Kind, given: str, *below: str) -> str:
    """The API path of the budget, pod or run that `given` names, or of what is `below` it:
    path_of(api, POD, "gpu-a", "stop") is /v1/pods/<its id>/stop."""
    return "/".join((kind.path, resolve(api, kind, given), *below))


def budget_filter(api: Api, given: str | None) -> str | None:
    """The id of the budget a listing is narrowed to, if one is named."""
    return None if given is None else resolve(api, BUDGET, given)


def names(api: Api, kind: Kind, **params: Any) -> dict[str, str]:
    """Each id of that kind, mapped to its name (for tables that would show bare ids)."""
    return {f["id"]: f["name"] for f in api.items(kind.path, params)}
