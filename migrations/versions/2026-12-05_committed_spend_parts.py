"""committed spend's parts: the latest enforcement pass keeps, beside spent, what stopping
will still cost (shutdown) and the storage tail on the budget, in place of their sum with
spent and the reserve (committed spend, now the sum of the parts). Until the next pass looks
at a budget its parts are unknown (null), as before any pass: a heartbeat then works its
figures out itself.

Revision ID: 9f3c2e7a1d64
Revises: 3e7b9d2c4f61
Create Date: 2026-12-05 10:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "9f3c2e7a1d64"
down_revision: str | None = "3e7b9d2c4f61"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("budgets", schema=None) as batch_op:
        batch_op.add_column(sa.Column("figures_shutdown_usd", sa.BigInteger(), nullable=True))
        batch_op.add_column(sa.Column("figures_storage_tail_usd", sa.BigInteger(), nullable=True))
        batch_op.drop_column("figures_committed_usd")


def downgrade() -> None:
    with op.batch_alter_table("budgets", schema=None) as batch_op:
        batch_op.add_column(sa.Column("figures_committed_usd", sa.BigInteger(), nullable=True))
    op.execute(
        "UPDATE budgets SET figures_committed_usd = figures_spent_usd + figures_shutdown_usd "
        "+ figures_storage_tail_usd + reserve_usd"
    )
    with op.batch_alter_table("budgets", schema=None) as batch_op:
        batch_op.drop_column("figures_storage_tail_usd")
        batch_op.drop_column("figures_shutdown_usd")
