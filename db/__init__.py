"""The results database: SQLAlchemy 2.0 models, Alembic migrations, the ResultStore and exports.

Open it with :func:`open_store` (``XE2TUNE_DB`` or the SQLite file ``xe2tune.db`` in the user data
dir when no URL is given); it migrates the schema to head on open.
"""

from __future__ import annotations

from xe2tune.db._export import export_cpp, export_json, load_json
from xe2tune.db._migrate import migrate_database
from xe2tune.db._open import default_database_url, open_store
from xe2tune.db._records import (
    BaselineResult,
    BestQuery,
    BestResult,
    ConfirmationEntry,
    ConfirmationRecord,
    DeviceRecord,
    KernelSourceRecord,
    LeaseRecord,
    MeasuredCeilings,
    MeasurementRecord,
    ResultFilters,
    ResultRow,
    StudyRecord,
    SubmitOutcome,
    TrialRow,
)
from xe2tune.db._sql_store import SqlResultStore
from xe2tune.db._store import ResultStore
from xe2tune.db._submission import (
    CorrectnessPayload,
    ResultSubmission,
    RooflinePayload,
    TimingPayload,
)

__all__ = [
    "BaselineResult",
    "BestQuery",
    "BestResult",
    "ConfirmationEntry",
    "ConfirmationRecord",
    "CorrectnessPayload",
    "DeviceRecord",
    "KernelSourceRecord",
    "LeaseRecord",
    "MeasuredCeilings",
    "MeasurementRecord",
    "ResultFilters",
    "ResultRow",
    "ResultStore",
    "ResultSubmission",
    "RooflinePayload",
    "SqlResultStore",
    "StudyRecord",
    "SubmitOutcome",
    "TimingPayload",
    "TrialRow",
    "default_database_url",
    "export_cpp",
    "export_json",
    "load_json",
    "migrate_database",
    "open_store",
]
