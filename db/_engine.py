"""Engines: URL checks with one-line errors, and SQLite set up for one writer and many readers.

SQLite runs in WAL mode (readers never block the writer, the writer never blocks readers) with a
busy timeout, and transactions are begun explicitly: pysqlite's own transaction handling runs DDL
outside transactions and opens write transactions lazily, which can fail with SQLITE_BUSY instead
of waiting. Write sessions ``BEGIN IMMEDIATE`` so two writers queue on the lock rather than
deadlock on an upgrade from a read lock.

WAL is a property of the file, so it is switched on once, by a writer that has checked the file
is ours (:func:`use_wal`), never on connect. A read-only engine never writes at all: its
connections are ``query_only`` and it creates no file. They are still read-write connections
because a read-only SQLite connection to a WAL file leaves its -wal and -shm files behind.
"""

from __future__ import annotations

import os
import random
import sqlite3
import time
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, NoSuchModuleError, SQLAlchemyError
from sqlalchemy.pool import NullPool, StaticPool

from xe2tune.errors import NoDatabase, StoreError

BUSY_TIMEOUT_S = 30.0
WRITE_OPTION = "xe2t_write"
ACCEPTED = ("a SQLAlchemy URL such as sqlite:////abs/path/xe2tune.db or "
            "postgresql+psycopg://user@host/db")


def parse_url(url: str, *, read_only: bool = False) -> URL:
    """Parse a database URL, or raise StoreError naming it and what is accepted."""
    try:
        parsed = make_url(url)
    except (ArgumentError, ValueError) as exc:
        raise StoreError(f"malformed database URL {url!r}; accepted: {ACCEPTED}") from exc
    if parsed.get_backend_name() == "sqlite":
        _check_sqlite_path(url, parsed.database, read_only=read_only)
    return parsed


def is_memory(parsed: URL) -> bool:
    """True for an in-memory SQLite URL (one process, one shared connection)."""
    return parsed.get_backend_name() == "sqlite" and parsed.database in (None, "", ":memory:")


def _check_sqlite_path(url: str, database: str | None, *, read_only: bool) -> None:
    if database in (None, "", ":memory:"):
        return
    path = Path(database).expanduser()
    if path.is_dir():
        raise StoreError(f"database path in {url!r} is a directory; accepted: {ACCEPTED}")
    if path.exists():
        if not os.access(path, os.R_OK if read_only else os.R_OK | os.W_OK):
            needed = "readable" if read_only else "readable and writable"
            raise StoreError(f"database file in {url!r} is not {needed}")
        with path.open("rb") as handle:
            head = handle.read(16)
        if head and head != b"SQLite format 3\x00":
            raise StoreError(f"{str(path)!r} (from {url!r}) is not an SQLite database")
    elif not path.parent.is_dir():
        raise StoreError(f"directory of the database in {url!r} does not exist: {path.parent}")
    elif read_only:
        raise NoDatabase(f"nothing tuned in {url!r}: the database file does not exist yet; "
                         "run xe2tune search first")
    elif not os.access(path.parent, os.W_OK):
        raise StoreError(f"cannot create the database in {url!r}: {path.parent} is not writable")


def describe(exc: BaseException) -> str:
    """The first line of a database error, without SQLAlchemy's SQL echo and links."""
    text = str(getattr(exc, "orig", None) or exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def sqlite_connect_args() -> dict[str, Any]:
    """Connection arguments giving SQLite connections the store's busy timeout."""
    return {"timeout": BUSY_TIMEOUT_S}


def read_only_engine_kwargs(engine: Engine) -> dict[str, Any]:
    """``create_engine`` arguments for another library (optuna) reading ``engine``'s database.

    SQLite connections are ``query_only``, and closed after each use so that the last one
    removes the -wal and -shm files as the store's own do.
    """
    if engine.dialect.name != "sqlite" or is_memory(engine.url):
        return {"execution_options": {"postgresql_readonly": True}} \
            if engine.dialect.name == "postgresql" else {}
    path = str(Path(engine.url.database or "").expanduser())

    def connect() -> sqlite3.Connection:
        connection = sqlite3.connect(path, check_same_thread=False, **sqlite_connect_args())
        connection.execute("PRAGMA query_only = ON")
        return connection

    return {"creator": connect, "poolclass": NullPool}


def make_engine(url: str, *, read_only: bool = False) -> Engine:
    """An engine for ``url``; SQLite gets foreign keys, a busy timeout and explicit BEGIN.

    ``read_only`` engines never write: SQLite connections are ``query_only``, a missing SQLite
    file is an error rather than created, and other databases run read-only transactions.

    Raises:
        StoreError: the URL is malformed, names an unknown dialect or a driver that is not
            installed, or points at an unusable SQLite path (a missing one when read-only).
    """
    parsed = parse_url(url, read_only=read_only)
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
        hint = ("; pip install 'xe2tune[postgres]' installs psycopg, for postgresql+psycopg:// "
                "URLs" if parsed.get_backend_name() == "postgresql" else "")
        raise StoreError(
            f"the database driver for {shown!r} is not installed ({exc.name}){hint}"
        ) from exc
    if sqlite:
        _configure_sqlite(engine, read_only=read_only)
    elif read_only and parsed.get_backend_name() == "postgresql":
        engine = engine.execution_options(postgresql_readonly=True)
    return engine


def use_wal(engine: Engine) -> None:
    """Switch a SQLite file to WAL (it stays so); a no-op for other databases and in memory.

    Raises:
        StoreError: the database refused the switch (e.g. it is locked past the busy timeout).
    """
    if engine.dialect.name != "sqlite" or is_memory(engine.url):
        return
    # Two openers switching a new file at once each hold the read lock the other's switch
    # waits to lose; SQLite breaks that deadlock by failing one of them at once, without its
    # busy handler (four threads switching one new file, 200 files: 2-8 of 800 switches failed).
    # The one that failed has let its read lock go, so it tries again until the busy timeout.
    deadline = time.monotonic() + BUSY_TIMEOUT_S
    while True:
        try:
            with engine.connect() as connection:  # raw: the pragma fails inside our BEGIN
                raw = connection.connection.dbapi_connection
                assert raw is not None, "a checked-out connection has its DBAPI connection"
                raw.execute("PRAGMA journal_mode = WAL")
            return
        except (SQLAlchemyError, sqlite3.Error) as exc:
            if not _is_busy(exc) or time.monotonic() >= deadline:
                raise StoreError(
                    f"cannot switch {engine.url!r} to WAL mode: {describe(exc)}") from exc
        time.sleep(random.uniform(0.005, 0.05))


def _is_busy(exc: BaseException) -> bool:
    """Whether SQLite answered SQLITE_BUSY ("database is locked"), directly or through
    SQLAlchemy."""
    error = getattr(exc, "orig", None) or exc
    return isinstance(error, sqlite3.OperationalError) and "database is locked" in str(error)


def serialize_transactions(engine: Engine) -> None:
    """Make every transaction of a SQLite ``engine`` made elsewhere (optuna's) take the write
    lock at its start (``BEGIN IMMEDIATE``); a no-op for other databases and in memory.

    pysqlite runs a transaction's reads outside it and begins it only at its first write, so a
    read-check-write of two processes interleaves: optuna pops a WAITING trial by reading it
    WAITING and then setting it RUNNING (``SELECT ... FOR UPDATE``, which SQLite ignores), and
    four threads with a storage each, asking 16 enqueued trials at once, got the same trial
    twice in 41 cases over 10 runs. Taken at BEGIN, the lock makes each transaction whole.
    Connections already in the pool were set up without this and are closed.
    """
    if engine.dialect.name != "sqlite" or is_memory(engine.url):
        return

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # no BEGIN of pysqlite's own: ours, below

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Any) -> None:
        connection.exec_driver_sql("BEGIN IMMEDIATE")

    engine.dispose()


def _configure_sqlite(engine: Engine, *, read_only: bool) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # we issue BEGIN ourselves, below
        cursor = dbapi_connection.cursor()
        cursor.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
        cursor.execute("PRAGMA foreign_keys = ON")
        # Per connection, not stored in the file: NORMAL is durable enough under WAL.
        cursor.execute("PRAGMA query_only = ON" if read_only else "PRAGMA synchronous = NORMAL")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Any) -> None:
        write = connection.get_execution_options().get(WRITE_OPTION, False)
        connection.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")
