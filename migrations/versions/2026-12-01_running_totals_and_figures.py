"""running totals and figures: the ledger's totals kept on budgets and pods, the latest
enforcement pass's figures kept on budgets, and pods found by state

Revision ID: 5c1d7e2f9a40
Revises: ed60d5a4e9e9
Create Date: 2026-12-01 10:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "5c1d7e2f9a40"
down_revision: str | None = "ed60d5a4e9e9"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

FIGURES = (
    "figures_spent_usd",
    "figures_committed_usd",
    "figures_ceiling_usd",
    "figures_burn_usd_per_hour",
)


def upgrade() -> None:
    with op.batch_alter_table("budgets", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("recorded_usd", sa.BigInteger(), server_default="0", nullable=False)
        )
        batch_op.add_column(sa.Column("figures_at", sa.DateTime(timezone=True), nullable=True))
        for name in FIGURES:
            batch_op.add_column(sa.Column(name, sa.BigInteger(), nullable=True))
    with op.batch_alter_table("pods", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("recorded_usd", sa.BigInteger(), server_default="0", nullable=False)
        )
        batch_op.create_index("ix_pods_state_budget_id", ["state", "budget_id"], unique=False)
    # The totals start from the ledger as it stands.
    op.execute(
        "UPDATE pods SET recorded_usd = COALESCE((SELECT SUM(amount_usd) FROM ledger_entries "
        "WHERE ledger_entries.pod_id = pods.id), 0)"
    )
    op.execute(
        "UPDATE budgets SET recorded_usd = COALESCE((SELECT SUM(amount_usd) FROM ledger_entries "
        "WHERE ledger_entries.budget_id = budgets.id), 0)"
    )


def downgrade() -> None:
    with op.batch_alter_table("pods", schema=None) as batch_op:
        batch_op.drop_index("ix_pods_state_budget_id")
        batch_op.drop_column("recorded_usd")
    with op.batch_alter_table("budgets", schema=None) as batch_op:
        for name in reversed(FIGURES):
            batch_op.drop_column(name)
        batch_op.drop_column("figures_at")
        batch_op.drop_column("recorded_usd")
