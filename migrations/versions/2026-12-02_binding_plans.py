"""plans that bind: a budget may require a plan; a pod is registered under a plan; a plan's
check keeps the effective ceiling it was judged against and what other plans held back, can
be overridden (no_go, by an operator, with a reason) or withdrawn, and a canary_only plan's
training is released once its canary proved its memory

Revision ID: f4a5b6c7d8e9
Revises: e8a9b0c1d2f3
Create Date: 2026-12-02 10:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "f4a5b6c7d8e9"
down_revision: str | None = "e8a9b0c1d2f3"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("budgets", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("require_plan", sa.Boolean(), server_default=sa.false(), nullable=False)
        )
    with op.batch_alter_table("plan_checks", schema=None) as batch_op:
        batch_op.add_column(sa.Column("effective_ceiling_usd", sa.BigInteger(), nullable=True))
        batch_op.add_column(sa.Column("reserved_usd", sa.BigInteger(), nullable=True))
        batch_op.add_column(sa.Column("override_reason", sa.Text(), nullable=True))
        batch_op.add_column(sa.Column("override_at", sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column("withdrawn_at", sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(
            sa.Column("canary_released_at", sa.DateTime(timezone=True), nullable=True)
        )
        batch_op.add_column(sa.Column("canary_peak_gib", sa.Double(), nullable=True))
        batch_op.add_column(sa.Column("canary_released_by", sa.Text(), nullable=True))
    with op.batch_alter_table("pods", schema=None) as batch_op:
        batch_op.add_column(sa.Column("plan_id", sa.String(length=32), nullable=True))
        batch_op.create_foreign_key(
            batch_op.f("fk_pods_plan_id_plan_checks"), "plan_checks", ["plan_id"], ["id"]
        )


def downgrade() -> None:
    with op.batch_alter_table("pods", schema=None) as batch_op:
        batch_op.drop_constraint(batch_op.f("fk_pods_plan_id_plan_checks"), type_="foreignkey")
        batch_op.drop_column("plan_id")
    with op.batch_alter_table("plan_checks", schema=None) as batch_op:
        batch_op.drop_column("canary_released_by")
        batch_op.drop_column("canary_peak_gib")
        batch_op.drop_column("canary_released_at")
        batch_op.drop_column("withdrawn_at")
        batch_op.drop_column("override_at")
        batch_op.drop_column("override_reason")
        batch_op.drop_column("reserved_usd")
        batch_op.drop_column("effective_ceiling_usd")
    with op.batch_alter_table("budgets", schema=None) as batch_op:
        batch_op.drop_column("require_plan")
