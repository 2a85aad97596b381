"""Pages of a list: how many items, after which cursor, and the page that comes back.

A cursor is opaque to callers (the storage's keyset makes and reads it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")

DEFAULT_LIMIT = 100
MAX_LIMIT = 1000
MAX_CURSOR_CHARS = 200


@dataclass(frozen=True)
class PageRequest:
    """How many items (1 to MAX_LIMIT), after which cursor (None: from the start)."""

    limit: int = DEFAULT_LIMIT
    cursor: str | None = None


FIRST = PageRequest()
WHOLE = PageRequest(limit=MAX_LIMIT)


@dataclass(frozen=True)
class Page(Generic[T]):
    items: list[T]
    next_cursor: str | None  # None: this is the last page
