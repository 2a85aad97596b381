"""`column` is one of a list bound as a single parameter: a batch of ids without a parameter
per id where the database can take a list whole.

`column.in_(bindparam(..., expanding=True))` binds one parameter per id. For a pass that names
hundreds of ids a statement, the statement is then rendered anew each time, and on PostgreSQL
the driver converts and the server parses hundreds of parameters. PostgreSQL takes the list
as one array (`column = ANY(:ids)`); SQLite keeps the expanded `IN`.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import ARRAY, Boolean, ColumnElement, String, any_, bindparam
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.orm import QueryableAttribute
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.visitors import InternalTraversal


class OneOf(ColumnElement[bool]):
    """`column` is one of the values bound as `name` (a list, given when the statement runs)."""

    inherit_cache = True
    type = Boolean()
    # Declared on SQLAlchemy's base as an instance attribute (a ClassVar here would contradict
    # it), though every element class sets it on the class.
    _traverse_internals: list[tuple[str, InternalTraversal]] = [  # noqa: RUF012
        ("column", InternalTraversal.dp_clauseelement),
        ("name", InternalTraversal.dp_string),
    ]

    def __init__(self, column: ColumnElement[Any] | QueryableAttribute[Any], name: str) -> None:
        self.column = column
        self.name = name

    def self_group(self, against: Any = None) -> OneOf:
        return self  # already a condition: never compared with true (`= 1`) on SQLite


def one_of(column: ColumnElement[Any] | QueryableAttribute[Any], name: str) -> OneOf:
    return OneOf(column, name)


@compiles(OneOf)
def _expanded(element: OneOf, compiler: SQLCompiler, **kw: Any) -> str:
    return compiler.process(element.column.in_(bindparam(element.name, expanding=True)), **kw)


@compiles(OneOf, "postgresql")
def _array(element: OneOf, compiler: SQLCompiler, **kw: Any) -> str:
    item = element.column.type
    if isinstance(item, String):
        item = String()  # cast to VARCHAR(n), a longer value would be cut short and match
    values = bindparam(element.name, type_=ARRAY(item))
    return compiler.process(element.column == any_(values), **kw)
