"""roles scoped to teams: the teams a token is for, and a team's threshold for org approval

A token with no row in `token_teams` is for every team (org-wide), as every token made
before is. A team's `org_approval_over_usd`: an extension of more than this needs an
org-wide operator or approver; null, a team's own may approve any.

Revision ID: fab4c6d8e2b5
Revises: f9c3e5b7d1a5
Create Date: 2026-12-05 19:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "fab4c6d8e2b5"
down_revision: str | None = "f9c3e5b7d1a5"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "token_teams",
        sa.Column("token_id", sa.String(length=32), nullable=False),
        sa.Column("team_id", sa.String(length=32), nullable=False),
        sa.ForeignKeyConstraint(
            ["token_id"], ["tokens.id"], name=op.f("fk_token_teams_token_id_tokens")
        ),
        sa.ForeignKeyConstraint(
            ["team_id"], ["teams.id"], name=op.f("fk_token_teams_team_id_teams")
        ),
        sa.PrimaryKeyConstraint("token_id", "team_id", name=op.f("pk_token_teams")),
    )
    # a plain ALTER TABLE, on SQLite too: rebuilding `teams` would break the budgets' references
    op.add_column("teams", sa.Column("org_approval_over_usd", sa.BigInteger(), nullable=True))


def downgrade() -> None:
    op.drop_column("teams", "org_approval_over_usd")
    op.drop_table("token_teams")
