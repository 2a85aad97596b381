"""leases, secrets and nodes: which replica leads the periodic work (a term and an expiry),
the secrets every replica shares, and the machine a pod runs on (for node agents)

Revision ID: 7a3e91c4d2b8
Revises: 5c1d7e2f9a40
Create Date: 2026-12-01 13:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "7a3e91c4d2b8"
down_revision: str | None = "5c1d7e2f9a40"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    leases = op.create_table(
        "leases",
        sa.Column("name", sa.String(length=50), nullable=False),
        sa.Column("holder", sa.String(length=200), nullable=True),
        sa.Column("term", sa.BigInteger(), server_default="0", nullable=False),
        sa.Column("since", sa.DateTime(timezone=True), nullable=True),
        sa.Column("renewed_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("resumed_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("ticks", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_leases")),
    )
    # The row exists before any replica starts: taking it is an UPDATE, never a racing INSERT.
    op.bulk_insert(leases, [{"name": "scheduler", "term": 0, "ticks": {}}])
    op.create_table(
        "secrets",
        sa.Column("name", sa.String(length=50), nullable=False),
        sa.Column("value", sa.String(length=200), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_secrets")),
    )
    with op.batch_alter_table("pods", schema=None) as batch_op:
        batch_op.add_column(sa.Column("node", sa.String(length=253), nullable=True))
        batch_op.create_index(batch_op.f("ix_pods_node"), ["node"], unique=False)
        batch_op.add_column(
            sa.Column("hardware_warned", sa.Boolean(), server_default=sa.false(), nullable=False)
        )
    with op.batch_alter_table("tokens", schema=None) as batch_op:
        batch_op.add_column(sa.Column("node", sa.String(length=253), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("tokens", schema=None) as batch_op:
        batch_op.drop_column("node")
    with op.batch_alter_table("pods", schema=None) as batch_op:
        batch_op.drop_column("hardware_warned")
        batch_op.drop_index(batch_op.f("ix_pods_node"))
        batch_op.drop_column("node")
    op.drop_table("secrets")
    op.drop_table("leases")
