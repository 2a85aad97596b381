"""stop latency learned from each provider's stops: every completed stop's time from the
first request to the pod confirmed stopped, kept per provider and region (the latest twenty);
on each pod, its region and the 95th percentile its provider and region's stops teach.

Revision ID: c4e8a2d6f0b3
Revises: c4d8e2a6f1b3
Create Date: 2026-12-05 16:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "c4e8a2d6f0b3"
down_revision: str | None = "c4d8e2a6f1b3"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


# Plain ALTER TABLE statements: a batch would copy the pods table, which other tables'
# foreign keys refer to.


def upgrade() -> None:
    op.add_column("pods", sa.Column("region", sa.String(length=100), nullable=True))
    op.add_column("pods", sa.Column("learned_stop_latency_s", sa.Double(), nullable=True))
    op.add_column(
        "pods",
        sa.Column("learned_from_stops", sa.Integer(), server_default="0", nullable=False),
    )
    op.create_table(
        "stop_times",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("provider", sa.String(length=40), nullable=False),
        sa.Column("region", sa.String(length=100), nullable=True),
        sa.Column("pod_id", sa.String(length=32), nullable=False),
        sa.Column("stop_order_id", sa.String(length=32), nullable=False),
        sa.Column("sent_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("stopped_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("seconds", sa.Double(), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(["pod_id"], ["pods.id"], name=op.f("fk_stop_times_pod_id_pods")),
        sa.ForeignKeyConstraint(
            ["stop_order_id"],
            ["stop_orders.id"],
            name=op.f("fk_stop_times_stop_order_id_stop_orders"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_stop_times")),
    )
    op.create_index(
        "ix_stop_times_provider_region", "stop_times", ["provider", "region", "id"], unique=False
    )


def downgrade() -> None:
    op.drop_index("ix_stop_times_provider_region", table_name="stop_times")
    op.drop_table("stop_times")
    op.drop_column("pods", "learned_from_stops")
    op.drop_column("pods", "learned_stop_latency_s")
    op.drop_column("pods", "region")
