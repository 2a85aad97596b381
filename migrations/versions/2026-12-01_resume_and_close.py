"""resume and close: a run's attempt (a resumed pod's run continues as attempt N+1, from
when it started), when a
pod was last resumed or released, when a budget was closed, and tokens that end (revoked
at a resume or by an operator, or expiring; the one operator token adopted from the server's
settings marked as such)

Revision ID: b4e8d1a6c3f2
Revises: 7a3e91c4d2b8
Create Date: 2026-12-01 16:30:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "b4e8d1a6c3f2"
down_revision: str | None = "7a3e91c4d2b8"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("attempt", sa.Integer(), server_default="1", nullable=False))
        batch_op.add_column(sa.Column("started_at", sa.DateTime(timezone=True), nullable=True))
    op.execute("UPDATE runs SET started_at = created_at")
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.alter_column(
            "started_at", existing_type=sa.DateTime(timezone=True), nullable=False
        )
    with op.batch_alter_table("pods", schema=None) as batch_op:
        batch_op.add_column(sa.Column("resumed_at", sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column("released_at", sa.DateTime(timezone=True), nullable=True))
    with op.batch_alter_table("budgets", schema=None) as batch_op:
        batch_op.add_column(sa.Column("closed_at", sa.DateTime(timezone=True), nullable=True))
    with op.batch_alter_table("tokens", schema=None) as batch_op:
        batch_op.add_column(sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(
            sa.Column("bootstrap", sa.Boolean(), server_default=sa.false(), nullable=False)
        )
    # the operator token adopted from the server's settings was labelled after its variable
    op.execute("UPDATE tokens SET bootstrap = true WHERE label = 'GOVERNOR_OPERATOR_TOKEN'")


def downgrade() -> None:
    with op.batch_alter_table("tokens", schema=None) as batch_op:
        batch_op.drop_column("bootstrap")
        batch_op.drop_column("expires_at")
        batch_op.drop_column("revoked_at")
    with op.batch_alter_table("budgets", schema=None) as batch_op:
        batch_op.drop_column("closed_at")
    with op.batch_alter_table("pods", schema=None) as batch_op:
        batch_op.drop_column("released_at")
        batch_op.drop_column("resumed_at")
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.drop_column("started_at")
        batch_op.drop_column("attempt")
