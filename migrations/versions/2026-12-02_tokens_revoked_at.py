"""an index on when tokens were revoked

Every replica's token cache asks, once an enforcement interval, which tokens were revoked
lately; the index keeps that question from reading the whole table.

Revision ID: 3e7b9d2c4f61
Revises: 8c4b1f0e2d7a
Create Date: 2026-12-02 23:00:00.000000
"""

from collections.abc import Sequence

from alembic import op

revision: str = "3e7b9d2c4f61"
down_revision: str | None = "8c4b1f0e2d7a"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index("ix_tokens_revoked_at", "tokens", ["revoked_at"])


def downgrade() -> None:
    op.drop_index("ix_tokens_revoked_at", table_name="tokens")
