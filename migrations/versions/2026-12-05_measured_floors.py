"""measured floors: every run's peak per GPU and phase, kept with its configuration

A run whose plan names its model (model.id) keeps its peak per GPU and phase under the plan's
configuration (the plan's floor key: model id and revision, the recipe's digest, its GPU
count); a run whose job reported running out of memory says so.

Revision ID: e6a2c8f4b1d7
Revises: d5f9b3c7e2a4
Create Date: 2026-12-05 17:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "e6a2c8f4b1d7"
down_revision: str | None = "d5f9b3c7e2a4"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "measured_floors",
        sa.Column("run_id", sa.String(length=32), nullable=False),
        sa.Column("gpu_uuid", sa.String(length=100), nullable=False),
        sa.Column("phase", sa.String(length=40), nullable=False),
        sa.Column("plan_id", sa.String(length=32), nullable=False),
        sa.Column("model_id", sa.String(length=100), nullable=False),
        sa.Column("model_revision", sa.String(length=100), nullable=True),
        sa.Column("recipe", sa.String(length=64), nullable=False),
        sa.Column("gpu_name", sa.String(length=100), nullable=False),
        sa.Column("gpu_count", sa.Integer(), nullable=False),
        sa.Column("peak_used_bytes", sa.BigInteger(), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.id"], name=op.f("fk_measured_floors_run_id_runs")
        ),
        sa.ForeignKeyConstraint(
            ["plan_id"], ["plan_checks.id"], name=op.f("fk_measured_floors_plan_id_plan_checks")
        ),
        sa.PrimaryKeyConstraint("run_id", "gpu_uuid", "phase", name=op.f("pk_measured_floors")),
    )
    with op.batch_alter_table("measured_floors", schema=None) as batch_op:
        batch_op.create_index(
            "ix_measured_floors_model", ["model_id", "model_revision"], unique=False
        )
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("out_of_memory", sa.Boolean(), server_default=sa.false(), nullable=False)
        )
    with op.batch_alter_table("plan_checks", schema=None) as batch_op:
        batch_op.add_column(sa.Column("floor_key", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("plan_checks", schema=None) as batch_op:
        batch_op.drop_column("floor_key")
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.drop_column("out_of_memory")
    with op.batch_alter_table("measured_floors", schema=None) as batch_op:
        batch_op.drop_index("ix_measured_floors_model")
    op.drop_table("measured_floors")
