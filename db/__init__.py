"""The results database: SQLAlchemy 2.0 models, Alembic migrations, the ResultStore and exports.

Open it with :func:`open_store` (``XE2TUNE_DB`` or the SQLite file ``xe2tune.db`` in the user data
dir when no URL is given); it migrates the schema to head on open.
"""

from __future__ import annotations

from xe2tune.db._best import best_among, best_order, names_device
from xe2tune.db._campaign_remote import (
    BUDGET_ATTR,
    CAMPAIGN_ATTR,
    CAMPAIGN_STUDY,
    CLOSED_ATTR,
    COUNTED_BY_ATTR,
    OWNER_ATTR,
    STUDY_ATTR,
    WORKER_ATTR,
    RemoteStudyStatus,
    counted_by,
    mixing_error,
)
from xe2tune.db._campaigns import (
    CampaignRecord,
    CampaignStatus,
    CampaignStore,
    CampaignStudyStatus,
    CampaignWorkerStatus,
)
from xe2tune.db._coordination import SqlCoordination
from xe2tune.db._dashboard_reads import RooflinePoints, TrialDetail
from xe2tune.db._export import export_cpp, export_json, load_json
from xe2tune.db._frame import results_csv
from xe2tune.db._migrate import migrate_database
from xe2tune.db._open import default_database_url, in_memory, open_store
from xe2tune.db._optuna_storage import open_optuna_storage
from xe2tune.db._records import (
    BaselineResult,
    BestQuery,
    BestResult,
    BestsSince,
    ConfirmationEntry,
    ConfirmationRecord,
    DeviceRecord,
    KernelSourceRecord,
    LeaseRecord,
    MeasuredCeilings,
    MeasurementRecord,
    ProblemGroup,
    ResultFilters,
    ResultRow,
    StudyRecord,
    SubmitOutcome,
    TrialEntry,
    TrialRow,
    kv_dtype_conflict,
    problem_group,
)
from xe2tune.db._sql_store import SqlResultStore
from xe2tune.db._store import ResultStore
from xe2tune.db._submission import (
    CorrectnessPayload,
    ResultSubmission,
    RooflinePayload,
    TimingPayload,
)
from xe2tune.db._worker_tokens import MintedToken, WorkerTokenRecord, WorkerTokenStore

__all__ = [
    "best_among",
    "ProblemGroup",
    "problem_group",
    "kv_dtype_conflict",
    "best_order",
    "names_device",
    "BUDGET_ATTR",
    "CAMPAIGN_ATTR",
    "CAMPAIGN_STUDY",
    "CLOSED_ATTR",
    "COUNTED_BY_ATTR",
    "OWNER_ATTR",
    "STUDY_ATTR",
    "WORKER_ATTR",
    "RemoteStudyStatus",
    "counted_by",
    "mixing_error",
    "CampaignRecord",
    "CampaignStatus",
    "CampaignStore",
    "CampaignStudyStatus",
    "CampaignWorkerStatus",
    "BaselineResult",
    "BestQuery",
    "BestResult",
    "BestsSince",
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
    "RooflinePoints",
    "SqlCoordination",
    "SqlResultStore",
    "StudyRecord",
    "SubmitOutcome",
    "TimingPayload",
    "TrialDetail",
    "TrialEntry",
    "TrialRow",
    "default_database_url",
    "in_memory",
    "export_cpp",
    "export_json",
    "load_json",
    "migrate_database",
    "MintedToken",
    "WorkerTokenRecord",
    "WorkerTokenStore",
    "open_store",
    "open_optuna_storage",
    "results_csv",
]
