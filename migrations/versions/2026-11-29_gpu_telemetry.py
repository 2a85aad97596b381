"""gpu telemetry

Revision ID: 0ae24c6897af
Revises: 3bb848175009
Create Date: 2026-11-29 09:46:43.532818
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0ae24c6897af"
down_revision: str | None = "3bb848175009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "gpu_samples",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("pod_id", sa.String(length=32), nullable=False),
        sa.Column("gpu_uuid", sa.String(length=100), nullable=False),
        sa.Column("gpu_index", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("resolution", sa.String(length=8), nullable=False),
        sa.Column("utilization_pct", sa.Double(), nullable=True),
        sa.Column("utilization_max_pct", sa.Double(), nullable=True),
        sa.Column("memory_total_bytes", sa.BigInteger(), nullable=True),
        sa.Column("memory_used_bytes", sa.BigInteger(), nullable=True),
        sa.Column("memory_free_bytes", sa.BigInteger(), nullable=True),
        sa.Column("power_w", sa.Double(), nullable=True),
        sa.Column("temperature_c", sa.Double(), nullable=True),
        sa.Column("processes", sa.JSON(), nullable=True),
        sa.Column("clock_event_reasons", sa.BigInteger(), nullable=True),
        sa.ForeignKeyConstraint(["pod_id"], ["pods.id"], name=op.f("fk_gpu_samples_pod_id_pods")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_gpu_samples")),
    )
    with op.batch_alter_table("gpu_samples", schema=None) as batch_op:
        batch_op.create_index(
            "ix_gpu_samples_pod_gpu_at", ["pod_id", "gpu_uuid", "at"], unique=False
        )

    op.create_table(
        "gpu_peaks",
        sa.Column("run_id", sa.String(length=32), nullable=False),
        sa.Column("gpu_uuid", sa.String(length=100), nullable=False),
        sa.Column("gpu_name", sa.String(length=100), nullable=False),
        sa.Column("peak_used_bytes", sa.BigInteger(), nullable=False),
        sa.Column("memory_total_bytes", sa.BigInteger(), nullable=True),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], name=op.f("fk_gpu_peaks_run_id_runs")),
        sa.PrimaryKeyConstraint("run_id", "gpu_uuid", name=op.f("pk_gpu_peaks")),
    )
    with op.batch_alter_table("pods", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("local", sa.Boolean(), server_default=sa.false(), nullable=False)
        )
        batch_op.add_column(sa.Column("telemetry_note", sa.Text(), nullable=True))
        batch_op.add_column(sa.Column("lost_gpus", sa.JSON(), nullable=True))

    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("phase_since", sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column("progress_at", sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column("policy", sa.JSON(), nullable=True))
        batch_op.add_column(
            sa.Column("idle_alerted", sa.Boolean(), server_default=sa.false(), nullable=False)
        )
        batch_op.add_column(
            sa.Column("stall_alerted", sa.Boolean(), server_default=sa.false(), nullable=False)
        )
        batch_op.add_column(
            sa.Column("headroom_warned", sa.Boolean(), server_default=sa.false(), nullable=False)
        )

    with op.batch_alter_table("tokens", schema=None) as batch_op:
        batch_op.add_column(sa.Column("pod_id", sa.String(length=32), nullable=True))
        batch_op.create_foreign_key(batch_op.f("fk_tokens_pod_id_pods"), "pods", ["pod_id"], ["id"])


def downgrade() -> None:
    with op.batch_alter_table("tokens", schema=None) as batch_op:
        batch_op.drop_constraint(batch_op.f("fk_tokens_pod_id_pods"), type_="foreignkey")
        batch_op.drop_column("pod_id")

    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.drop_column("headroom_warned")
        batch_op.drop_column("stall_alerted")
        batch_op.drop_column("idle_alerted")
        batch_op.drop_column("policy")
        batch_op.drop_column("progress_at")
        batch_op.drop_column("phase_since")

    with op.batch_alter_table("pods", schema=None) as batch_op:
        batch_op.drop_column("lost_gpus")
        batch_op.drop_column("telemetry_note")
        batch_op.drop_column("local")

    op.drop_table("gpu_peaks")
    with op.batch_alter_table("gpu_samples", schema=None) as batch_op:
        batch_op.drop_index("ix_gpu_samples_pod_gpu_at")

    op.drop_table("gpu_samples")
