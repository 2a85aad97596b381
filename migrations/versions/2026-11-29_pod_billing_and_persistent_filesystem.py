"""Pods: the persistent filesystem a terminate-only stop needs, billing reconciliation state;
stop orders: when a held order last alerted.

Revision ID: ed60d5a4e9e9
Revises: 934ab7fa6b61
Create Date: 2026-11-29 12:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "ed60d5a4e9e9"
down_revision: str | None = "934ab7fa6b61"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("pods", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("persistent_filesystem", sa.String(length=200), nullable=True)
        )
        batch_op.add_column(sa.Column("persistent_mount", sa.Text(), nullable=True))
        batch_op.add_column(sa.Column("billed_baseline_usd", sa.BigInteger(), nullable=True))
        batch_op.add_column(
            sa.Column("billed_baseline_through", sa.DateTime(timezone=True), nullable=True)
        )
        batch_op.add_column(sa.Column("billed_usd", sa.BigInteger(), nullable=True))
        batch_op.add_column(sa.Column("billed_through", sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(
            sa.Column("billing_drift", sa.Boolean(), server_default=sa.false(), nullable=False)
        )

    with op.batch_alter_table("stop_orders", schema=None) as batch_op:
        batch_op.add_column(sa.Column("alerted_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("stop_orders", schema=None) as batch_op:
        batch_op.drop_column("alerted_at")

    with op.batch_alter_table("pods", schema=None) as batch_op:
        batch_op.drop_column("billing_drift")
        batch_op.drop_column("billed_through")
        batch_op.drop_column("billed_usd")
        batch_op.drop_column("billed_baseline_through")
        batch_op.drop_column("billed_baseline_usd")
        batch_op.drop_column("persistent_mount")
        batch_op.drop_column("persistent_filesystem")
