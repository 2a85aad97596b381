"""names people type: a pod has a `name`, unique within its budget (stored pods are named
after their provider's reference, or `provider:reference` where two providers' references
meet in one budget); a budget's name is unique among the budgets not closed (of stored open
budgets that share a name, the first declared keeps it and the others get their id added,
`name (bud_...)`, so that the index can hold)

Revision ID: 0a1b2c3d4e5f
Revises: f4a5b6c7d8e9
Create Date: 2026-12-01 20:30:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0a1b2c3d4e5f"
down_revision: str | None = "f4a5b6c7d8e9"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

NAME_LENGTH = 200
OPEN = sa.text("state <> 'closed'")


def upgrade() -> None:
    with op.batch_alter_table("pods", schema=None) as batch_op:
        batch_op.add_column(sa.Column("name", sa.String(length=NAME_LENGTH), nullable=True))
    _name_pods()
    _rename_shared_open_budgets()
    with op.batch_alter_table("pods", schema=None) as batch_op:
        batch_op.alter_column("name", existing_type=sa.String(length=NAME_LENGTH), nullable=False)
        batch_op.create_index("uq_pods_budget_id_name", ["budget_id", "name"], unique=True)
    with op.batch_alter_table("budgets", schema=None) as batch_op:
        batch_op.create_index(
            "uq_budgets_open_name",
            ["name"],
            unique=True,
            sqlite_where=OPEN,
            postgresql_where=OPEN,
        )


def downgrade() -> None:
    with op.batch_alter_table("budgets", schema=None) as batch_op:
        batch_op.drop_index("uq_budgets_open_name")
    with op.batch_alter_table("pods", schema=None) as batch_op:
        batch_op.drop_index("uq_pods_budget_id_name")
        batch_op.drop_column("name")


def _name_pods() -> None:
    bind = op.get_bind()
    pods = bind.execute(
        sa.text("SELECT id, budget_id, provider, provider_ref FROM pods ORDER BY created_at, id")
    ).all()
    refs_in_budget: dict[tuple[str, str], int] = {}
    for pod in pods:
        key = (pod.budget_id, pod.provider_ref)
        refs_in_budget[key] = refs_in_budget.get(key, 0) + 1
    for pod in pods:
        shared = refs_in_budget[(pod.budget_id, pod.provider_ref)] > 1
        name = f"{pod.provider}:{pod.provider_ref}" if shared else pod.provider_ref
        bind.execute(
            sa.text("UPDATE pods SET name = :name WHERE id = :id"),
            {"name": name[:NAME_LENGTH], "id": pod.id},
        )


def _rename_shared_open_budgets() -> None:
    bind = op.get_bind()
    budgets = bind.execute(
        sa.text(f"SELECT id, name FROM budgets WHERE {OPEN.text} ORDER BY created_at, id")
    ).all()
    seen: set[str] = set()
    for budget in budgets:
        if budget.name not in seen:
            seen.add(budget.name)
            continue
        suffix = f" ({budget.id})"
        bind.execute(
            sa.text("UPDATE budgets SET name = :name WHERE id = :id"),
            {"name": budget.name[: NAME_LENGTH - len(suffix)] + suffix, "id": budget.id},
        )
