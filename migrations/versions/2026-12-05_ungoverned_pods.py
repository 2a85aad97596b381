"""ungoverned pods: billing pods a provider account lists that no budget governs

The account sweep keeps each one it finds, with when it was first and last seen, why no
budget governs it, and the preserving stop a rule sent for it.

Revision ID: f8b2d4a6c0e3
Revises: fbc5d7e9f3c6
Create Date: 2026-12-05 19:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "f8b2d4a6c0e3"
down_revision: str | None = "fbc5d7e9f3c6"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "ungoverned_pods",
        sa.Column("provider", sa.String(length=40), nullable=False),
        sa.Column("provider_ref", sa.String(length=200), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=True),
        sa.Column("labels", sa.JSON(), nullable=False),
        sa.Column("gpu_type", sa.String(length=100), nullable=True),
        sa.Column("gpu_count", sa.Integer(), nullable=True),
        sa.Column("hourly_rate_usd", sa.BigInteger(), nullable=True),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("launch_id", sa.String(length=200), nullable=True),
        sa.Column("first_seen_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_seen_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("stop_after_s", sa.Double(), nullable=True),
        sa.Column("stop_sent_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("stop_detail", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("provider", "provider_ref", name=op.f("pk_ungoverned_pods")),
    )


def downgrade() -> None:
    op.drop_table("ungoverned_pods")
