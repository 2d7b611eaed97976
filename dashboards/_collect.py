"""Reading the store once per data version into the info objects every view is drawn from."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING

from xe2tune.dashboards._best_table import BestTableInfo, _get_best_table_info
from xe2tune.dashboards._convergence import ConvergenceInfo, _get_convergence_info
from xe2tune.dashboards._importance import ImportanceInfo, _get_importance_info
from xe2tune.dashboards._roofline import RooflineInfo, _get_roofline_info
from xe2tune.errors import StoreError

if TYPE_CHECKING:
    import optuna

    from xe2tune.db import ResultStore, StudyRecord


@dataclass(frozen=True)
class DashboardInfo:
    """Every view's data at one data version of the store."""

    version: int
    rooflines: tuple[RooflineInfo, ...]
    table: BestTableInfo
    convergence: tuple[ConvergenceInfo, ...]
    studies: tuple[StudyRecord, ...]

    @property
    def n_points(self) -> int:
        """Measured configs drawn on the roofline charts, all devices together."""
        return sum(r.n_points for r in self.rooflines)


def collect_dashboard_info(store: ResultStore) -> DashboardInfo:
    """One consistent read: version first, so a concurrent write only makes it look older.

    Raises:
        StoreError: the database could not be read.
    """
    version = store.data_version()
    frame = store.results_frame()
    best = store.best_per_problem()
    studies = tuple(store.studies())
    rooflines = tuple(_get_roofline_info(frame, device, best) for device in store.devices())
    per_study = dict(tuple(frame.groupby("study_id"))) if len(frame) else {}
    convergence = tuple(
        _get_convergence_info(study, per_study[study.id])
        for study in studies if study.id in per_study
    )
    return DashboardInfo(version=version, rooflines=rooflines, table=_get_best_table_info(best),
                         convergence=convergence, studies=studies)


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
            info = _get_importance_info(study.id, self._optuna_study(study))
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
