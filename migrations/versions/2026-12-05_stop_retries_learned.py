"""stop retries learned: each stop order counts the provider's retryable refusals and times
them (the longest span from a refused request to the next, when the request after the latest
refusal went); each stop time keeps them, so a provider whose stops are refused carries the
worst retry sequence it has shown.

Revision ID: fde7f9b1c5e8
Revises: e6a2c8f4b1d7
Create Date: 2026-12-05 19:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "fde7f9b1c5e8"
down_revision: str | None = "e6a2c8f4b1d7"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


# Plain ALTER TABLE statements: a batch would copy stop_orders, which stop_times refers to.


def upgrade() -> None:
    op.add_column(
        "stop_orders", sa.Column("refusals", sa.Integer(), server_default="0", nullable=False)
    )
    op.add_column(
        "stop_orders", sa.Column("refused_request_at", sa.DateTime(timezone=True), nullable=True)
    )
    op.add_column("stop_orders", sa.Column("retried_at", sa.DateTime(timezone=True), nullable=True))
    op.add_column(
        "stop_orders",
        sa.Column("longest_retry_s", sa.Double(), server_default="0", nullable=False),
    )
    op.add_column(
        "stop_times", sa.Column("refusals", sa.Integer(), server_default="0", nullable=False)
    )
    op.add_column(
        "stop_times", sa.Column("retrying_s", sa.Double(), server_default="0", nullable=False)
    )
    op.add_column(
        "stop_times",
        sa.Column("longest_retry_s", sa.Double(), server_default="0", nullable=False),
    )


def downgrade() -> None:
    for column in ("longest_retry_s", "retrying_s", "refusals"):
        op.drop_column("stop_times", column)
    for column in ("longest_retry_s", "retried_at", "refused_request_at", "refusals"):
        op.drop_column("stop_orders", column)
