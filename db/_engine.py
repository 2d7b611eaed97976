"""Engines: URL checks with one-line errors, and SQLite set up for one writer and many readers.

SQLite runs in WAL mode (readers never block the writer, the writer never blocks readers) with a
busy timeout, and transactions are begun explicitly: pysqlite's own transaction handling runs DDL
outside transactions and opens write transactions lazily, which can fail with SQLITE_BUSY instead
of waiting. Write sessions ``BEGIN IMMEDIATE`` so two writers queue on the lock rather than
deadlock on an upgrade from a read lock.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, NoSuchModuleError
from sqlalchemy.pool import StaticPool

from xe2tune.errors import StoreError

BUSY_TIMEOUT_S = 30.0
WRITE_OPTION = "xe2t_write"
ACCEPTED = "a SQLAlchemy URL such as sqlite:////abs/path/xe2tune.db or postgresql://host/db"


def parse_url(url: str) -> URL:
    """Parse a database URL, or raise StoreError naming it and what is accepted."""
    try:
        parsed = make_url(url)
    except (ArgumentError, ValueError) as exc:
        raise StoreError(f"malformed database URL {url!r}; accepted: {ACCEPTED}") from exc
    if parsed.get_backend_name() == "sqlite":
        _check_sqlite_path(url, parsed.database)
    return parsed


def is_memory(parsed: URL) -> bool:
    """True for an in-memory SQLite URL (one process, one shared connection)."""
    return parsed.get_backend_name() == "sqlite" and parsed.database in (None, "", ":memory:")


def _check_sqlite_path(url: str, database: str | None) -> None:
    if database in (None, "", ":memory:"):
        return
    path = Path(database).expanduser()
    if path.is_dir():
        raise StoreError(f"database path in {url!r} is a directory; accepted: {ACCEPTED}")
    if path.exists():
        if not os.access(path, os.R_OK | os.W_OK):
            raise StoreError(f"database file in {url!r} is not readable and writable")
        with path.open("rb") as handle:
            head = handle.read(16)
        if head and head != b"SQLite format 3\x00":
            raise StoreError(f"{str(path)!r} (from {url!r}) is not an SQLite database")
    elif not path.parent.is_dir():
        raise StoreError(f"directory of the database in {url!r} does not exist: {path.parent}")
    elif not os.access(path.parent, os.W_OK):
        raise StoreError(f"cannot create the database in {url!r}: {path.parent} is not writable")


def describe(exc: BaseException) -> str:
    """The first line of a database error, without SQLAlchemy's SQL echo and links."""
    text = str(getattr(exc, "orig", None) or exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def sqlite_connect_args() -> dict[str, Any]:
    """Connection arguments giving SQLite connections the store's busy timeout."""
    return {"timeout": BUSY_TIMEOUT_S}


def make_engine(url: str) -> Engine:
    """An engine for ``url``; SQLite gets WAL, foreign keys, a busy timeout and explicit BEGIN.

    Raises:
        StoreError: the URL is malformed, names an unknown dialect or a driver that is not
            installed, or points at an unusable SQLite path.
    """
    parsed = parse_url(url)
    shown = parsed.render_as_string(hide_password=True)
    kwargs: dict[str, Any] = {}
    sqlite = parsed.get_backend_name() == "sqlite"
    if sqlite:
        kwargs["connect_args"] = {**sqlite_connect_args(), "check_same_thread": False}
        if is_memory(parsed):
            kwargs["poolclass"] = StaticPool
    try:
        engine = create_engine(parsed, **kwargs)
    except NoSuchModuleError as exc:
        raise StoreError(
            f"unknown database dialect in {shown!r}; accepted: {ACCEPTED}"
        ) from exc
    except ImportError as exc:
        raise StoreError(
            f"the database driver for {shown!r} is not installed ({exc.name})"
        ) from exc
    if sqlite:
        _configure_sqlite(engine, wal=not is_memory(parsed))
    return engine


def _configure_sqlite(engine: Engine, *, wal: bool) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # we issue BEGIN ourselves, below
        cursor = dbapi_connection.cursor()
        cursor.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
        cursor.execute("PRAGMA foreign_keys = ON")
        if wal:
            cursor.execute("PRAGMA journal_mode = WAL")
            cursor.execute("PRAGMA synchronous = NORMAL")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Any) -> None:
        write = connection.get_execution_options().get(WRITE_OPTION, False)
        connection.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")
