"""Opening the results database: where it is by default, and migrating it on open."""

from __future__ import annotations

from xe2tune import config
from xe2tune.db._engine import make_engine
from xe2tune.db._migrate import upgrade_engine
from xe2tune.db._sql_store import SqlResultStore


def default_database_url() -> str:
    """``XE2TUNE_DB`` when set, else the SQLite file ``xe2tune.db`` in the user data dir."""
    return config.database_url() or f"sqlite:///{config.data_dir() / 'xe2tune.db'}"


def open_store(url: str | None = None) -> SqlResultStore:
    """Open (creating and migrating to head as needed) the results database at ``url``.

    Example:
        >>> store = open_store("sqlite:////tmp/xe2tune-example.db")  # doctest: +SKIP
        >>> store.best_per_problem()  # doctest: +SKIP
        []

    Raises:
        StoreError: malformed URL, unknown dialect or missing driver, unusable SQLite path (a
            directory, a non-database file, a missing or read-only directory), a database
            written by a newer xe2tune, or a failed migration.
    """
    engine = make_engine(default_database_url() if url is None else url)
    try:
        upgrade_engine(engine)
    except BaseException:
        engine.dispose()
        raise
    return SqlResultStore(engine)
