"""event retention: a routine event (an info observation, not a decision) may be folded into
its day's count once its budget is closed and it is old; `folded_rows` says, once the
retention has looked at it, how many recorded rows it stands for. A partial index finds what
the retention has still to look at. Events stored before are not routine: kept as they are.

Revision ID: d3b7e5a9c1f8
Revises: 3e7b9d2c4f61
Create Date: 2026-12-05 13:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "d3b7e5a9c1f8"
down_revision: str | None = "3e7b9d2c4f61"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("events") as batch:
        batch.add_column(
            sa.Column("routine", sa.Boolean(), server_default=sa.false(), nullable=False)
        )
        batch.add_column(sa.Column("folded_rows", sa.Integer(), nullable=True))
    op.create_index(
        "ix_events_routine_unfolded",
        "events",
        ["at"],
        sqlite_where=sa.text("routine = 1 AND folded_rows IS NULL"),
        postgresql_where=sa.text("routine AND folded_rows IS NULL"),
    )


def downgrade() -> None:
    op.drop_index("ix_events_routine_unfolded", table_name="events")
    with op.batch_alter_table("events") as batch:
        batch.drop_column("folded_rows")
        batch.drop_column("routine")
