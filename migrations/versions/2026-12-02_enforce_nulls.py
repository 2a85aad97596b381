"""absent JSON documents as SQL NULL

A JSON column that may hold nothing (a run's policy overrides, a pod's GPUs or processes, a
job's latest metrics, ...) held a JSON `null` where nothing was given, which every read then
decoded; it now holds SQL NULL, as the governor writes from now on.

Revision ID: 8c4b1f0e2d7a
Revises: 6d2e8f4a1b7c
Create Date: 2026-12-02 20:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "8c4b1f0e2d7a"
down_revision: str | None = "6d2e8f4a1b7c"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

OPTIONAL_DOCUMENTS = {  # table: its JSON columns that may be absent
    "pods": ("lost_gpus", "gpu_uuids", "process_pids"),
    "runs": ("policy", "metrics", "health_rules", "health_state", "health_stop"),
    "stop_orders": ("ack_checkpoint",),
    "gpu_samples": ("processes",),
}


def upgrade() -> None:
    for name, columns in OPTIONAL_DOCUMENTS.items():
        for column in columns:
            document = sa.table(name, sa.column(column, sa.JSON())).c[column]
            op.execute(
                sa.update(document.table)
                .where(sa.cast(document, sa.Text()) == "null")
                .values({column: sa.null()})
            )


def downgrade() -> None:
    for name, columns in OPTIONAL_DOCUMENTS.items():
        for column in columns:
            document = sa.table(name, sa.column(column, sa.JSON())).c[column]
            op.execute(
                sa.update(document.table).where(document.is_(None)).values({column: sa.JSON.NULL})
            )
