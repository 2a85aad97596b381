"""folded events: identical events (the same subject, message and severity) recorded within
the fold window are one event with a `count` and the time of the latest (`last_at`); an
index on (subject, last_at) finds the event to fold into. Events stored before count once,
last at their own time. (The write limits are kept in memory: no schema.)

Revision ID: e8a9b0c1d2f3
Revises: c5f1a2b3d4e6
Create Date: 2026-12-02 10:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "e8a9b0c1d2f3"
down_revision: str | None = "c5f1a2b3d4e6"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("events") as batch:
        batch.add_column(sa.Column("count", sa.Integer(), server_default="1", nullable=False))
        batch.add_column(sa.Column("last_at", sa.DateTime(timezone=True), nullable=True))
    op.execute("UPDATE events SET last_at = at")
    with op.batch_alter_table("events") as batch:
        batch.alter_column("last_at", existing_type=sa.DateTime(timezone=True), nullable=False)
        batch.create_index("ix_events_subject_last_at", ["subject", "last_at"])


def downgrade() -> None:
    with op.batch_alter_table("events") as batch:
        batch.drop_index("ix_events_subject_last_at")
        batch.drop_column("last_at")
        batch.drop_column("count")
