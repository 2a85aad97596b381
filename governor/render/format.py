"""How figures read for people, one way in the reports and on the dashboard: dollars,
percentages and shares, GiB, lengths of time and ages, instants, metric values and labels."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Any

from governor.domain.money import dollars, dollars_per_hour
from governor.domain.telemetry import GIB


def usd(amount: Decimal | None) -> str:
    """An amount, to the cent: "$1,234.57" (money.dollars)."""
    return "—" if amount is None else dollars(amount)


def per_hour(rate: Decimal | None) -> str:
    """A rate, to the tenth of a cent where it has one: "$0.014/h" (money.dollars_per_hour)."""
    return "—" if rate is None else dollars_per_hour(rate)


def pct(value: float | None) -> str:
    """A percentage: "42%", under ten to the tenth: "4.5%"."""
    if value is None:
        return "—"
    return f"{value:.0f}%" if value >= 10 or value == 0 else f"{value:.1f}%"


def share(amount: Decimal, total: Decimal) -> str:
    """`amount` as a share of `total`, to the tenth of a percent: "12.5%"; of nothing: "—"."""
    return f"{amount / total:.1%}" if total else "—"


def in_gib(value: int | None) -> str:
    """Bytes in GiB to the tenth, where the unit is said beside: "79.6"."""
    return "—" if value is None else f"{value / GIB:.1f}"


def gib(value: int | None) -> str:
    """Bytes in GiB to the tenth, with the unit: "79.6 GiB"."""
    return "—" if value is None else f"{in_gib(value)} GiB"


def metric(value: float | str) -> str:
    """A training metric, compactly: "0.1235", "1.2e-05"; a non-finite one as sent: "NaN"."""
    return value if isinstance(value, str) else f"{value:.4g}"


def duration(seconds: float | None) -> str:
    """A length of time: "4 s", "3 min", "2 h 5 min", "3 d 4 h"."""
    if seconds is None:
        return "—"
    s = round(seconds)
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min"
    if s < 86400:
        h, m = divmod(s // 60, 60)
        return f"{h} h {m} min" if m else f"{h} h"
    d, h = divmod(s // 3600, 24)
    return f"{d} d {h} h" if h else f"{d} d"


def instant(at: datetime | None) -> str:
    """An instant to the second, with its date: "2026-01-02 14:05:09 UTC"."""
    return "—" if at is None else at.strftime("%Y-%m-%d %H:%M:%S UTC")


def clock(at: datetime | None, now: datetime | None = None) -> str:
    """An instant: "14:05:09 UTC", with the date when it is not today's."""
    if at is None:
        return "—"
    if now is not None and at.date() == now.date():
        return at.strftime("%H:%M:%S UTC")
    return at.strftime("%Y-%m-%d %H:%M UTC")


def short_time(at: datetime, now: datetime) -> str:
    """A short UTC time: "14:05:09" today, "Jan 02 14:05" before."""
    return at.strftime("%H:%M:%S") if at.date() == now.date() else at.strftime("%b %d %H:%M")


def relative(at: datetime | None, now: datetime) -> str:
    """Relative to now: "in 3 min" or "5 s ago"."""
    if at is None:
        return "—"
    seconds = (at - now).total_seconds()
    return f"in {duration(seconds)}" if seconds >= 0 else f"{duration(-seconds)} ago"


def label(value: Any) -> str:
    """An enum or code for people: "job_notified" -> "job notified"."""
    text = getattr(value, "value", value)
    return "—" if text is None else str(text).replace("_", " ").replace("-", " ")
