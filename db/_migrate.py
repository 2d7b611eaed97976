"""Alembic migrations, run programmatically: the only way the xe2t_* schema changes."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, Engine, inspect, text
from sqlalchemy.exc import SQLAlchemyError

from xe2tune.db._engine import WRITE_OPTION, describe, make_engine, use_wal
from xe2tune.db._models import TABLE_PREFIX
from xe2tune.errors import StoreError

# Alembic (0.1-0.2 s to import, more than the rest of a store's open) loads only when a
# migration runs or a revision is unknown: the open of a database already at head, which is
# nearly every open, reads the version row and the migration files' headers itself.
if TYPE_CHECKING:
    from alembic.config import Config

MIGRATIONS_DIR = Path(__file__).with_name("migrations")
VERSION_TABLE = f"{TABLE_PREFIX}alembic_version"  # optuna owns "alembic_version"
# Optuna's RDBStorage tables (optuna 4.x) share our database, and may be there first.
OPTUNA_TABLES = frozenset({
    "alembic_version", "studies", "study_directions", "study_system_attributes",
    "study_user_attributes", "trial_heartbeats", "trial_intermediate_values", "trial_params",
    "trial_system_attributes", "trial_user_attributes", "trial_values", "trials",
    "version_info",
})


def include_name(name: str | None, type_: str, _parent_names: Any) -> bool:
    """Only xe2t_* tables are ours to compare, create or drop: optuna's share the database."""
    return type_ != "table" or bool(name and name.startswith(TABLE_PREFIX))


def alembic_config() -> Config:
    """An Alembic config pointing at the packaged migrations (no alembic.ini needed)."""
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    return config


_REVISION = re.compile(r'^revision = "(\w+)"$', re.MULTILINE)
_DOWN_REVISION = re.compile(r'^down_revision = (?:None|"(\w+)")$', re.MULTILINE)


@functools.cache
def head_revision() -> str:
    """The newest revision shipped with this version of xe2tune: the one no other revision
    names as its down_revision (the chain is linear; tests/db/test_db_migrations.py checks
    this against Alembic's own answer)."""
    revisions, parents = set(), set()
    for path in (MIGRATIONS_DIR / "versions").glob("*.py"):
        header = path.read_text(encoding="utf-8")
        revision, down = _REVISION.search(header), _DOWN_REVISION.search(header)
        assert revision and down, f"{path.name} names no revision and down_revision"
        revisions.add(revision[1])
        parents.add(down[1])
    (head,) = revisions - parents
    return head


def current_revision(engine: Engine) -> str | None:
    """The revision the database is at, None when it has no xe2t_* schema yet.

    Raises:
        StoreError: the version table holds more than one revision (not one of ours).
    """
    with engine.connect() as connection:
        if not inspect(connection).has_table(VERSION_TABLE):
            return None
        rows = connection.execute(text(f"SELECT version_num FROM {VERSION_TABLE}")).all()
    if len(rows) > 1:
        raise StoreError(f"database {engine.url!r} records {len(rows)} schema revisions in "
                         f"{VERSION_TABLE}; an xe2tune database records one")
    return rows[0][0] if rows else None


def _known(config: Config, revision: str) -> bool:
    from alembic.script import ScriptDirectory
    from alembic.util import CommandError

    try:
        return ScriptDirectory.from_config(config).get_revision(revision) is not None
    except CommandError:
        return False


def _require_known(engine: Engine, config: Config, current: str | None) -> None:
    if current is not None and not _known(config, current):
        raise StoreError(
            f"database {engine.url!r} is at schema revision {current}, unknown to this "
            "xe2tune (written by a newer version?); upgrade xe2tune"
        )


def check_ours(engine: Engine) -> None:
    """Refuse a database of another program before anything touches it (it only reads).

    Ours: it has our version table, or no tables yet, or only optuna's (a study may have been
    created first). Anything else is another program's, and migrating it would add our tables
    and switch its journal mode.

    Raises:
        StoreError: the database holds tables that are neither ours nor optuna's and no
            xe2tune version table, or it cannot be read.
    """
    try:
        with engine.connect() as connection:
            tables = set(inspect(connection).get_table_names())
    except SQLAlchemyError as exc:
        raise StoreError(f"cannot read database {engine.url!r}: {describe(exc)}") from exc
    if VERSION_TABLE in tables:
        return
    foreign = sorted(t for t in tables if not t.startswith(TABLE_PREFIX) and t not in OPTUNA_TABLES)
    if foreign:
        more = f" and {len(foreign) - 5} more" if len(foreign) > 5 else ""
        shown = ", ".join(foreign[:5]) + more
        raise StoreError(
            f"{engine.url!r} is not an xe2tune database (tables {shown}, no {VERSION_TABLE}); "
            "it was left untouched; accepted: an xe2tune or optuna database, or a new file"
        )


def has_optuna_tables(engine: Engine) -> bool:
    """True when optuna's storage tables exist (a reader must not have optuna create them).

    Raises:
        StoreError: the database cannot be read.
    """
    try:
        with engine.connect() as connection:
            return {"studies", "trials", "version_info"} <= set(
                inspect(connection).get_table_names())
    except SQLAlchemyError as exc:
        raise StoreError(f"cannot read database {engine.url!r}: {describe(exc)}") from exc


def require_head(engine: Engine) -> None:
    """For readers, which never migrate: the schema must be at this xe2tune's head.

    Raises:
        StoreError: the database has no xe2tune schema yet, an older one (run ``xe2tune
            migrate``), one newer than this xe2tune, or cannot be read.
    """
    try:
        current = current_revision(engine)
    except SQLAlchemyError as exc:
        raise StoreError(f"cannot read database {engine.url!r}: {describe(exc)}") from exc
    head = head_revision()
    if current == head:
        return
    if current is None:
        raise StoreError(f"nothing tuned in {engine.url!r}: it has no xe2tune tables yet; "
                         "run xe2tune search first")
    _require_known(engine, alembic_config(), current)
    raise StoreError(
        f"database {engine.url!r} is at schema revision {current}, older than this xe2tune's "
        f"{head}, and read-only commands never change it: run `xe2tune migrate --db URL` "
        "(or any writing command) first"
    )


# The key of the PostgreSQL advisory lock migrations take ("xe2t"); such locks are per database.
_MIGRATION_LOCK = 0x78653274


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
                if engine.dialect.name == "postgresql":
                    # Openers of a fresh database migrate one after another, as SQLite's write
                    # lock makes them: unlocked, 2-3 of 4 processes opening one at once failed
                    # (duplicate key in pg_type). The winner's version is read under the lock.
                    connection.exec_driver_sql(f"SELECT pg_advisory_xact_lock({_MIGRATION_LOCK})")
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

    Cheap when the database is already at head (one read), so every open may call it; the write
    lock (SQLite) or an advisory lock (PostgreSQL) is taken before the version is read again, so
    concurrent openers queue.

    Raises:
        StoreError: the database is newer than this xe2tune, or the migration failed.
    """
    failure = f"cannot migrate database {engine.url!r}"
    try:
        current = current_revision(engine)
    except SQLAlchemyError as exc:
        raise StoreError(f"{failure}: {describe(exc)}") from exc
    if revision == "head" and current == head_revision():
        return
    from alembic import command
    from alembic.util import CommandError

    try:
        config = alembic_config()
        _require_known(engine, config, current)
        with _migration_transaction(engine) as connection:
            config.attributes["connection"] = connection
            command.upgrade(config, revision)
    except (SQLAlchemyError, CommandError) as exc:
        raise StoreError(f"{failure}: {describe(exc)}") from exc


def prepare_for_writing(engine: Engine, revision: str = "head") -> None:
    """What a writer does on open: refuse a foreign database, switch to WAL, migrate.

    Raises:
        StoreError: another program's database, a newer schema, or a failed migration.
    """
    check_ours(engine)
    use_wal(engine)
    upgrade_engine(engine, revision)


def migrate_database(url: str, revision: str = "head") -> None:
    """Upgrade the database at ``url`` to ``revision`` (for tools and tests; open_store does it).

    Args:
        url: the database's SQLAlchemy URL.
        revision: an Alembic revision of ``db/migrations/versions`` (default: the newest).

    Raises:
        StoreError: malformed URL, unusable path, another program's database, or the
            migration failed.
    """
    engine = make_engine(url)
    try:
        prepare_for_writing(engine, revision)
    finally:
        engine.dispose()
