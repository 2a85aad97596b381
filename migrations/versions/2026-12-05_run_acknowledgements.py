"""a lost run acknowledged: when, and by whom

A run whose job went silent and whose pod stopped stays among what needs an operator first
until an operator acknowledges it.

Revision ID: a7c3e5f1b9d2
Revises: 9f3c2e7a1d64
Create Date: 2026-12-05 13:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "a7c3e5f1b9d2"
down_revision: str | None = "9f3c2e7a1d64"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("acknowledged_at", sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column("acknowledged_by", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.drop_column("acknowledged_by")
        batch_op.drop_column("acknowledged_at")
