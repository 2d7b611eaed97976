"""Alembic migrations, run programmatically: the only way the xe2t_* schema changes."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from alembic.util import CommandError
from sqlalchemy import Connection, Engine
from sqlalchemy.exc import SQLAlchemyError

from xe2tune.db._engine import WRITE_OPTION, describe, make_engine
from xe2tune.db._models import TABLE_PREFIX
from xe2tune.errors import StoreError

MIGRATIONS_DIR = Path(__file__).with_name("migrations")
VERSION_TABLE = f"{TABLE_PREFIX}alembic_version"  # optuna owns "alembic_version"


def include_name(name: str | None, type_: str, _parent_names: Any) -> bool:
    """Only xe2t_* tables are ours to compare, create or drop: optuna's share the database."""
    return type_ != "table" or bool(name and name.startswith(TABLE_PREFIX))


def alembic_config() -> Config:
    """An Alembic config pointing at the packaged migrations (no alembic.ini needed)."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    return config


def head_revision() -> str:
    """The newest revision shipped with this version of xe2tune."""
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None, "the packaged migrations have no head"
    return head


def current_revision(engine: Engine) -> str | None:
    """The revision the database is at, None when it has no xe2t_* schema yet."""
    with engine.connect() as connection:
        context = MigrationContext.configure(connection, opts={"version_table": VERSION_TABLE})
        return context.get_current_revision()


def _known(config: Config, revision: str) -> bool:
    try:
        return ScriptDirectory.from_config(config).get_revision(revision) is not None
    except CommandError:
        return False


@contextmanager
def _migration_transaction(engine: Engine) -> Iterator[Connection]:
    """A write transaction with SQLite's foreign keys off, checked before commit.

    SQLite alters a table by copying it and dropping the original, and dropping a table runs
    its ON DELETE CASCADE actions: with foreign keys on, every measurement would vanish with the
    old trials table. The pragma only works outside a transaction, hence the raw connection.
    """
    with engine.connect() as connection:
        connection.execution_options(**{WRITE_OPTION: True})
        sqlite = engine.dialect.name == "sqlite"
        raw = connection.connection.dbapi_connection
        if sqlite and raw is not None:
            raw.execute("PRAGMA foreign_keys = OFF")
        try:
            with connection.begin():
                yield connection
                broken = (connection.exec_driver_sql("PRAGMA foreign_key_check").fetchall()
                          if sqlite else [])
                if broken:
                    raise StoreError(f"migration would leave {len(broken)} dangling "
                                     f"references, e.g. {tuple(broken[0])}; nothing was changed")
        finally:
            if sqlite and raw is not None:
                raw.execute("PRAGMA foreign_keys = ON")


def upgrade_engine(engine: Engine, revision: str = "head") -> None:
    """Upgrade the xe2t_* schema to ``revision`` in one write transaction.

    Cheap when the database is already at head (one read), so every open may call it; on SQLite
    the write lock is taken before the version is read again, so concurrent openers queue.

    Raises:
        StoreError: the database is newer than this xe2tune, or the migration failed.
    """
    try:
        current = current_revision(engine)
        if revision == "head" and current == head_revision():
            return
        config = alembic_config()
        if current is not None and not _known(config, current):
            raise StoreError(
                f"database {engine.url!r} is at schema revision {current}, unknown to this "
                "xe2tune (written by a newer version?); upgrade xe2tune"
            )
        with _migration_transaction(engine) as connection:
            config.attributes["connection"] = connection
            command.upgrade(config, revision)
    except (SQLAlchemyError, CommandError) as exc:
        raise StoreError(f"cannot migrate database {engine.url!r}: {describe(exc)}") from exc


def migrate_database(url: str, revision: str = "head") -> None:
    """Upgrade the database at ``url`` to ``revision`` (for tools and tests; open_store does it).

    Raises:
        StoreError: malformed URL, unusable path, or the migration failed.
    """
    engine = make_engine(url)
    try:
        upgrade_engine(engine, revision)
    finally:
        engine.dispose()
