"""Optuna's storage on the results database, opened safely beside other processes opening it.

Optuna creates its tables and stamps its ``alembic_version`` row the first time a storage opens a
database, without a lock: two processes doing it at once (two searches or workers started
together on a fresh database) fail with ``table ... already exists``, ``database is locked``, a
duplicate version row or, on PostgreSQL, ``type "alembic_version" already exists``. Three
threads opening one fresh SQLite file, 20 files: 39 of 60 opens failed. The losers' work is all
redone by a new open, which finds what the winner left.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from sqlalchemy.exc import IntegrityError, OperationalError, ProgrammingError

from xe2tune.db._engine import serialize_transactions

if TYPE_CHECKING:  # optuna loads with the first storage: the read side rarely needs it
    import optuna

    from xe2tune.db._store import ResultStore

ATTEMPTS = 8


def open_optuna_storage(store: ResultStore) -> optuna.storages.RDBStorage:
    """optuna's ``RDBStorage`` on ``store``'s database, its tables created if they are missing
    and, on SQLite, each of its transactions holding the write lock from its start
    (:func:`~xe2tune.db._engine.serialize_transactions`: else two owners asking at once can
    pop the same WAITING trial).

    Raises:
        StoreError: an in-memory database (see ``ResultStore.optuna_storage_url``).
        sqlalchemy.exc.SQLAlchemyError: the database refused ``ATTEMPTS`` times.
    """
    storage = _create(store.optuna_storage_url(), store.optuna_engine_kwargs())
    serialize_transactions(storage.engine)
    return storage


def _create(url: str, engine_kwargs: dict[str, object]) -> optuna.storages.RDBStorage:
    import optuna

    for attempt in range(ATTEMPTS - 1):
        try:
            return optuna.storages.RDBStorage(url, engine_kwargs=engine_kwargs)
        except (IntegrityError, OperationalError, ProgrammingError):
            time.sleep(0.05 * (attempt + 1))  # the winner is committing what the loser tried
    return optuna.storages.RDBStorage(url, engine_kwargs=engine_kwargs)
