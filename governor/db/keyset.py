"""Pages of a list, read by keyset: each page starts after the last item of the one before
(never at an offset), so rows written between two reads neither repeat nor go missing.

A cursor is opaque to callers: the list's name and the order key of a page's last item, in
URL-safe base64. One that this list did not give is refused as Invalid, never a crash.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

from sqlalchemy import Select, and_, or_
from sqlalchemy.orm import InstrumentedAttribute, Session

from governor.db.types import UTCDateTime
from governor.domain.errors import Invalid
from governor.domain.paging import MAX_CURSOR_CHARS, Page, PageRequest

T = TypeVar("T")
Key = tuple[Any, ...]


@dataclass(frozen=True)
class Keyset:
    """The order of one list: its columns, the last one unique (the tie-breaker), all
    ascending or all descending."""

    name: str
    columns: tuple[InstrumentedAttribute[Any], ...]
    descending: bool = False

    def ordered(self, query: Select[Any]) -> Select[Any]:
        return query.order_by(*(c.desc() if self.descending else c for c in self.columns))

    def page(self, session: Session, query: Select[Any], request: PageRequest) -> Page[Any]:
        """One page of the query's rows (the query filters; this orders and bounds it)."""
        if request.cursor is not None:
            query = query.where(self._after(self.decode(request.cursor)))
        rows = list(session.scalars(self.ordered(query).limit(request.limit + 1)))
        return self._cut(rows, request.limit, lambda row: self.key_of(row))

    def page_of(self, items: Sequence[T], key: Callable[[T], Key], request: PageRequest) -> Page[T]:
        """One page of a list already in this order, computed rather than read (`key`: an
        item's values of the columns)."""
        kept = list(items)
        if request.cursor is not None:
            after = self.decode(request.cursor)
            kept = [i for i in kept if (key(i) < after if self.descending else key(i) > after)]
        return self._cut(kept[: request.limit + 1], request.limit, key)

    def key_of(self, row: Any) -> Key:
        return tuple(getattr(row, c.key) for c in self.columns)

    def encode(self, key: Key) -> str:
        values = [v.isoformat() if isinstance(v, datetime) else v for v in key]
        raw = json.dumps([self.name, *values], separators=(",", ":")).encode()
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")

    def decode(self, cursor: str) -> Key:
        refused = Invalid(
            f"cursor: {cursor[:40]!r} is not a cursor of this list; pass the next_cursor a "
            "page of this list gave, or leave cursor out to start from the first page"
        )
        try:
            raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
            name, *values = json.loads(raw)
        except (binascii.Error, ValueError, TypeError):
            raise refused from None
        if name != self.name or len(values) != len(self.columns):
            raise refused
        try:
            return tuple(_value(c, v) for c, v in zip(self.columns, values, strict=True))
        except (TypeError, ValueError, OverflowError):
            raise refused from None

    def _after(self, key: Key) -> Any:
        """Rows strictly after `key` in this order: (a, b) > (x, y) as a > x or a = x, b > y."""
        terms = []
        for i, column in enumerate(self.columns):
            beyond = column < key[i] if self.descending else column > key[i]
            equal = (c == k for c, k in zip(self.columns[:i], key[:i], strict=True))
            terms.append(and_(*equal, beyond))
        return or_(*terms)

    def _cut(self, items: list[T], limit: int, key: Callable[[T], Key]) -> Page[T]:
        if len(items) <= limit:
            return Page(items, None)
        return Page(items[:limit], self.encode(key(items[limit - 1])))


def _value(column: InstrumentedAttribute[Any], value: Any) -> Any:
    """A cursor's value as the column holds it, and as every database can compare it;
    TypeError, ValueError or OverflowError if it cannot be."""
    if isinstance(column.type, UTCDateTime):
        at = datetime.fromisoformat(value)
        if at.tzinfo is None:
            raise ValueError("naive time")
        return at.astimezone(UTC)
    expected = column.type.python_type
    if type(value) is not expected:
        raise TypeError(f"expected {expected.__name__}")
    if isinstance(value, int) and not -(2**63) <= value < 2**63:
        raise OverflowError("beyond 64 bits")
    if isinstance(value, str) and ("\x00" in value or len(value) > MAX_CURSOR_CHARS):
        raise ValueError("not a key")
    if isinstance(value, str):
        value.encode()  # a lone surrogate: UnicodeEncodeError, a ValueError
    return value
