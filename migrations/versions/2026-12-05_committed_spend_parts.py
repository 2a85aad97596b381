"""committed spend's parts: the latest enforcement pass keeps, beside spent, what stopping
will still cost (shutdown) and the storage tail on the budget, in place of their sum with
spent and the reserve (committed spend, now the sum of the parts). Until the next pass looks
at a budget its parts are unknown (null), as before any pass: a heartbeat then works its
figures out itself.

Revision ID: 9f3c2e7a1d64
Revises: d3b7e5a9c1f8
Create Date: 2026-12-05 10:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "9f3c2e7a1d64"
down_revision: str | None = "d3b7e5a9c1f8"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


# Plain ALTER TABLE statements (SQLite has dropped a column in place since 3.35): a batch
# would copy the budgets table, which the other tables' foreign keys refer to.


def upgrade() -> None:
    op.add_column("budgets", sa.Column("figures_shutdown_usd", sa.BigInteger(), nullable=True))
    op.add_column("budgets", sa.Column("figures_storage_tail_usd", sa.BigInteger(), nullable=True))
    op.drop_column("budgets", "figures_committed_usd")


def downgrade() -> None:
    op.add_column("budgets", sa.Column("figures_committed_usd", sa.BigInteger(), nullable=True))
    op.execute(
        "UPDATE budgets SET figures_committed_usd = figures_spent_usd + figures_shutdown_usd "
        "+ figures_storage_tail_usd + reserve_usd"
    )
    op.drop_column("budgets", "figures_storage_tail_usd")
    op.drop_column("budgets", "figures_shutdown_usd")
