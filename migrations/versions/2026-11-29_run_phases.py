"""run phases: every phase a job reports, from the instant it said so

Revision ID: 934ab7fa6b61
Revises: b47e57cfb75a
Create Date: 2026-11-29 10:18:23.606664
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "934ab7fa6b61"
down_revision: str | None = "b47e57cfb75a"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "run_phases",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("run_id", sa.String(length=32), nullable=False),
        sa.Column(
            "phase",
            sa.Enum(
                "loading",
                "compiling",
                "canary",
                "training",
                "checkpointing",
                "evaluation",
                "export",
                name="phase",
                native_enum=False,
                length=24,
            ),
            nullable=False,
        ),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], name=op.f("fk_run_phases_run_id_runs")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_run_phases")),
    )
    with op.batch_alter_table("run_phases", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_run_phases_run_id"), ["run_id"], unique=False)
    # Runs from before this table keep the one phase they were known to be in.
    op.execute(
        "INSERT INTO run_phases (run_id, phase, at) SELECT id, phase, phase_since FROM runs "
        "WHERE phase IS NOT NULL AND phase_since IS NOT NULL"
    )


def downgrade() -> None:
    with op.batch_alter_table("run_phases", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_run_phases_run_id"))

    op.drop_table("run_phases")
