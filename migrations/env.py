"""Alembic environment: the URL comes from the caller or from the governor's settings."""

from __future__ import annotations

from alembic import context
from sqlalchemy import pool, text

from governor.db.engine import build_engine
from governor.db.tables import Base

config = context.config
target_metadata = Base.metadata
MIGRATION_LOCK = 0x676F76_6D6967  # "gov" "mig": the advisory lock key of `governor migrate`


def database_url() -> str:
    url = config.attributes.get("database_url")
    if url:
        return str(url)
    from governor.settings import load_settings

    return load_settings().database_url


def run_migrations_offline() -> None:
    context.configure(
        url=database_url(),
        target_metadata=target_metadata,
        literal_binds=True,
        render_as_batch=True,
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    engine = build_engine(database_url(), poolclass=pool.NullPool)
    with engine.connect() as connection:
        if connection.dialect.name == "postgresql":
            # One migration at a time (replicas' init containers may start together): the
            # next waits here, then finds the schema at head. Released when the connection
            # closes, a crash included.
            connection.execute(text("SELECT pg_advisory_lock(:key)"), {"key": MIGRATION_LOCK})
            connection.commit()
        context.configure(
            connection=connection,
            target_metadata=target_metadata,
            render_as_batch=True,
            compare_type=True,
        )
        with context.begin_transaction():
            context.run_migrations()
    engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
