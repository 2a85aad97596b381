"""Statements of the heartbeat's hot path, run on the driver's own cursor.

SQLAlchemy's execution of a compiled statement (its execution context, the set-up of its
parameters and of its result, its events) costs 0.1 to 0.15 ms of CPU a statement; the
driver's own work is a tenth of that on SQLite, and on PostgreSQL about half of it with the
round trip included. A heartbeat sends up to six statements. A `Lean` statement is compiled
once for each dialect and then run as SQLAlchemy would run it, less that work: its
parameters converted by their types' bind processors, its rows by the result columns' types,
the connection's `before_cursor_execute` and `after_cursor_execute` listeners told of it (a
listener's returned statement is not used), and a driver's error raised as SQLAlchemy raises
it, a lost connection invalidated. The connection and its transaction stay SQLAlchemy's.

A statement whose execution needs more than that (a column default to fill in, a value to
fetch back, an expanding parameter) is refused when it is compiled.
"""

from __future__ import annotations

from collections import namedtuple
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NoReturn

from sqlalchemy import BindParameter, ClauseElement, Connection, exc
from sqlalchemy.engine import Dialect
from sqlalchemy.engine.interfaces import DBAPIModule
from sqlalchemy.sql.compiler import SQLCompiler


class _Compiled:
    """A statement as one dialect runs it: its text, its parameters' order and processors."""

    __slots__ = ("binds", "dialect", "names", "positional", "results", "row", "text", "types")

    def __init__(
        self, statement: ClauseElement, dialect: Dialect, keys: Sequence[str], row: Any
    ) -> None:
        compiled = statement.compile(dialect=dialect, column_keys=list(keys))
        fetches = ("insert_prefetch", "update_prefetch", "returning")
        if (
            not isinstance(compiled, SQLCompiler)  # DDL, say
            or any(getattr(compiled, name, None) for name in fetches)
            or compiled.escaped_bind_names
            or any(bind.expanding for bind in compiled.binds.values())
        ):
            raise ValueError(f"not a statement to run lean: {compiled.string}")
        self.text: str = compiled.string
        self.positional = compiled.positiontup is not None
        self.names: tuple[str, ...] = tuple(compiled.positiontup or compiled.binds)
        self.binds = [  # by the place of its parameter
            (place, processor)
            for place, name in enumerate(self.names)
            if (processor := _bind_processor(compiled.binds[name], dialect)) is not None
        ]
        columns = list(getattr(statement, "selected_columns", ()))
        names = [c.key for c in columns]
        if row is not None and tuple(names) != row._fields:
            raise ValueError(f"{row.__name__} has fields {row._fields}, the statement {names}")
        self.row: Any = (row or namedtuple("Row", names)) if columns else None
        self.types = [column.type for column in columns]
        self.dialect = dialect
        self.results: list[tuple[int, Callable[[Any], Any]]] | None = None  # on the first rows


def _bind_processor(bind: BindParameter[Any], dialect: Dialect) -> Callable[[Any], Any] | None:
    return bind.type.dialect_impl(dialect).bind_processor(dialect)


class Lean:
    """One statement, compiled once per dialect (and set of inserted columns) and run on the
    driver's cursor of a SQLAlchemy connection."""

    __slots__ = ("_compiled", "_inserts", "_row", "_statement")

    def __init__(self, statement: ClauseElement, *, row: Any = None) -> None:
        """`row`: the named tuple class its rows come as (its fields the selected columns, in
        order); by default one made from the columns' names."""
        self._statement = statement
        self._row = row
        self._inserts = getattr(statement, "is_insert", False) is True  # compiled per columns
        self._compiled: dict[tuple[str, tuple[str, ...]], _Compiled] = {}

    def execute(
        self, connection: Connection, parameters: Mapping[str, Any] | Sequence[Mapping[str, Any]]
    ) -> list[Any]:
        """Run the statement once with `parameters`, or once a row for a sequence of them (its
        rows are then not fetched); the rows it returns, as named tuples."""
        rows: Sequence[Mapping[str, Any]]
        if isinstance(parameters, Mapping):
            many, rows = False, [parameters]
        else:
            many, rows = True, parameters
        if not rows:
            return []
        dialect = connection.dialect
        compiled = self._compiled_for(dialect, rows[0])
        bound = [_bound(compiled, row) for row in rows]
        sent: Any = bound if many else bound[0]
        driver = connection.connection.driver_connection
        # SQLAlchemy types driver_connection as optional (a pool record's, once let go); an
        # open Connection's is always there.
        cursor = driver.cursor()  # type: ignore[union-attr]
        dispatch = connection.dispatch
        try:
            if dispatch.before_cursor_execute:
                dispatch.before_cursor_execute(connection, cursor, compiled.text, sent, None, many)
            if many:
                cursor.executemany(compiled.text, sent)
            else:
                cursor.execute(compiled.text, sent)
            if dispatch.after_cursor_execute:
                dispatch.after_cursor_execute(connection, cursor, compiled.text, sent, None, many)
            return [] if compiled.row is None else _rows(compiled, cursor)
        except dialect.loaded_dbapi.Error as error:
            raise_as_sqlalchemy(connection, compiled.text, sent, error)
        finally:
            cursor.close()

    def _compiled_for(self, dialect: Dialect, first: Mapping[str, Any]) -> _Compiled:
        key = (dialect.name, tuple(first) if self._inserts else ())
        compiled = self._compiled.get(key)
        if compiled is None:
            compiled = self._compiled[key] = _Compiled(self._statement, dialect, key[1], self._row)
        return compiled


def _bound(compiled: _Compiled, row: Mapping[str, Any]) -> Any:
    binds = compiled.binds
    values = [row[name] for name in compiled.names]
    for place, bind in binds:
        values[place] = bind(values[place])
    return tuple(values) if compiled.positional else dict(zip(compiled.names, values, strict=True))


def _rows(compiled: _Compiled, cursor: Any) -> list[Any]:
    fetched = cursor.fetchall()
    if compiled.results is None:
        compiled.results = _result_processors(compiled, cursor.description)
    make, processors = compiled.row._make, compiled.results
    if not processors:
        return [make(row) for row in fetched]
    converted = []
    for row in fetched:
        values = list(row)
        for place, processor in processors:
            values[place] = processor(values[place])
        converted.append(make(values))
    return converted


def _result_processors(
    compiled: _Compiled, description: Any
) -> list[tuple[int, Callable[[Any], Any]]]:
    """Each result column's processor (by its place), for the driver's types of its values."""
    dialect, processors = compiled.dialect, []
    for place, (type_, described) in enumerate(zip(compiled.types, description, strict=True)):
        processor = type_.dialect_impl(dialect).result_processor(dialect, described[1])
        if processor is not None:
            processors.append((place, processor))
    return processors


def raise_as_sqlalchemy(
    connection: Connection, statement: str, parameters: Any, error: DBAPIModule.Error
) -> NoReturn:
    """Raise a driver's `error` as SQLAlchemy raises it from a statement; a connection lost
    is let go (invalidated) as SQLAlchemy lets it go."""
    dialect = connection.dialect
    lost = dialect.is_disconnect(error, connection.connection.driver_connection, None)
    if lost:
        connection.invalidate(error)
    raise exc.DBAPIError.instance(
        statement, parameters, error, dialect.loaded_dbapi.Error, connection_invalidated=lost
    ) from error
