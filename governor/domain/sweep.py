"""The account sweep's decisions: what becomes of each pod an account lists that no budget
governs. Pure: the listing, the refs registered here, the budgets by name and id, and the
operator's rules in; one verdict per billing pod out.

A pod carrying the budget label (`launch_labels.BUDGET_LABEL`, naming a budget by its name
or id) is registered under that budget when its launch label names a launch of that budget
still waiting for its pod (the first such pod listed wins the launch), or when the budget
adopts labelled pods: anyone who can launch in a shared account can write a label, so a
label alone spends a budget's money only where its owners said it may. Any other billing pod
is ungoverned, unless the first of its account's rules that matches it adopts it into a
budget (the operator's own decision); a rule may instead stop it (preserving, never
terminating) once it has been ungoverned for the rule's grace.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from fnmatch import fnmatchcase
from typing import Any

from governor.domain.launch_labels import BUDGET_LABEL, LAUNCH_LABEL
from governor.domain.ports import Listed

RULE_KEYS = frozenset({"provider", "name", "label", "value", "adopt", "stop_after_s"})


@dataclass(frozen=True)
class SweepRule:
    """One operator rule for one provider account: a pod it matches (by a name pattern, a
    label present or a label's value pattern: every one given must match) is adopted into
    the budget `adopt` names, or stopped once ungoverned for `stop_after_s`."""

    provider: str
    name: str | None = None  # a glob on the pod's name (fnmatch, case-sensitive)
    label: str | None = None  # a label key the pod must carry
    value: str | None = None  # a glob the label's value must match (needs `label`)
    adopt: str | None = None  # a budget's name or id
    stop_after_s: float | None = None

    @classmethod
    def of(cls, raw: Mapping[str, Any]) -> SweepRule:
        """A rule from its settings form; ValueError saying what is wrong."""
        unknown = set(raw) - RULE_KEYS
        if unknown:
            raise ValueError(f"unknown keys {sorted(unknown)}: a rule has {sorted(RULE_KEYS)}")
        texts = {k: raw.get(k) for k in ("provider", "name", "label", "value", "adopt")}
        for key, text in texts.items():
            if text is not None and (not isinstance(text, str) or not text):
                raise ValueError(f"{key} must be a non-empty string, not {text!r}")
        if texts["provider"] is None:
            raise ValueError("provider is required: the account the rule is for")
        if texts["name"] is None and texts["label"] is None:
            raise ValueError('name or label is required (name "*" matches every pod)')
        if texts["value"] is not None and texts["label"] is None:
            raise ValueError("value needs label: the label whose value it matches")
        grace = raw.get("stop_after_s")
        if (texts["adopt"] is None) == (grace is None):
            raise ValueError("exactly one of adopt (a budget) or stop_after_s (a grace)")
        if grace is not None and (
            isinstance(grace, bool) or not isinstance(grace, int | float) or grace < 0
        ):
            raise ValueError(f"stop_after_s must be a number of seconds >= 0, not {grace!r}")
        return cls(
            provider=str(texts["provider"]),
            name=texts["name"],
            label=texts["label"],
            value=texts["value"],
            adopt=texts["adopt"],
            stop_after_s=None if grace is None else float(grace),
        )

    def matches(self, provider: str, pod: Listed) -> bool:
        if provider != self.provider:
            return False
        if self.name is not None and not fnmatchcase(pod.name or "", self.name):
            return False
        if self.label is not None:
            if self.label not in pod.labels:
                return False
            if self.value is not None and not fnmatchcase(pod.labels[self.label], self.value):
                return False
        return True


class Fate(StrEnum):
    GOVERNED = "governed"  # registered here already
    IDLE = "idle"  # bills no compute: nothing to do
    REGISTER = "register"  # labelled for a budget that exists
    ADOPT = "adopt"  # a rule puts it under a budget
    UNGOVERNED = "ungoverned"


@dataclass(frozen=True)
class Verdict:
    pod: Listed
    fate: Fate
    budget_id: str | None = None  # REGISTER, ADOPT: the budget it goes under
    reason: str = ""  # UNGOVERNED: why no budget governs it
    stop_after_s: float | None = None  # the grace of the stop rule that matches it, if any
    launch: str | None = None  # REGISTER: the launch it registers as (None: by the label alone)
    not_adopted_by: str | None = None  # UNGOVERNED: the budget its label names, not adopting it

    @property
    def launch_id(self) -> str | None:
        """The launch that reserved it, as its label says (None: no launch label)."""
        return self.pod.labels.get(LAUNCH_LABEL)


@dataclass(frozen=True)
class Labelled:
    """What decides whether a budget's label registers a pod: the budgets that adopt
    labelled pods (ids), and the launches still waiting for their pod (id: its budget's id)."""

    adopting: frozenset[str] = frozenset()
    waiting: Mapping[str, str] = field(default_factory=dict)


def judge(
    provider: str,
    listed: Sequence[Listed],
    registered: frozenset[str] | set[str],
    budgets: Mapping[str, str],
    rules: Sequence[SweepRule],
    labelled: Labelled | None = None,
) -> list[Verdict]:
    """Each listed pod's fate; `budgets` maps every budget's name and id to its id. A launch
    is won by the first pod listed that names it: a second one (a copied label) is judged as
    if it named none."""
    mine = [r for r in rules if r.provider == provider]
    labelled = labelled or Labelled()
    waiting = dict(labelled.waiting)
    verdicts = []
    for pod in listed:
        if pod.ref in registered:
            verdicts.append(Verdict(pod, Fate.GOVERNED))
        elif not pod.billing:
            verdicts.append(Verdict(pod, Fate.IDLE))
        else:
            verdict = _billing(pod, budgets, provider, mine, labelled.adopting, waiting)
            if verdict.launch is not None:
                del waiting[verdict.launch]
            verdicts.append(verdict)
    return verdicts


def _billing(
    pod: Listed,
    budgets: Mapping[str, str],
    provider: str,
    rules: Sequence[SweepRule],
    adopting: frozenset[str],
    waiting: Mapping[str, str],
) -> Verdict:
    """A billing pod's fate. Its stop rule's grace rides along whatever the fate: a
    registration that is refused leaves it ungoverned after all."""
    rule = next((r for r in rules if r.matches(provider, pod)), None)
    grace = None if rule is None else rule.stop_after_s
    labelled = pod.labels.get(BUDGET_LABEL)
    not_adopted_by = None
    if labelled is not None:
        budget_id = budgets.get(labelled)
        launch = pod.labels.get(LAUNCH_LABEL)
        if budget_id is None:
            reason = f"its label {BUDGET_LABEL}={labelled!r} names no budget"
        elif launch is not None and waiting.get(launch) == budget_id:
            return Verdict(pod, Fate.REGISTER, budget_id, stop_after_s=grace, launch=launch)
        elif budget_id in adopting:
            return Verdict(pod, Fate.REGISTER, budget_id, stop_after_s=grace)
        else:
            not_adopted_by = budget_id
            reason = (
                f"its label {BUDGET_LABEL}={labelled!r} alone does not register a pod: that "
                "budget does not adopt labelled pods, and "
                + (
                    "it carries no launch label"
                    if launch is None
                    else f"its label {LAUNCH_LABEL}={launch!r} names none of that budget's "
                    "launches waiting for a pod"
                )
            )
    else:
        reason = "no budget label, and no rule adopts it"
    if rule is not None and rule.adopt is not None:
        if rule.adopt in budgets:
            return Verdict(pod, Fate.ADOPT, budgets[rule.adopt])
        reason = f"the rule adopting it names no budget {rule.adopt!r}"
    return Verdict(
        pod, Fate.UNGOVERNED, reason=reason, stop_after_s=grace, not_adopted_by=not_adopted_by
    )


def stop_due(first_seen: datetime, stop_after_s: float | None, now: datetime) -> bool:
    """A stop rule's grace is over: never without a rule, never earlier."""
    return stop_after_s is not None and now >= first_seen + timedelta(seconds=stop_after_s)
