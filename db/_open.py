"""Opening the results database: where it is by default; writers migrate it, readers never."""

from __future__ import annotations

from sqlalchemy.engine import make_url

from xe2tune import config
from xe2tune.db._engine import is_memory, make_engine, read_only_engine_kwargs
from xe2tune.db._migrate import check_ours, has_optuna_tables, prepare_for_writing, require_head
from xe2tune.db._sql_store import SqlResultStore
from xe2tune.errors import StoreError


class _ReadOnlyStore(SqlResultStore):
    """A store that never writes, nor lets optuna write: optuna creates its tables and version
    rows on first use, so readers only reach an optuna storage that already exists, through
    query-only connections."""

    def optuna_storage_url(self) -> str:
        """The database's URL for optuna, when optuna's tables are already there.

        Raises:
            StoreError: an in-memory database, or one without optuna's tables.
        """
        url = super().optuna_storage_url()
        if not has_optuna_tables(self._engine):
            raise StoreError(f"{self.url} has no optuna storage, and a read-only store does not "
                             "create one")
        return url

    def optuna_engine_kwargs(self) -> dict[str, object]:
        """Query-only connections for optuna's engine."""
        return read_only_engine_kwargs(self._engine)


def in_memory(url: str) -> bool:
    """True for an in-memory SQLite URL: its data lives in the process that opened it only."""
    return is_memory(make_url(url))


def default_database_url() -> str:
    """``XE2TUNE_DB`` when set, else the SQLite file ``xe2tune.db`` in the user data dir."""
    return config.database_url() or f"sqlite:///{config.data_dir() / 'xe2tune.db'}"


def open_store(url: str | None = None, *, read_only: bool = False) -> SqlResultStore:
    """Open the results database at ``url``: a writer creates and migrates it to head as needed.

    ``read_only`` stores never change the file, not even its journal mode: a missing file, an
    older schema or a database without our tables is an error naming what to run first
    (``xe2tune search`` or ``xe2tune migrate``). Either way a database of another program is
    refused before anything is written to it.

    Args:
        url: any SQLAlchemy URL (``sqlite:///...``, ``postgresql+psycopg://...``); None: the
            ``XE2TUNE_DB`` environment variable, else ``xe2tune.db`` in the user data dir.
        read_only: open for reading only (``best``, ``results``, ``export``, ``report``).

    Example:
        >>> store = open_store("sqlite:////tmp/xe2tune-example.db")  # doctest: +SKIP
        >>> store.best_per_problem()  # doctest: +SKIP
        []

    Raises:
        StoreError: malformed URL, unknown dialect or missing driver, unusable SQLite path (a
            directory, a non-database file, a missing or read-only directory), another
            program's database, a database written by a newer xe2tune, a failed migration,
            or (read-only) a missing, empty or older database.
    """
    engine = make_engine(default_database_url() if url is None else url, read_only=read_only)
    try:
        if read_only:
            check_ours(engine)
            require_head(engine)
        else:
            prepare_for_writing(engine)
    except BaseException:
        engine.dispose()
        raise
    return _ReadOnlyStore(engine) if read_only else SqlResultStore(engine)
