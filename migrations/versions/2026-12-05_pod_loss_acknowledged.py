"""pods: terminate-only per pod, and a loss a stop would cause, acknowledged in writing

A pod whose stop cannot keep its workspace registers only with an operator's written
acknowledgement; one that no stop call works for (a one-time Spot instance) is governed as
terminate-only, as every pod of a terminate-only provider (Lambda) was before.

Revision ID: d5f9b3c7e2a4
Revises: c4e8a2d6f0b3
Create Date: 2026-12-05 16:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "d5f9b3c7e2a4"
down_revision: str | None = "c4e8a2d6f0b3"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("pods", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("terminate_only", sa.Boolean(), server_default=sa.false(), nullable=False)
        )
        batch_op.add_column(sa.Column("cannot_preserve", sa.Text(), nullable=True))
        batch_op.add_column(sa.Column("loss_acknowledged", sa.Text(), nullable=True))
        batch_op.add_column(sa.Column("loss_acknowledged_by", sa.Text(), nullable=True))
    # Lambda can only terminate: its pods were governed so by their provider until now
    pods = sa.table("pods", sa.column("provider", sa.String), sa.column("terminate_only"))
    op.execute(pods.update().where(pods.c.provider == "lambda").values(terminate_only=True))


def downgrade() -> None:
    with op.batch_alter_table("pods", schema=None) as batch_op:
        batch_op.drop_column("loss_acknowledged_by")
        batch_op.drop_column("loss_acknowledged")
        batch_op.drop_column("cannot_preserve")
        batch_op.drop_column("terminate_only")
