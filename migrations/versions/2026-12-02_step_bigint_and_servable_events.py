"""64-bit steps and servable events: a run's step columns become BIGINT on PostgreSQL
(SQLite's INTEGER holds 64 bits already), and what was stored before input was checked at the
edge is made servable again: a lone surrogate or a NUL in an event's message or evidence, or
in a plan check's documents, becomes U+FFFD; a number that is not finite becomes its name

Revision ID: 991ef0f550a2
Revises: b4e8d1a6c3f2
Create Date: 2026-12-02 09:00:00.000000
"""

import json
import math
import re
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op

revision: str = "991ef0f550a2"
down_revision: str | None = "b4e8d1a6c3f2"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

STEP_COLUMNS = ("step", "total_steps", "checkpoint_step", "pace_step")
# table: (its text columns, its JSON columns) that held what a client sent
REPAIRED = {
    "events": (("message",), ("evidence",)),
    "plan_checks": ((), ("plan", "reasons", "figures")),
}
UNSERVABLE = re.compile(r"[\x00\ud800-\udfff]")
# How such values look in stored JSON text (json.dumps escapes them): rows without any of
# these are clean and are not parsed.
TELLTALES = ("\\u", "NaN", "Infinity")


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "postgresql":
        for column in STEP_COLUMNS:
            op.alter_column("runs", column, type_=sa.BigInteger(), existing_type=sa.Integer())
    for table, (texts, documents) in REPAIRED.items():
        _repair(bind, table, texts, documents)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for column in STEP_COLUMNS:
            op.alter_column("runs", column, type_=sa.Integer(), existing_type=sa.BigInteger())


def _repair(bind: sa.Connection, name: str, texts: Sequence[str], documents: Sequence[str]) -> None:
    written = sa.table(
        name,
        sa.column("id"),
        *(sa.column(c, sa.Text()) for c in texts),
        *(sa.column(c, sa.JSON()) for c in documents),
    )
    read = sa.select(
        written.c.id,
        *(written.c[c] for c in texts),
        *(sa.cast(written.c[c], sa.Text()).label(c) for c in documents),
    )
    fixes = []
    for row in bind.execute(read.execution_options(yield_per=1000)):
        fix = {}
        for column in texts:
            value = row._mapping[column]
            if value is not None and UNSERVABLE.search(value):
                fix[column] = _clean(value)
        for column in documents:
            stored = row._mapping[column]
            if stored is not None and any(t in stored for t in TELLTALES):
                document = json.loads(stored)
                if (cleaned := _clean(document)) != document:
                    fix[column] = cleaned
        if fix:
            fixes.append((row.id, fix))
    for row_id, fix in fixes:
        bind.execute(written.update().where(written.c.id == row_id).values(**fix))


def _clean(value: Any) -> Any:
    if isinstance(value, str):
        return UNSERVABLE.sub("\ufffd", value)
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)  # "nan", "inf", "-inf": what the job client sends for them
    if isinstance(value, list):
        return [_clean(v) for v in value]
    if isinstance(value, dict):
        return {_clean(k): _clean(v) for k, v in value.items()}
    return value
