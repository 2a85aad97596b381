"""budgets.adopt_labelled_pods: whether the account sweep registers a pod by its budget label alone

A pod carrying a budget's label but no label naming a launch of that budget waiting for its
pod is registered under the budget only where the budget opted in; every budget made before
has not.

Revision ID: b3c5d7e9f1a2
Revises: a2b4c6d8e0f1
Create Date: 2026-12-05 22:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "b3c5d7e9f1a2"
down_revision: str | None = "a2b4c6d8e0f1"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # a plain ALTER TABLE, on SQLite too: rebuilding `budgets` would break its references
    op.add_column(
        "budgets",
        sa.Column("adopt_labelled_pods", sa.Boolean(), server_default=sa.false(), nullable=False),
    )


def downgrade() -> None:
    op.drop_column("budgets", "adopt_labelled_pods")
