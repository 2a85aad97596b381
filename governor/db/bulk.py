"""Many rows written at once: by COPY and over arrays on PostgreSQL, by executemany elsewhere.

An executemany runs its statement once a row. psycopg pipelines the rows, but converts each
row's parameters and takes each row's result in Python, and at thousands of rows that is
most of what a pass costs. On PostgreSQL new rows are copied in (`COPY ... FROM STDIN`, the
cheapest way in for both sides), and changed rows are sent as one array a column that the
server makes into rows itself (`UPDATE ... FROM unnest(...) WHERE id = v.id`); one row
alone is cheaper as a plain UPDATE. SQLite, in the same process, keeps executemany.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from functools import lru_cache
from typing import Any

from sqlalchemy import (
    ARRAY,
    Connection,
    Enum,
    String,
    Table,
    bindparam,
    func,
    insert,
    update,
)
from sqlalchemy.types import TypeEngine

from governor.db.lean import Lean, raise_as_sqlalchemy

Row = Mapping[str, Any]


def insert_rows(connection: Connection, table: Table, rows: Sequence[Row]) -> None:
    """Insert `rows` (each with the same columns) into `table`."""
    if not rows:
        return
    if connection.dialect.name == "postgresql":
        _copy(connection, table, tuple(rows[0]), rows)
    else:
        connection.execute(insert(table), list(rows))


def update_rows(
    connection: Connection, table: Table, rows: Sequence[Row], *, adding: Collection[str] = ()
) -> None:
    """Set each row's columns on the row of `table` with its `id` (each row with the same
    columns); a column named in `adding` is added to, not replaced."""
    if not rows:
        return
    columns = tuple(c for c in rows[0] if c != "id")
    added = tuple(c for c in columns if c in adding)
    if connection.dialect.name == "postgresql" and len(rows) > 1:
        _update_unnest(table, columns, added).execute(
            connection, _as_arrays(("id", *columns), rows)
        )
    else:
        _update_by_id(table, columns, added).execute(
            connection, [{"row_id": r["id"], **{f"new_{c}": r[c] for c in columns}} for r in rows]
        )


def _copy(
    connection: Connection, table: Table, columns: Sequence[str], rows: Sequence[Row]
) -> None:
    """COPY the rows in, each value converted as its column's type converts a parameter; a
    driver's error is raised as SQLAlchemy raises it from a statement, and a connection lost
    is let go as SQLAlchemy lets it go."""
    dialect, quote = connection.dialect, connection.dialect.identifier_preparer.quote
    converters = [table.c[c].type.dialect_impl(dialect).bind_processor(dialect) for c in columns]
    pairs = list(zip(columns, converters, strict=True))
    statement = f"COPY {quote(table.name)} ({', '.join(quote(c) for c in columns)}) FROM STDIN"
    # SQLAlchemy types driver_connection as optional (a pool record's, once let go); an open
    # Connection's is always there.
    driver = connection.connection.driver_connection
    try:
        with driver.cursor() as cursor, cursor.copy(statement) as copy:  # type: ignore[union-attr]
            for row in rows:
                copy.write_row([row[c] if f is None else f(row[c]) for c, f in pairs])
    except dialect.loaded_dbapi.Error as error:
        raise_as_sqlalchemy(connection, statement, None, error)


def _as_arrays(columns: Sequence[str], rows: Sequence[Row]) -> dict[str, list[Any]]:
    return {f"{column}_values": [row[column] for row in rows] for column in columns}


def _array_of(table: Table, column: str) -> TypeEngine[Any]:
    item = table.c[column].type
    if isinstance(item, String) and not isinstance(item, Enum):
        item = String()  # an array of VARCHAR(n) would cut a longer value short, not refuse it
    return ARRAY(item)


@lru_cache(maxsize=64)
def _update_unnest(table: Table, columns: tuple[str, ...], added: tuple[str, ...]) -> Lean:
    arrays = [bindparam(f"{c}_values", type_=_array_of(table, c)) for c in ("id", *columns)]
    values = func.unnest(*arrays).table_valued("id", *columns, name="v").render_derived()
    return Lean(
        update(table)
        .where(table.c.id == values.c.id)
        .values({c: table.c[c] + values.c[c] if c in added else values.c[c] for c in columns})
    )


@lru_cache(maxsize=64)
def _update_by_id(table: Table, columns: tuple[str, ...], added: tuple[str, ...]) -> Lean:
    def new(c: str) -> Any:
        return bindparam(f"new_{c}", type_=table.c[c].type)

    return Lean(
        update(table)
        .where(table.c.id == bindparam("row_id"))
        .values({c: table.c[c] + new(c) if c in added else new(c) for c in columns})
    )
