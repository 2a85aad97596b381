"""a pod's state as its provider spelled it, and whether the provider documents it

A state the provider does not document keeps the pod's last known state while its compute
accrues as running, until a documented one arrives.

Revision ID: c4d8e2a6f1b3
Revises: b8d4f2a6c1e3
Create Date: 2026-12-05 16:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "c4d8e2a6f1b3"
down_revision: str | None = "b8d4f2a6c1e3"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("pods", schema=None) as batch_op:
        batch_op.add_column(sa.Column("provider_state", sa.String(length=64), nullable=True))
        batch_op.add_column(
            sa.Column("state_known", sa.Boolean(), server_default=sa.true(), nullable=False)
        )


def downgrade() -> None:
    with op.batch_alter_table("pods", schema=None) as batch_op:
        batch_op.drop_column("state_known")
        batch_op.drop_column("provider_state")
