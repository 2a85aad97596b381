"""preflight plan checks

Revision ID: b47e57cfb75a
Revises: 0ae24c6897af
Create Date: 2026-11-29 10:01:58.244147
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "b47e57cfb75a"
down_revision: str | None = "0ae24c6897af"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "plan_checks",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("budget_id", sa.String(length=32), nullable=False),
        sa.Column("job_id", sa.String(length=200), nullable=False),
        sa.Column(
            "verdict",
            sa.Enum("go", "canary_only", "no_go", name="verdict", native_enum=False, length=24),
            nullable=False,
        ),
        sa.Column("gpu_type", sa.String(length=100), nullable=False),
        sa.Column("modeled_gib", sa.Double(), nullable=False),
        sa.Column("usable_gib", sa.Double(), nullable=False),
        sa.Column("worst_case_usd", sa.BigInteger(), nullable=False),
        sa.Column("available_usd", sa.BigInteger(), nullable=False),
        sa.Column("plan", sa.JSON(), nullable=False),
        sa.Column("reasons", sa.JSON(), nullable=False),
        sa.Column("figures", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["budget_id"], ["budgets.id"], name=op.f("fk_plan_checks_budget_id_budgets")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_plan_checks")),
    )
    with op.batch_alter_table("plan_checks", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_plan_checks_budget_id"), ["budget_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("plan_checks", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_plan_checks_budget_id"))

    op.drop_table("plan_checks")
