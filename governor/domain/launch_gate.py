"""A launch judged before it starts: what it may cost at most, and whether its budget has that
money. Tool-neutral: a SkyPilot request, a dstack run spec or any other launcher's reduces to
candidates, nodes and a maximum duration.

A launch may be placed on any of its candidates (the tool chooses later), so it is priced at
its dearest: each candidate's GPUs at their rate per GPU-hour, times the nodes, times the
hours it may run. A launch of several groups of nodes unlike each other (a workload's head and
its workers) is the sum of its groups, each at its dearest candidate. Its price is reserved
against the budget like an admitted plan's worst case: it must fit what is left once
committed spend, the admitted plans and the launches already accepted are out of it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal

from governor.domain.money import ZERO, dollars, dollars_per_hour, usd
from governor.domain.rate_card import Rate


@dataclass(frozen=True)
class Candidate:
    """One place the launch may run: GPUs of one accelerator on each node."""

    provider: str | None  # the cloud, when the request names one
    accelerator: str | None  # None: no GPU asked for
    count: int = 0  # GPUs per node
    spot: bool = False
    region: str | None = None

    def __str__(self) -> str:
        if self.accelerator is None:
            return f"{self.provider or 'any provider'}: no GPU"
        spot = " spot" if self.spot else ""
        where = (self.provider or "any provider") + (f" in {self.region}" if self.region else "")
        return f"{self.count}x {self.accelerator}{spot} on {where}"


@dataclass(frozen=True)
class Group:
    """Nodes alike: each on one of the candidates."""

    candidates: tuple[Candidate, ...]
    nodes: int = 1
    name: str | None = None


@dataclass(frozen=True)
class LaunchRequest:
    """What a launcher asks for, as the gate reads it."""

    tool: str
    candidates: tuple[Candidate, ...]
    nodes: int = 1
    budget_ref: str | None = None  # the budget label's value: a budget's name or id
    max_hours: Decimal | None = None  # a maximum duration the request declares
    user: str | None = None
    project: str | None = None
    name: str | None = None  # the task's or run's name, for events
    # a launch of several groups unlike each other: each priced at its dearest and summed
    # (then `candidates` holds all of theirs and `nodes` their total, for the record)
    groups: tuple[Group, ...] = ()


@dataclass(frozen=True)
class Priced:
    """The launch at its dearest candidate: per hour and over its hours."""

    per_hour: Decimal
    hours: Decimal
    total: Decimal
    candidate: Candidate | None  # the dearest; None when no candidate asks for a GPU
    rates: tuple[tuple[str, Rate], ...]  # each priced candidate, with the rate that priced it
    unpriced: tuple[Candidate, ...]  # candidates with GPUs no rate is known for
    arithmetic: str

    @property
    def complete(self) -> bool:
        return not self.unpriced


Rates = Callable[[Candidate], Rate | None]


def price(request: LaunchRequest, hours: Decimal, rates: Rates) -> Priced:
    """The launch's dearest candidate x nodes x hours, summed over its groups where it has
    several; candidates without a known rate are listed apart (they leave the price
    incomplete)."""
    if not request.groups:
        return _price_one(Group(request.candidates, request.nodes), hours, rates)[0]
    parts, named = [], []
    for i, g in enumerate(request.groups, start=1):
        part, term = _price_one(g, hours, rates)
        parts.append(part)
        if term is not None:
            named.append(f"{g.name or f'group {i}'}: {term}")
    per_hour = sum((p.per_hour for p in parts), ZERO)
    total = usd(per_hour * hours)
    dearest = max(parts, key=lambda p: p.per_hour)
    arithmetic = (
        f"({' + '.join(named)}) x {_hours(hours)} h = {dollars(total)}"
        if named
        else "no GPU priced: $0.00 reserved"
    )
    return Priced(
        per_hour,
        hours,
        total,
        dearest.candidate,
        tuple(r for p in parts for r in p.rates),
        tuple(c for p in parts for c in p.unpriced),
        arithmetic,
    )


def _price_one(group: Group, hours: Decimal, rates: Rates) -> tuple[Priced, str | None]:
    """The group at its dearest candidate, and the term that prices it per hour (None when
    none of its candidates is priced)."""
    priced: list[tuple[Candidate, Rate, Decimal]] = []
    unpriced: list[Candidate] = []
    for c in group.candidates:
        if c.accelerator is None or c.count == 0:
            continue
        rate = rates(c)
        if rate is None:
            unpriced.append(c)
        else:
            priced.append((c, rate, rate.usd_per_gpu_hour * c.count))
    if not priced:
        none = Priced(ZERO, hours, ZERO, None, (), tuple(unpriced), "no GPU priced: $0.00 reserved")
        return none, None
    dearest, rate, per_node = max(priced, key=lambda p: p[2])
    per_hour = per_node * group.nodes
    term = _term(dearest, rate, group.nodes)
    total = usd(per_hour * hours)
    arithmetic = f"{term} x {_hours(hours)} h = {dollars(total)}"
    priced_one = Priced(
        per_hour,
        hours,
        total,
        dearest,
        tuple((str(c), r) for c, r, _ in priced),
        tuple(unpriced),
        arithmetic,
    )
    return priced_one, term


def _term(dearest: Candidate, rate: Rate, nodes: int) -> str:
    return (
        f"{dearest.count} x {dearest.accelerator} at {dollars_per_hour(rate.usd_per_gpu_hour)} "
        f"per GPU ({rate.source} {rate.key}) x {nodes} node{'s' if nodes != 1 else ''}"
    )


@dataclass(frozen=True)
class Money:
    """The budget's money as the gate reads it, all at one instant."""

    remaining: Decimal  # effective ceiling less committed spend
    held_for_plans: Decimal
    reserved_for_launches: Decimal

    @property
    def available(self) -> Decimal:
        return self.remaining - self.held_for_plans - self.reserved_for_launches

    def as_json(self) -> dict[str, str]:
        return {
            "remaining_usd": str(self.remaining),
            "held_for_plans_usd": str(self.held_for_plans),
            "reserved_for_launches_usd": str(self.reserved_for_launches),
            "available_usd": str(self.available),
        }


@dataclass(frozen=True)
class Decision:
    accepted: bool
    reasons: tuple[str, ...]
    warnings: tuple[str, ...] = ()
    reserve: Decimal = ZERO  # what acceptance reserves (0 when refused, or a plan holds it)
    figures: dict[str, object] = field(default_factory=dict)

    @property
    def message(self) -> str:
        head = "accepted" if self.accepted else "refused"
        return f"governor: launch {head}: " + " ".join(self.reasons + self.warnings)


def decide(
    priced: Priced,
    money: Money,
    *,
    budget: str,
    require_plan: bool,
    plan: str | None,
    plan_holds: Decimal | None,
) -> Decision:
    """Accept or refuse a priced launch against its budget's money and plan.

    Under an admitted plan (`plan`, which still may cost `plan_holds`) the launch must fit
    what the plan holds, and reserves nothing more: the plan already holds it. Without one, it
    must fit what the budget has available, and reserves its price. A launch that cannot be
    priced is refused where the budget requires a plan and accepted with a warning elsewhere."""
    figures: dict[str, object] = {
        "budget": budget,
        "price_usd": str(priced.total),
        "per_hour_usd": str(priced.per_hour),
        "hours": str(priced.hours),
        "arithmetic": priced.arithmetic,
        "rates": {
            c: {"usd_per_gpu_hour": str(r.usd_per_gpu_hour), "key": r.key, "source": r.source}
            for c, r in priced.rates
        },
        "unpriced": [str(c) for c in priced.unpriced],
        "plan": plan,
        **money.as_json(),
    }
    unpriced = "; ".join(str(c) for c in priced.unpriced)
    if require_plan and plan is None:
        return Decision(
            False,
            (
                f"budget {budget} requires an admitted plan and has none: check one "
                "(governor plan submit plan.json --budget ...) before launching.",
            ),
            figures=figures,
        )
    if priced.unpriced and require_plan:
        return Decision(
            False,
            (
                f"no rate is known for {unpriced}, and budget {budget} requires a plan: add it "
                "to GOVERNOR_RATE_CARD (provider:accelerator -> USD per GPU-hour).",
            ),
            figures=figures,
        )
    warnings: tuple[str, ...] = ()
    if priced.unpriced:
        warnings = (f"No rate is known for {unpriced}: that candidate is not reserved for.",)
    if plan is not None and plan_holds is not None:
        if priced.total > plan_holds:
            return Decision(
                False,
                (
                    f"{priced.arithmetic}, more than plan {plan} may still cost "
                    f"({dollars(plan_holds)}) in budget {budget}.",
                ),
                figures=figures,
            )
        return Decision(
            True,
            (f"{priced.arithmetic}, within what plan {plan} holds ({dollars(plan_holds)}).",),
            warnings,
            ZERO,
            figures,
        )
    available = money.available
    if priced.total > available:
        return Decision(
            False,
            (
                f"{priced.arithmetic}, more than budget {budget} has available: "
                f"{dollars(money.remaining)} remaining - {dollars(money.held_for_plans)} held "
                f"for plans - {dollars(money.reserved_for_launches)} reserved for launches = "
                f"{dollars(available)}.",
            ),
            figures=figures,
        )
    return Decision(
        True,
        (f"{priced.arithmetic}, within the {dollars(available)} budget {budget} has available.",),
        warnings,
        priced.total,
        figures,
    )


def _hours(hours: Decimal) -> str:
    return format(hours.normalize(), "f")
