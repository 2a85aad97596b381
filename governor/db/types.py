"""Column types that keep money exact and time aware on SQLite and PostgreSQL alike."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

from sqlalchemy import JSON, BigInteger, DateTime
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator

from governor.domain.money import MICRO

MICROS = Decimal(1_000_000)


class MicroUSD(TypeDecorator[Decimal]):
    """Dollars stored as whole micro-dollars in a BIGINT: exact, and summable in SQL."""

    impl = BigInteger
    cache_ok = True

    def process_bind_param(self, value: Decimal | None, dialect: Dialect) -> int | None:
        return None if value is None else to_micros(value)

    def process_result_value(self, value: int | None, dialect: Dialect) -> Decimal | None:
        return None if value is None else from_micros(value)


def to_micros(value: Decimal) -> int:
    return int((value * MICROS).to_integral_exact())


def from_micros(value: int) -> Decimal:
    return (Decimal(value) / MICROS).quantize(MICRO)


class UTCDateTime(TypeDecorator[datetime]):
    """Aware UTC in, aware UTC out; naive datetimes are refused."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime: the governor stores aware UTC only")
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


OptionalJSON = JSON(none_as_null=True)
"""A JSON document that may be absent: absent is SQL NULL, never a JSON `null`, so reading a
row whose document is absent decodes nothing."""
