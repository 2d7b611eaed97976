"""What the dashboard reads from the store: a small summary first, the rest per view on demand.

The summary (devices, problems, counts, the best config of every tuned problem) is what the page
loads; a roofline, a table page or a study is read when it is shown (see ``_service``).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING

from xe2tune.dashboards._best_table import BestTableInfo, get_best_table_info
from xe2tune.dashboards._convergence import ConvergenceInfo, get_convergence_info
from xe2tune.dashboards._importance import ImportanceInfo, get_importance_info
from xe2tune.db import ResultFilters
from xe2tune.errors import StoreError
from xe2tune.measurement import TrialStatus

if TYPE_CHECKING:
    from collections.abc import Sequence

    import optuna

    from xe2tune.db import BestResult, DeviceRecord, ResultStore, StudyRecord


@dataclass(frozen=True)
class DashboardSummary:
    """The store at one data version, in the size of its tuned problems, not its trials."""

    version: int
    n_measurements: int  # trials of every status
    n_ok: int
    devices: tuple[DeviceRecord, ...]
    studies: tuple[StudyRecord, ...]
    table: BestTableInfo

    @property
    def n_problems(self) -> int:
        """Problems with at least one study."""
        return len({s.problem_id for s in self.studies})


def collect_summary(store: ResultStore,
                    best: Sequence[BestResult] | None = None) -> DashboardSummary:
    """One consistent read: version first, so a concurrent write only makes it look older.

    ``best`` is the store's ``best_per_problem()`` when the caller has already read it (the
    rooflines need it too, and it is the slowest read of the summary).

    Raises:
        StoreError: the database could not be read.
    """
    version = store.data_version()
    return DashboardSummary(
        version=version, n_measurements=store.count_results(),
        n_ok=store.count_results(ResultFilters(status=TrialStatus.OK)),
        devices=tuple(store.devices()), studies=tuple(store.studies()),
        table=get_best_table_info(store.best_per_problem() if best is None else best))


def collect_convergence(store: ResultStore, study: StudyRecord) -> ConvergenceInfo:
    """One study's convergence, read when the study is opened.

    Raises:
        StoreError: the database could not be read.
    """
    return get_convergence_info(study, store.results_frame(ResultFilters(study_id=study.id)))


class ImportanceSource:
    """Parameter importances per study from the optuna storage in the store's database.

    fANOVA takes a while, so each result is kept until the study's trial count changes.
    Thread-safe: one computation at a time.
    """

    def __init__(self, store: ResultStore) -> None:
        self._store = store
        self._storage: optuna.storages.BaseStorage | None = None
        self._cache: dict[int, tuple[int, ImportanceInfo]] = {}
        self._lock = threading.Lock()

    def info(self, study: StudyRecord) -> ImportanceInfo:
        """The importance of a study's parameters, or a note saying why there is none.

        Raises:
            StoreError: the database could not be read.
        """
        with self._lock:
            cached = self._cache.get(study.id)
            if cached is not None and cached[0] == study.n_trials:
                return cached[1]
            info = get_importance_info(study.id, self._optuna_study(study))
            self._cache[study.id] = (study.n_trials, info)
            return info

    def _optuna_study(self, study: StudyRecord) -> optuna.Study | None:
        import optuna

        if study.optuna_study_name is None:
            return None
        if self._storage is None:
            try:
                url = self._store.optuna_storage_url()
            except StoreError:
                return None
            self._storage = optuna.storages.RDBStorage(
                url, engine_kwargs=self._store.optuna_engine_kwargs())
        try:
            return optuna.load_study(study_name=study.optuna_study_name, storage=self._storage)
        except KeyError:
            return None
