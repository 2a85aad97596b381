"""Rows read as plain records, and what is set on them written back in bulk.

A pass over thousands of rows that changes a few need not build an ORM object for each: `load`
reads plain records (one per row, its columns as attributes), a record remembers what is set
on it, and `write_back` writes every record's changes in one statement per set of columns, by
primary key. That UPDATE also moves any ORM object of the same row the session holds, so a
caller that holds one reads what the pass wrote.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

from sqlalchemy import Executable, update
from sqlalchemy.orm import Session

from governor.db.tables import Base


class Record:
    """One row's columns as attributes. What is set on it is kept in `changed` until written
    back.

    A subclass names the columns a statement selects, as annotations only (no class attribute,
    no per-row check): what its records are typed as."""

    id: str  # every table written back is keyed by a string `id`
    changed: dict[str, Any]

    def __init__(self, values: Iterable[tuple[str, Any]]) -> None:
        self.__dict__.update(values)
        self.__dict__["changed"] = {}

    def __setattr__(self, name: str, value: Any) -> None:
        self.__dict__[name] = value
        self.changed[name] = value

    def __repr__(self) -> str:
        shown = ", ".join(f"{k}={v!r}" for k, v in self.__dict__.items() if k != "changed")
        return f"Record({shown})"


R = TypeVar("R", bound=Record)


def load(
    session: Session, statement: Executable, params: Mapping[str, Any], kind: type[R]
) -> list[R]:
    """The rows `statement` selects, as records of `kind` (every selected column labelled by
    its name, as `kind` names it)."""
    result = session.execute(statement, params)
    keys = tuple(result.keys())
    return [kind(zip(keys, row, strict=True)) for row in result.all()]


def write_back(session: Session, table: type[Base], records: Iterable[Record]) -> None:
    """Write what was set on these records (rows of `table`, each with its `id`), in one UPDATE
    per set of columns changed together."""
    written = [r for r in records if r.changed]
    if written:
        session.execute(update(table), [{"id": r.id, **r.changed} for r in written])
    for record in written:
        record.changed.clear()
