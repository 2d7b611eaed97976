"""One database's transactions: the session lifecycle every store of the database shares.

Each call is one transaction (``Session.begin()``), and every ``SQLAlchemyError`` becomes a
``StoreError`` naming the database. The stores of one database (results, coordination,
campaigns, worker tokens) share one ``Transactions``, so their repository functions only read
and write through the session they are given.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from sqlalchemy import Engine, event
from sqlalchemy.exc import IntegrityError, SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from xe2tune.db import _writes
from xe2tune.db._engine import WRITE_OPTION, describe
from xe2tune.db._models import Confirmation, Trial
from xe2tune.errors import StoreError

T = TypeVar("T")


def _mark_changed(session: Session, _context: Any) -> None:
    session.info["changed"] = True
    # Whose results this flush adds: trials (a measurement is only ever added with its trial)
    # and confirmation rounds.
    session.info.setdefault("results_of", set()).update(
        row.study_id for row in session.new if isinstance(row, (Trial, Confirmation)))


class Transactions:
    """Read and write transactions on one engine; safe to share between threads (each call
    opens and closes its own session)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._read_sessions = sessionmaker(engine, expire_on_commit=False)
        self._write_sessions = sessionmaker(
            engine.execution_options(**{WRITE_OPTION: True}), expire_on_commit=False
        )

    @property
    def url(self) -> str:
        """The database URL with any password masked."""
        return self.engine.url.render_as_string(hide_password=True)

    @contextmanager
    def read(self) -> Iterator[Session]:
        """A read transaction's session.

        Raises:
            StoreError: the database could not be read.
        """
        try:
            with self._read_sessions.begin() as session:
                yield session
        except SQLAlchemyError as exc:
            raise StoreError(f"cannot read {self.url}: {describe(exc)}") from exc

    def write(self, work: Callable[[Session], T]) -> T:
        """Run ``work`` in one write transaction, bumping data_version when it changed ORM rows
        (coordination written with Core statements does not bump it).

        A unique-constraint race (two writers creating the same device or problem on a database
        without SQLite's writer lock) is retried once; the retry finds the other writer's row.

        Raises:
            StoreError: the database could not be written (the cause is the SQLAlchemy error).
        """
        for attempt in (1, 2):
            try:
                with self._write_sessions.begin() as session:
                    event.listen(session, "after_flush", _mark_changed)
                    value = work(session)
                    session.flush()
                    if session.info.get("changed"):
                        version = _writes.bump_data_version(session)
                        _writes.stamp_results(session, session.info["results_of"], version)
                    return value
            except IntegrityError as exc:
                if attempt == 2:
                    raise StoreError(f"cannot write {self.url}: {describe(exc)}") from exc
            except SQLAlchemyError as exc:
                raise StoreError(f"cannot write {self.url}: {describe(exc)}") from exc
        raise AssertionError("unreachable")
