"""What a client may send: text, JSON documents, whole numbers, amounts of money and times that
every database stores and every reader serves back. Every request schema (the API's, and the
plan document's) builds its fields from these.

Text never carries a lone surrogate (no encoder takes it: not UTF-8, not the databases, not a
JSON response) nor a NUL (PostgreSQL text cannot hold one), nor a character that does not show
what it is (`governor.domain.text`: controls, format characters such as U+202E, line
separators): a one-line field carries none at all, free text tab, newline and carriage return
and the zero-width joiners. A JSON document has string keys, finite numbers within 64 bits, a
bounded depth and a bounded size.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Annotated, Any

from annotated_types import GroupedMetadata
from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StringConstraints,
    WithJsonSchema,
)
from pydantic_core import PydanticCustomError

from governor.domain.money import parse_usd
from governor.domain.text import hidden

MAX_INT64 = 2**63 - 1
EARLIEST = datetime(2000, 1, 1, tzinfo=UTC)
LATEST = datetime(2100, 1, 1, tzinfo=UTC)


def bad_character(text: str, *, free: bool = False) -> str | None:
    """What is wrong with `text` as one line (or, `free`, as free text), if anything."""
    found = hidden(text, free=free)
    return None if found is None else f"contains {found}"


def _refuse_characters(text: str, *, free: bool, where: str = "") -> None:
    if (problem := bad_character(text, free=free)) is not None:
        raise PydanticCustomError(
            "text_character", "{where}{problem}", {"where": where, "problem": problem}
        )


def _one_line(value: Any) -> Any:
    if isinstance(value, str):
        _refuse_characters(value, free=False)
    return value


def _free_text(value: Any) -> Any:
    if isinstance(value, str):
        _refuse_characters(value, free=True)
    return value


@dataclass(frozen=True)
class _Text(GroupedMetadata):
    """A text field's limits and the characters it refuses: the metadata of a field typed
    `Annotated[str, line(...)]` or `Annotated[str, free_text(...)]`."""

    max_length: int
    min_length: int
    pattern: str | None
    refuse: Callable[[Any], Any]

    def __iter__(self) -> Iterator[object]:
        yield Field(min_length=self.min_length, max_length=self.max_length, pattern=self.pattern)
        yield BeforeValidator(self.refuse)


def line(max_length: int, *, min_length: int = 0, pattern: str | None = None) -> _Text:
    """One line of text (a name, an id, a path): no control characters."""
    return _Text(max_length, min_length, pattern, _one_line)


def free_text(max_length: int, *, min_length: int = 0, pattern: str | None = None) -> _Text:
    """Text that may run over lines (a reason, a message): tab, newline and CR allowed."""
    return _Text(max_length, min_length, pattern, _free_text)


def _at(path: str) -> str:
    return path or "the top level"


def _check_json(value: Any, path: str, depth: int, max_depth: int) -> None:
    """Refuse what a database or a reader cannot take back (keys are strings already: the
    schema says so). `path` names the place, its keys quoted and escaped: an error message
    never carries the raw input."""
    if depth > max_depth:
        raise PydanticCustomError(
            "json_depth",
            "nests deeper than {max} levels (at {at})",
            {"max": max_depth, "at": _at(path)},
        )
    if isinstance(value, dict):
        for key, item in value.items():
            _refuse_characters(key, free=False, where=f"a key at {_at(path)} ")
            _check_json(item, f"{path}[{json.dumps(key)}]", depth + 1, max_depth)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _check_json(item, f"{path}[{index}]", depth + 1, max_depth)
    elif isinstance(value, str):
        _refuse_characters(value, free=True, where=f"the text at {path} ")
    elif isinstance(value, bool):
        return
    elif isinstance(value, int) and not -MAX_INT64 - 1 <= value <= MAX_INT64:
        raise PydanticCustomError(
            "json_number", "the number at {at} does not fit in 64 bits", {"at": path}
        )
    elif isinstance(value, float) and not math.isfinite(value):
        raise PydanticCustomError("json_number", "the number at {at} is not finite", {"at": path})


def json_limits(max_bytes: int, max_depth: int = 8) -> AfterValidator:
    """A JSON document every reader can serve back, at most `max_depth` levels deep and
    `max_bytes` long as compact UTF-8 JSON."""

    def check(document: Any) -> Any:
        _check_json(document, "", 1, max_depth)
        size = len(json.dumps(document, ensure_ascii=False, separators=(",", ":")).encode())
        if size > max_bytes:
            raise PydanticCustomError(
                "json_size",
                "is {size} bytes as JSON; at most {max} are accepted",
                {"size": size, "max": max_bytes},
            )
        return document

    return AfterValidator(check)


def _in_window(value: datetime) -> datetime:
    if not EARLIEST <= value < LATEST:
        raise PydanticCustomError(
            "time_range", "must be from 2000-01-01 up to 2100-01-01 (UTC)", {}
        )
    return value.astimezone(UTC)


def _assume_utc(value: datetime) -> datetime:
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def _day_in_window(value: date) -> date:
    if not EARLIEST.date() <= value < LATEST.date():
        raise PydanticCustomError("date_range", "must be from 2000-01-01 up to 2100-01-01", {})
    return value


# An instant a client reports: with its zone, within 2000..2100, handed on in UTC.
ClientTime = Annotated[AwareDatetime, AfterValidator(_in_window)]
# A name a client looks things up by (budget, pod, run): any text a name may be.
QueryName = Annotated[str, StringConstraints(min_length=1, max_length=200)]
# An instant a client filters by: without a zone it is taken as UTC.
QueryTime = Annotated[datetime, AfterValidator(_assume_utc), AfterValidator(_in_window)]
ClientDate = Annotated[date, AfterValidator(_day_in_window)]


class Strict(BaseModel):
    # a request document: a field it does not know is refused
    model_config = ConfigDict(extra="forbid")


_MONEY_SCHEMA = WithJsonSchema(
    {"anyOf": [{"type": "string"}, {"type": "number"}], "examples": ["12.50"]}
)
# Dollars, as a decimal string or a number: at most 6 decimal places, never negative.
Usd = Annotated[Decimal, BeforeValidator(parse_usd), _MONEY_SCHEMA]
PositiveUsd = Annotated[
    Decimal, BeforeValidator(lambda v: parse_usd(v, positive=True)), _MONEY_SCHEMA
]
Name = Annotated[str, line(200, min_length=1, pattern=r"\S")]
Note = Annotated[str, free_text(2000)]
Step = Annotated[int, Field(ge=0, le=MAX_INT64)]
