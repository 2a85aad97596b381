"""run metric history and GPU ownership

A pod may own a subset of its machine's GPUs by UUID (`pods.gpu_uuids`); a run keeps its
training-health rules, their running statistics and a stop they asked for
(`runs.health_rules`, `runs.health_state`, `runs.health_stop`); heartbeat metrics are kept as
a per-run time series folded like GPU samples (`run_metrics`).

Revision ID: c5f1a2b3d4e6
Revises: 991ef0f550a2
Create Date: 2026-12-02 10:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "c5f1a2b3d4e6"
down_revision: str | None = "991ef0f550a2"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "run_metrics",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("run_id", sa.String(length=32), nullable=False),
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("step", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("resolution", sa.String(length=8), nullable=False),
        sa.Column("value", sa.Double(), nullable=False),
        sa.Column("least", sa.Double(), nullable=False),
        sa.Column("most", sa.Double(), nullable=False),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], name=op.f("fk_run_metrics_run_id_runs")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_run_metrics")),
    )
    with op.batch_alter_table("run_metrics", schema=None) as batch_op:
        batch_op.create_index("ix_run_metrics_run_name_at", ["run_id", "name", "at"], unique=False)
        batch_op.create_index("ix_run_metrics_resolution_at", ["resolution", "at"], unique=False)
    with op.batch_alter_table("pods", schema=None) as batch_op:
        batch_op.add_column(sa.Column("gpu_uuids", sa.JSON(), nullable=True))
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("health_rules", sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column("health_state", sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column("health_stop", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.drop_column("health_stop")
        batch_op.drop_column("health_state")
        batch_op.drop_column("health_rules")
    with op.batch_alter_table("pods", schema=None) as batch_op:
        batch_op.drop_column("gpu_uuids")
    with op.batch_alter_table("run_metrics", schema=None) as batch_op:
        batch_op.drop_index("ix_run_metrics_resolution_at")
        batch_op.drop_index("ix_run_metrics_run_name_at")
    op.drop_table("run_metrics")
