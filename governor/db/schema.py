"""Where the database schema stands against the migrations: upgrade, and check for head."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine

MIGRATIONS_ENV = "GOVERNOR_MIGRATIONS_DIR"


class MigrationsMissing(FileNotFoundError):
    """The migrations are not beside the code (an install, not a checkout) and no setting
    says where they are: the message says what to do, in one line."""


def migrations_dir() -> Path:
    """The top-level `migrations/` folder, or the one GOVERNOR_MIGRATIONS_DIR names."""
    configured = os.environ.get(MIGRATIONS_ENV)
    path = Path(configured) if configured else Path(__file__).resolve().parents[2] / "migrations"
    if not (path / "env.py").is_file():
        raise MigrationsMissing(
            f"no database migrations at {path}: set {MIGRATIONS_ENV} to the migrations/ "
            "folder of the gpu-governor source, or run from a checkout of it"
        )
    return path


def alembic_config(url: str) -> Config:
    config = Config()
    config.set_main_option("script_location", str(migrations_dir()))
    config.attributes["database_url"] = url
    return config


def upgrade(url: str, revision: str = "head") -> None:
    command.upgrade(alembic_config(url), revision)


def downgrade(url: str, revision: str) -> None:
    command.downgrade(alembic_config(url), revision)


@dataclass(frozen=True)
class SchemaStatus:
    current: str | None
    head: str

    @property
    def at_head(self) -> bool:
        return self.current == self.head

    @property
    def empty(self) -> bool:
        return self.current is None


def schema_status(engine: Engine) -> SchemaStatus:
    head = ScriptDirectory(str(migrations_dir())).get_current_head() or ""
    with engine.connect() as connection:
        current = MigrationContext.configure(connection).get_current_revision()
    return SchemaStatus(current=current, head=head)
