"""a pod's own processes

On a machine it shares, a pod may name its processes by PID (`pods.process_pids`) and/or by a
pattern of their names (`pods.process_pattern`): the GPU rules then judge the memory those
processes hold.

Revision ID: 6d2e8f4a1b7c
Revises: 0a1b2c3d4e5f
Create Date: 2026-12-02 18:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "6d2e8f4a1b7c"
down_revision: str | None = "0a1b2c3d4e5f"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("pods", schema=None) as batch_op:
        batch_op.add_column(sa.Column("process_pids", sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column("process_pattern", sa.String(length=200), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("pods", schema=None) as batch_op:
        batch_op.drop_column("process_pattern")
        batch_op.drop_column("process_pids")
