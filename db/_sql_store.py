"""SqlResultStore: the ResultStore over any SQLAlchemy database (SQLite by default).

Its transactions (``db/_transactions.py``: one ``Session.begin()`` per call, every
``SQLAlchemyError`` a ``StoreError``) are shared with the other stores of the database; the
repository functions it calls only read and write through the session they are given.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from sqlalchemy import Engine
from sqlalchemy.orm import Session

from xe2tune.db import _best, _confirmations, _dashboard_reads, _reads, _writes
from xe2tune.db._convert import trial_row
from xe2tune.db._engine import is_memory, sqlite_connect_args
from xe2tune.db._frame import FRAME_CHUNK_ROWS, results_frame
from xe2tune.db._records import BestsSince, StudyRecord, SubmitOutcome
from xe2tune.db._transactions import Transactions
from xe2tune.errors import StoreError

if TYPE_CHECKING:
    import pandas

    from xe2tune.db._records import (
        BestQuery,
        BestResult,
        ConfirmationRecord,
        DeviceRecord,
        MeasuredCeilings,
        ResultFilters,
        ResultRow,
        TrialEntry,
        TrialRow,
    )
    from xe2tune.db._submission import ResultSubmission
    from xe2tune.kernels import ProblemSpec
    from xe2tune.measurement import TrialResult


class SqlResultStore:
    """ResultStore on a SQLAlchemy engine; see ``xe2tune.db.ResultStore`` for the contract.

    Build it with :func:`xe2tune.db.open_store`, which migrates the schema first.
    """

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        # shared with the other stores of this database (coordination, campaigns, tokens)
        self.transactions = Transactions(engine)

    @property
    def url(self) -> str:
        """The database URL with any password masked."""
        return self._engine.url.render_as_string(hide_password=True)

    def optuna_storage_url(self) -> str:
        """The same database, for ``optuna.storages.RDBStorage`` and ``optuna-dashboard``."""
        if is_memory(self._engine.url):
            raise StoreError("an in-memory database cannot be shared with optuna; use a file")
        return self._engine.url.render_as_string(hide_password=False)

    def optuna_engine_kwargs(self) -> dict[str, object]:
        """SQLite gets the store's busy timeout so optuna waits for the lock instead of failing."""
        if self._engine.url.get_backend_name() == "sqlite":
            return {"connect_args": sqlite_connect_args()}
        return {}

    def close(self) -> None:
        """Dispose of the engine's connections."""
        self._engine.dispose()

    # -- writes -----------------------------------------------------------------------------

    def upsert_device(self, device: DeviceRecord) -> int:
        """See ResultStore.upsert_device."""
        return self.transactions.write(lambda s: _writes.upsert_device(s, device))

    def save_ceilings(self, device_id: int, ceilings: MeasuredCeilings) -> None:
        """See ResultStore.save_ceilings."""
        self.transactions.write(lambda s: _writes.save_ceilings(s, device_id, ceilings))

    def ceilings(self, device_id: int) -> MeasuredCeilings | None:
        """See ResultStore.ceilings."""
        with self.transactions.read() as session:
            return _reads.ceilings(session, device_id)

    def upsert_kernel_source(self, family: str, source_hash: str) -> int:
        """See ResultStore.upsert_kernel_source."""
        return self.transactions.write(
            lambda s: _writes.upsert_kernel_source(s, family, source_hash))

    def upsert_problem(self, problem: ProblemSpec) -> int:
        """See ResultStore.upsert_problem."""
        return self.transactions.write(lambda s: _writes.upsert_problem(s, problem))

    def get_or_create_study(
        self, *, device_id: int, kernel_source_id: int, problem_id: int, sampler: str,
        optuna_study_name: str | None,
    ) -> StudyRecord:
        """See ResultStore.get_or_create_study."""
        study_id = self.transactions.write(lambda s: _writes.get_or_create_study(
            s, device_id=device_id, kernel_source_id=kernel_source_id, problem_id=problem_id,
            sampler=sampler, optuna_study_name=optuna_study_name,
        ).id)
        record = self.study(study_id)
        assert record is not None, "a study just written is readable"
        return record

    def move_to_optuna_study(self, study_id: int, optuna_study_name: str) -> StudyRecord:
        """See ResultStore.move_to_optuna_study."""
        self.transactions.write(lambda s: _writes.move_to_optuna_study(s, study_id,
                                                                       optuna_study_name))
        record = self.study(study_id)
        assert record is not None, "a study just written is readable"
        return record

    def record_trial(
        self, study_id: int, result: TrialResult, *, number: int | None = None,
        is_default: bool = False, baseline: str | None = None,
    ) -> int:
        """See ResultStore.record_trial."""
        return self.transactions.write(lambda s: _writes.insert_trial(
            s, study_id, result, number=number, is_default=is_default, origin="local",
            baseline=baseline))

    def record_trials(self, study_id: int, entries: Sequence[TrialEntry]) -> list[int]:
        """See ResultStore.record_trials."""
        return self.transactions.write(lambda s: _writes.insert_trials(s, study_id, entries,
                                                           origin="local"))

    def find_trial(self, study_id: int, config_hash: str) -> TrialRow | None:
        """See ResultStore.find_trial."""
        with self.transactions.read() as session:
            row = _writes.find_trial(session, study_id, config_hash)
            return None if row is None else trial_row(row, samples=True)

    def submit_result(self, submission: ResultSubmission) -> SubmitOutcome:
        """See ResultStore.submit_result."""
        return self.transactions.write(lambda s: _submit(s, submission))

    def record_confirmation(self, record: ConfirmationRecord) -> int:
        """See ResultStore.record_confirmation."""
        return self.transactions.write(lambda s: _confirmations.insert_confirmation(s, record))

    def confirmation(self, study_id: int) -> ConfirmationRecord | None:
        """See ResultStore.confirmation."""
        with self.transactions.read() as session:
            return _confirmations.latest_confirmations(session, [study_id]).get(study_id)

    # -- reads ------------------------------------------------------------------------------

    def best(self, query: BestQuery) -> BestResult | None:
        """See ResultStore.best."""
        with self.transactions.read() as session:
            ids = _reads.device_ids(session, query.device)
            rows = _best.study_bests(session, ids, query)
            if not rows:
                return None
            device_id = _best.choose_device(((row.device_name, row.device_id) for row in rows),
                                            query.device is not None)
            chosen = _best.best_study_per_problem(
                [row for row in rows if row.device_id == device_id])
            nearest, match = _best.nearest(chosen.values(), query)
            return _best.best_results(session, [nearest], match=match, query=query)[0]

    def best_per_problem(self, device: str | None = None) -> list[BestResult]:
        """See ResultStore.best_per_problem."""
        with self.transactions.read() as session:
            rows = _best.study_bests(session, _reads.device_ids(session, device))
            chosen = list(_best.best_study_per_problem(rows).values())
            return sorted(_best.best_results(session, chosen, match="exact"),
                          key=_best.best_order)

    def best_per_problem_since(self, version: int) -> BestsSince:
        """See ResultStore.best_per_problem_since."""
        with self.transactions.read() as session:
            # the version first: a write committed after it is read again next time
            now = _reads.data_version(session)
            rows = _best.study_bests(session, None, changed_after=version)
            chosen = list(_best.best_study_per_problem(rows).values())
            return BestsSince(version=now, bests=tuple(sorted(
                _best.best_results(session, chosen, match="exact"), key=_best.best_order)))

    def results(
        self, filters: ResultFilters | None = None, *, limit: int = 100, offset: int = 0
    ) -> list[ResultRow]:
        """See ResultStore.results."""
        _reads.check_page(limit, offset)
        with self.transactions.read() as session:
            ids = _reads.device_ids(session, filters.device if filters else None)
            return _reads.results(session, filters, ids, limit=limit, offset=offset)

    def count_results(self, filters: ResultFilters | None = None) -> int:
        """See ResultStore.count_results."""
        with self.transactions.read() as session:
            ids = _reads.device_ids(session, filters.device if filters else None)
            return _reads.count_results(session, filters, ids)

    def results_frame(self, filters: ResultFilters | None = None) -> pandas.DataFrame:
        """See ResultStore.results_frame."""
        with self.transactions.read() as session:
            ids = _reads.device_ids(session, filters.device if filters else None)
            return results_frame(_reads.result_tuples(session, filters, ids))

    def results_frames(
        self, filters: ResultFilters | None = None, *, limit: int | None = None,
        chunk_rows: int = FRAME_CHUNK_ROWS,
    ) -> Iterator[pandas.DataFrame]:
        """See ResultStore.results_frames."""
        with self.transactions.read() as session:
            ids = _reads.device_ids(session, filters.device if filters else None)
            empty = True
            for rows in _reads.result_tuple_chunks(session, filters, ids, limit=limit,
                                                   chunk_rows=chunk_rows):
                empty = False
                yield results_frame(rows)
            if empty:  # the columns, so that a CSV of nothing still has its header
                yield results_frame([])

    def devices(self) -> list[DeviceRecord]:
        """See ResultStore.devices."""
        with self.transactions.read() as session:
            return _reads.devices(session)

    def studies(self, device: str | None = None) -> list[StudyRecord]:
        """See ResultStore.studies."""
        with self.transactions.read() as session:
            return _reads.studies(session, _reads.device_ids(session, device))

    def study(self, study_id: int) -> StudyRecord | None:
        """See ResultStore.study."""
        with self.transactions.read() as session:
            found = _reads.studies(session, study_id=study_id)
            return found[0] if found else None

    def trials(self, study_id: int) -> list[TrialRow]:
        """See ResultStore.trials."""
        with self.transactions.read() as session:
            return _reads.trials(session, study_id)

    def roofline_points(self, device_id: int) -> _dashboard_reads.RooflinePoints:
        """See ResultStore.roofline_points."""
        with self.transactions.read() as session:
            return _dashboard_reads.roofline_points(session, device_id)

    def trial_details(self, trial_ids: Sequence[int]) -> dict[int, _dashboard_reads.TrialDetail]:
        """See ResultStore.trial_details."""
        with self.transactions.read() as session:
            return _dashboard_reads.trial_details(session, [int(i) for i in trial_ids])

    def data_version(self) -> int:
        """See ResultStore.data_version."""
        with self.transactions.read() as session:
            return _reads.data_version(session)


def _submit(session: Session, submission: ResultSubmission) -> SubmitOutcome:
    device_id = _writes.upsert_device(session, submission.device)
    source_id = _writes.upsert_kernel_source(session, submission.family, submission.source_hash)
    problem_id = _writes.upsert_problem(session, submission.problem)
    study = _writes.get_or_create_study(
        session, device_id=device_id, kernel_source_id=source_id, problem_id=problem_id,
        sampler="remote", optuna_study_name=None,
    )
    existing = _writes.find_trial(session, study.id, submission.config_hash)
    if existing is not None:
        return SubmitOutcome(trial_id=existing.id, study_id=study.id, created=False)
    trial_id = _writes.insert_trial(session, study.id, submission.trial_result(), number=None,
                                    is_default=submission.is_default, origin="remote",
                                    baseline=submission.baseline)
    return SubmitOutcome(trial_id=trial_id, study_id=study.id, created=True)
