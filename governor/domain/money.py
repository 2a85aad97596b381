"""Dollar amounts: parsing at the edge, metering arithmetic and formatting, all in Decimal."""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from functools import lru_cache

MICRO = Decimal("0.000001")
CENT = Decimal("0.01")
MILLS = Decimal("0.001")  # a tenth of a cent: what a rate is shown to
ZERO = Decimal(0)
MAX_USD = Decimal("100000000")  # $100M: anything above is a typo, not a budget
HOURS_PER_MONTH = Decimal(730)  # the convention providers use for $/GB-month
SECONDS_PER_HOUR = Decimal(3600)


class MoneyError(ValueError):
    """An amount that cannot be money: not a number, not finite, negative or absurd."""


def parse_usd(value: object, *, positive: bool = False) -> Decimal:
    """Turn a JSON string or number into dollars, or say exactly why not."""
    if isinstance(value, bool) or not isinstance(value, str | int | float | Decimal):
        raise MoneyError("must be a decimal number of dollars, as a string or a number")
    try:
        amount = Decimal(str(value).strip()) if not isinstance(value, Decimal) else value
    except InvalidOperation:
        raise MoneyError(f"{value!r} is not a decimal number of dollars") from None
    if not amount.is_finite():
        raise MoneyError("must be a finite number of dollars")
    if amount < 0:
        raise MoneyError("must not be negative")
    if positive and amount == 0:
        raise MoneyError("must be greater than zero")
    if amount > MAX_USD:
        raise MoneyError(f"must be at most {MAX_USD} dollars")
    if amount != amount.quantize(MICRO, rounding=ROUND_HALF_UP):
        raise MoneyError("must have at most 6 decimal places")
    return amount.quantize(MICRO)


def usd(amount: Decimal) -> Decimal:
    """Round to the ledger's resolution (a micro-dollar)."""
    return amount.quantize(MICRO, rounding=ROUND_HALF_UP)


@lru_cache(maxsize=4096)
def charge(rate_per_hour: Decimal, seconds: float | Decimal) -> Decimal:
    """What `seconds` cost at `rate_per_hour`.

    Remembered: a pass asks it the same few questions for thousands of pods, which share a
    handful of rates and, charged by the hour, the instant they were last charged."""
    return usd(rate_per_hour * Decimal(str(seconds)) / SECONDS_PER_HOUR)


def per_hour_from_month(usd_per_gb_month: Decimal, gigabytes: Decimal) -> Decimal:
    """An hourly rate from a $/GB-month storage price."""
    return usd_per_gb_month * gigabytes / HOURS_PER_MONTH


def format_usd(amount: Decimal) -> str:
    """Dollars as a string with at least cents and no trailing noise: "12.50", "4.996"."""
    text = f"{usd(amount):f}".rstrip("0")
    whole, _, frac = text.partition(".")
    return f"{whole}.{frac.ljust(2, '0')}"


# How money reads for people, the same on every surface (dashboard, report, command line,
# notices, messages): an amount to the whole cent, a rate per hour to the tenth of a cent
# (a small disk's storage costs a fraction of a cent an hour).


def dollars(amount: Decimal) -> str:
    """An amount for people to read, to the cent: "$1,234.57", "-$3.20"."""
    cents = amount.quantize(CENT, rounding=ROUND_HALF_UP)
    return f"{'-' if cents < 0 else ''}${abs(cents):,}"


def dollars_per_hour(rate: Decimal) -> str:
    """A rate for people to read, to the tenth of a cent where it has one: "$2.49/h",
    "$0.014/h", "$1,234.567/h"."""
    mills = rate.quantize(MILLS, rounding=ROUND_HALF_UP)
    shown = mills if mills != mills.quantize(CENT) else mills.quantize(CENT)
    return f"{'-' if shown < 0 else ''}${abs(shown):,}/h"
