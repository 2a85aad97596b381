"""a run's team pre-stop checkpoint asked once on its own; the ledger read by period

A run keeps whether its team's pre-stop checkpoint was asked for beside its budget's, so each
is asked once. The ledger's entries are indexed by the hour they start (and their id, the
order they are read in): the cost export and a team's money in its period read them so.

Revision ID: a2b4c6d8e0f1
Revises: f7a1c3e5b9d2
Create Date: 2026-12-05 22:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "a2b4c6d8e0f1"
down_revision: str | None = "f7a1c3e5b9d2"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # a plain ALTER TABLE, on SQLite too: a constant default needs no rebuild
    op.add_column(
        "runs",
        sa.Column("team_checkpoint_asked", sa.Boolean(), server_default=sa.false(), nullable=False),
    )
    op.create_index(
        "ix_ledger_entries_period_start_id", "ledger_entries", ["period_start", "id"], unique=False
    )


def downgrade() -> None:
    op.drop_index("ix_ledger_entries_period_start_id", table_name="ledger_entries")
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.drop_column("team_checkpoint_asked")
