"""a plan kept true, a canary kept to its word, an out-of-memory seen coming

A pod's rate seen departing from its plan's quote, and a plan's spend seen passing its worst
case, are warned of once; a phase a run entered keeps the step it entered it at; a run's GPU
memory is tracked per phase beside its peak; a run is warned of a foreseen out-of-memory once.

Revision ID: b8d4f2a6c1e3
Revises: a7c3e5f1b9d2
Create Date: 2026-12-05 16:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "b8d4f2a6c1e3"
down_revision: str | None = "a7c3e5f1b9d2"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

INT64 = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    with op.batch_alter_table("pods", schema=None) as batch_op:
        batch_op.add_column(sa.Column("plan_rate_warned_usd", sa.BigInteger(), nullable=True))
    with op.batch_alter_table("plan_checks", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("worst_case_passed_at", sa.DateTime(timezone=True), nullable=True)
        )
    with op.batch_alter_table("run_phases", schema=None) as batch_op:
        batch_op.add_column(sa.Column("step", INT64, nullable=True))
    with op.batch_alter_table("gpu_peaks", schema=None) as batch_op:
        batch_op.add_column(sa.Column("track", sa.JSON(), nullable=True))
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("oom_warned", sa.Boolean(), server_default=sa.false(), nullable=False)
        )


def downgrade() -> None:
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.drop_column("oom_warned")
    with op.batch_alter_table("gpu_peaks", schema=None) as batch_op:
        batch_op.drop_column("track")
    with op.batch_alter_table("run_phases", schema=None) as batch_op:
        batch_op.drop_column("step")
    with op.batch_alter_table("plan_checks", schema=None) as batch_op:
        batch_op.drop_column("worst_case_passed_at")
    with op.batch_alter_table("pods", schema=None) as batch_op:
        batch_op.drop_column("plan_rate_warned_usd")
