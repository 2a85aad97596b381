"""How numbers read on the page: dollars, percentages, GiB, ages and instants (Jinja filters)."""

from __future__ import annotations

from datetime import datetime
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from governor.domain.money import dollars

GIB = 1024**3


def usd(amount: Decimal | None) -> str:
    """Dollars to the cent, "$1,234.57"; under a dollar, to the tenth of a cent: "$0.004"."""
    if amount is None:
        return "—"
    if 0 < abs(amount) < 1:
        small = amount.quantize(Decimal("0.001"), rounding=ROUND_HALF_UP)
        if small != small.quantize(Decimal("0.01")):
            return f"${small}"
    return dollars(amount)


def per_hour(amount: Decimal | None) -> str:
    return "—" if amount is None else f"{usd(amount)}/h"


def pct(value: float | None) -> str:
    if value is None:
        return "—"
    return f"{value:.0f}%" if value >= 10 or value == 0 else f"{value:.1f}%"


def gib(value: int | None) -> str:
    return "—" if value is None else f"{value / GIB:.1f} GiB"


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


FILTERS = {
    "usd": usd,
    "per_hour": per_hour,
    "pct": pct,
    "gib": gib,
    "metric": metric,
    "duration": duration,
    "clock": clock,
    "relative": relative,
    "short_time": short_time,
    "label": label,
}
