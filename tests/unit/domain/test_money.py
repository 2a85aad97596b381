from decimal import Decimal

import pytest

from governor.domain.money import (
    MoneyError,
    charge,
    dollars,
    dollars_per_hour,
    format_usd,
    parse_usd,
    per_hour_from_month,
)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("12.50", Decimal("12.50")),
        (12.5, Decimal("12.5")),
        (0.1, Decimal("0.1")),
        (7, Decimal("7")),
        (" 3.25 ", Decimal("3.25")),
        ("0.000001", Decimal("0.000001")),
        ("100000000", Decimal("100000000")),
    ],
)
def test_parse_accepts_strings_and_numbers(raw: object, expected: Decimal) -> None:
    assert parse_usd(raw) == expected


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        ("-1", "negative"),
        (-0.01, "negative"),
        ("abc", "not a decimal"),
        ("", "not a decimal"),
        (float("nan"), "finite"),
        ("NaN", "finite"),
        ("Infinity", "finite"),
        (float("inf"), "finite"),
        ("1e30", "at most"),
        (100000000.01, "at most"),
        ("0.0000001", "6 decimal places"),
        (True, "decimal number"),
        (None, "decimal number"),
        ([1], "decimal number"),
    ],
)
def test_parse_rejects_what_is_not_money(raw: object, problem: str) -> None:
    with pytest.raises(MoneyError, match=problem):
        parse_usd(raw)


def test_parse_positive_rejects_zero() -> None:
    with pytest.raises(MoneyError, match="greater than zero"):
        parse_usd("0", positive=True)


@pytest.mark.parametrize(
    ("rate", "seconds", "expected"),
    [
        ("3600", 1, "1"),
        ("3600", 0.2, "0.2"),
        ("2.00", 3600, "2"),
        ("1", 1, "0.000278"),  # 1/3600 rounded to the micro-dollar
        ("0", 100, "0"),
    ],
)
def test_charge_is_rate_times_time(rate: str, seconds: float, expected: str) -> None:
    assert charge(Decimal(rate), seconds) == Decimal(expected)


def test_storage_month_rate_is_spread_over_730_hours() -> None:
    assert per_hour_from_month(Decimal("0.10"), Decimal(730)) == Decimal("0.1")


@pytest.mark.parametrize(
    ("amount", "text"),
    [
        ("12.5", "12.50"),
        ("4.996", "4.996"),
        ("0", "0.00"),
        ("3.1234567", "3.123457"),
        ("10", "10.00"),
    ],
)
def test_format_keeps_cents_and_drops_noise(amount: str, text: str) -> None:
    assert format_usd(Decimal(amount)) == text


@pytest.mark.parametrize(
    ("amount", "shown"),
    [
        ("1234.567", "$1,234.57"),
        ("0.005", "$0.01"),
        ("0", "$0.00"),
        ("-3.2", "-$3.20"),
        ("-0.004", "$0.00"),
        ("-1234.5", "-$1,234.50"),
    ],
)
def test_dollars_put_the_sign_before_the_dollar(amount: str, shown: str) -> None:
    assert dollars(Decimal(amount)) == shown


@pytest.mark.parametrize(
    ("rate", "shown"),
    [
        ("2.49", "$2.49/h"),  # to the cent where the tenth of a cent is naught
        ("2.5", "$2.50/h"),
        ("0.0137", "$0.014/h"),  # a small disk's storage: to the tenth of a cent
        ("1234.5674", "$1,234.567/h"),
        ("0.0004", "$0.00/h"),
        ("-0.25", "-$0.25/h"),
    ],
)
def test_a_rate_is_shown_to_the_tenth_of_a_cent_where_it_has_one(rate: str, shown: str) -> None:
    assert dollars_per_hour(Decimal(rate)) == shown
