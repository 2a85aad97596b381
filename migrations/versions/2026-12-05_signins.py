"""sign-in through an identity provider: a person's tokens, and the sessions it vouches for

A token minted at a person's sign-in names them (the provider's subject and e-mail) and the
teams their groups grant; a dashboard session opened that way keeps the refresh token it is
checked again with.

Revision ID: fbc5d7e9f3c6
Revises: fab4c6d8e2b5
Create Date: 2026-12-05 19:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "fbc5d7e9f3c6"
down_revision: str | None = "fab4c6d8e2b5"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("tokens", schema=None) as batch_op:
        batch_op.add_column(sa.Column("subject", sa.String(length=255), nullable=True))
        batch_op.add_column(sa.Column("email", sa.String(length=320), nullable=True))
    op.create_table(
        "signins",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("token_id", sa.String(length=32), nullable=False),
        sa.Column("refresh_token", sa.Text(), nullable=False),
        sa.Column("checked_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("claimed_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["token_id"], ["tokens.id"], name=op.f("fk_signins_token_id_tokens")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_signins")),
        sa.UniqueConstraint("token_id", name=op.f("uq_signins_token_id")),
    )


def downgrade() -> None:
    op.drop_table("signins")
    with op.batch_alter_table("tokens", schema=None) as batch_op:
        batch_op.drop_column("email")
        batch_op.drop_column("subject")
