"""The ResultStore protocol: where tuning results live and how everyone else reads them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

    import pandas

    from xe2tune.db._dashboard_reads import RooflinePoints, TrialDetail
    from xe2tune.db._records import (
        BestQuery,
        BestResult,
        BestsSince,
        ConfirmationRecord,
        DeviceRecord,
        MeasuredCeilings,
        ResultFilters,
        ResultRow,
        StudyRecord,
        SubmitOutcome,
        TrialEntry,
        TrialRow,
    )
    from xe2tune.db._submission import ResultSubmission
    from xe2tune.kernels import ProblemSpec
    from xe2tune.measurement import TrialResult


class ResultStore(Protocol):
    """The results database: devices, kernel sources, problems, studies, trials, measurements.

    When each method is called:
        The tuner calls the write methods in this order per problem: ``upsert_device`` and
        ``upsert_kernel_source`` once per run, ``upsert_problem`` and ``get_or_create_study`` once
        per problem, then ``find_trial`` before measuring a config (a config already stored is
        never measured again) and ``record_trial`` after. ``xe2tune roofline`` calls
        ``save_ceilings``; the harness reads them back with ``ceilings``. The API calls
        ``submit_result`` for ``POST /v1/results`` and the read methods for everything else,
        polling ``data_version`` to know when to refresh its in-memory index.

    Consistency:
        Every method is one transaction: a write is either fully stored or not at all, so an
        interrupted tuner leaves a consistent database. Only OK trials (timed, verified) are ever
        returned as "best".

    Thread-safety:
        One store may be shared by threads (the API serves requests from a thread pool); each
        call opens and closes its own session. Several processes may use the same database: on
        SQLite the file runs in WAL mode with a busy timeout, so readers never block the writer.

    Ownership:
        Every returned object is a frozen record detached from any session; the caller owns it.

    Coordination:
        Who runs which trial (leases, config reservations, campaign budget slots) is not a
        result: it lives behind ``xe2tune.db.SqlCoordination`` on the same database.

    Optuna:
        Optuna's own tables live in the same database (``optuna_storage_url``); the store's
        tables are prefixed ``xe2t_`` and its migrations never touch optuna's.
    """

    @property
    def url(self) -> str:
        """The database URL, with any password masked (safe to print).

        Raises:
            Nothing.
        """
        ...

    def optuna_storage_url(self) -> str:
        """The URL to give ``optuna.storages.RDBStorage`` (and ``optuna-dashboard``).

        Raises:
            StoreError: the store is an in-memory database, which optuna cannot share.
        """
        ...

    def optuna_engine_kwargs(self) -> dict[str, object]:
        """``engine_kwargs`` for ``RDBStorage`` so optuna waits on locks like the store does.

        Raises:
            Nothing.
        """
        ...

    def close(self) -> None:
        """Release the connection pool; the store must not be used afterwards.

        Raises:
            Nothing.
        """
        ...

    # -- writes -----------------------------------------------------------------------------

    def upsert_device(self, device: DeviceRecord) -> int:
        """Insert the device or update the stored row with the same (name, backend, driver,
        compute units).

        A record without peaks (``peak_source`` None) keeps the stored row's peaks.

        Returns:
            The device id.

        Raises:
            StoreError: the database could not be written.
        """
        ...

    def save_ceilings(self, device_id: int, ceilings: MeasuredCeilings) -> None:
        """Store measured FMA/copy ceilings of a device, replacing earlier ones.

        Raises:
            StoreError: unknown device id, or the database could not be written.
        """
        ...

    def ceilings(self, device_id: int) -> MeasuredCeilings | None:
        """The latest measured ceilings of a device, None when it was never measured.

        Raises:
            StoreError: the database could not be read.
        """
        ...

    def upsert_kernel_source(self, family: str, source_hash: str) -> int:
        """The id of this (family, source hash), inserted when new.

        Raises:
            StoreError: the database could not be written.
        """
        ...

    def upsert_problem(self, problem: ProblemSpec) -> int:
        """The id of this problem, inserted when new.

        Raises:
            StoreError: the database could not be written.
        """
        ...

    def get_or_create_study(
        self,
        *,
        device_id: int,
        kernel_source_id: int,
        problem_id: int,
        sampler: str,
        optuna_study_name: str | None,
    ) -> StudyRecord:
        """The study of this (device, kernel source, problem), created on first use.

        An existing study keeps its sampler; its optuna study name is filled in when it had none
        (a study first created by a remote submission).

        Raises:
            StoreError: unknown device/source/problem id, an optuna study name already used by
                another study, or the database could not be written.
        """
        ...

    def move_to_optuna_study(self, study_id: int, optuna_study_name: str) -> StudyRecord:
        """Point the study at another optuna study: a search whose space is no longer the one
        the study's optuna study was sampled over (``xe2tune.tuner``'s ``study_name_for_space``).
        Its stored trials stay its own.

        Raises:
            StoreError: unknown study id, a name another study holds, or the database could not
                be written.
        """
        ...

    def record_trial(
        self,
        study_id: int,
        result: TrialResult,
        *,
        number: int | None = None,
        is_default: bool = False,
        baseline: str | None = None,
    ) -> int:
        """Store one trial and its measurement; ``number`` is the optuna trial number.

        The result is validated like a remote submission: an OK result must carry timing with
        finite positive samples and a passed correctness report. Its config is a
        ``LauncherConfig`` (stored in its JSON form, under its ``config_hash()``).
        The trial's family is the config's. ``baseline`` is the label of a seeded baseline
        config (e.g. "seed 000 SageV1", at most 64 characters), None for a tuned config;
        ``best`` shows every baseline of a problem beside its best.

        Returns:
            The trial id.

        Raises:
            StoreError: unknown study, a trial with this config hash already stored in the study
                (call ``find_trial`` first), an inconsistent result, or the database could not be
                written.
        """
        ...

    def record_trials(self, study_id: int, entries: Sequence[TrialEntry]) -> list[int]:
        """Store many trials of one study in one transaction: all of them or, when any is
        refused, none. Each entry is validated as :meth:`record_trial` validates its arguments
        and stored as the same rows; a config may appear once per batch.

        Returns:
            The trial ids, in the order of ``entries``.

        Raises:
            StoreError: as :meth:`record_trial` (naming the refused entry), a config twice in
                the batch, or the database could not be written.
        """
        ...

    def find_trial(self, study_id: int, config_hash: str) -> TrialRow | None:
        """The stored trial of this config in this study, None when it was never measured.

        Raises:
            StoreError: the database could not be read.
        """
        ...

    def submit_result(self, submission: ResultSubmission) -> SubmitOutcome:
        """Store a result measured elsewhere (``POST /v1/results``), creating what it refers to.

        Idempotent on (device, kernel source, problem, config hash): a second submission of the
        same key stores nothing and returns the existing trial with ``created=False``.

        Raises:
            StoreError: an inconsistent result, or the database could not be written.
        """
        ...

    def record_confirmation(self, record: ConfirmationRecord) -> int:
        """Store a confirmation round of a study; from now on ``best`` answers from it.

        The tuner calls it once per study, at the end of a run, after re-timing the study's
        fastest configs, its default and its baselines side by side (``TrialRunner.compare``).

        Returns:
            The round's id.

        Raises:
            StoreError: no entry ran OK, an entry names a trial that is not stored in the study
                with that config hash, or the database could not be written.
        """
        ...

    def confirmation(self, study_id: int) -> ConfirmationRecord | None:
        """The study's newest confirmation round, None when it has none.

        Raises:
            StoreError: the database could not be read.
        """
        ...

    # -- reads ------------------------------------------------------------------------------

    def best(self, query: BestQuery) -> BestResult | None:
        """The best OK config for a problem, or for the nearest tuned problem.

        Candidates are the tuned problems on the query's device with the same mode, head_dim,
        head_dim_v, dtype, kv_dtype and causal flag (``BestQuery.group``): an MHA config never
        answers latent attention, nor fp16/bf16 K/V an FP8 K/V query, nor the reverse. The
        chosen one minimises, in order: the ratio between its kv_len
        and ``seq`` (log scale, compared exactly as integers), the same for q_len, the number of
        given heads_q/heads_kv/batch it differs in, then kv_len, q_len, heads_q, heads_kv, batch.
        ``match`` is "exact" when it differs in nothing that was asked. Within that problem, the
        best trial is the OK trial with the smallest median time among the newest kernel source
        of each family. ``export_cpp``'s dispatch function applies the same rule. The answer
        carries the seeded baselines stored for that problem (``BestResult.baselines``).

        Returns:
            The best result, or None when no candidate problem has an OK trial.

        Raises:
            StoreError: ``query.device`` matches no device, or it is None and candidates exist on
                several device names; or the database could not be read.
        """
        ...

    def best_per_problem(self, device: str | None = None) -> list[BestResult]:
        """The best OK config of every tuned problem (per device), all with ``match="exact"``.

        Sorted by device, mode, head_dim, head_dim_v, dtype, kv_dtype, causal, kv_len, q_len,
        heads, batch.

        Raises:
            StoreError: ``device`` matches no device, or the database could not be read.
        """
        ...

    def best_per_problem_since(self, version: int) -> BestsSince:
        """The data version now and the best of every problem (per device) whose results
        changed after data version ``version`` (every tuned problem for -1), as
        ``best_per_problem`` gives them, in its order.

        Replacing, in the bests read at ``version``, each (device, problem)'s best by the one
        returned here gives what ``best_per_problem`` reads at the returned version (problems
        a write committed meanwhile changed come again with the next call; a tuned problem
        never stops being tuned: trials and rounds are only ever added). A reader polling
        ``data_version`` so keeps every best at the cost of what changed.

        Raises:
            StoreError: the database could not be read.
        """
        ...

    def results(
        self, filters: ResultFilters | None = None, *, limit: int = 100, offset: int = 0
    ) -> list[ResultRow]:
        """Stored trials matching the filters, newest first, without raw samples.

        Raises:
            StoreError: limit < 1 or offset < 0, or the database could not be read.
        """
        ...

    def count_results(self, filters: ResultFilters | None = None) -> int:
        """How many trials ``results`` would page through.

        Raises:
            StoreError: the database could not be read.
        """
        ...

    def results_frame(self, filters: ResultFilters | None = None) -> pandas.DataFrame:
        """Every matching trial as one flat row (problem, config, status, statistics), newest first.

        Raises:
            StoreError: the database could not be read.
        """
        ...

    def results_frames(
        self, filters: ResultFilters | None = None, *, limit: int | None = None,
        chunk_rows: int = ...,
    ) -> Iterator[pandas.DataFrame]:
        """:meth:`results_frame`'s rows (the newest ``limit`` only), as frames of at most
        ``chunk_rows`` rows read while they are consumed: memory stays bounded whatever the
        database size (``xe2tune results --format csv`` streams them). Yields one empty frame
        (the columns) when nothing matches. The read transaction stays open until the iterator
        is exhausted or closed.

        Raises:
            StoreError: the database could not be read.
        """
        ...

    def devices(self) -> list[DeviceRecord]:
        """Every device, oldest first.

        Raises:
            StoreError: the database could not be read.
        """
        ...

    def studies(self, device: str | None = None) -> list[StudyRecord]:
        """Every study (optionally on one device) with trial counts and best median, oldest first.

        Raises:
            StoreError: ``device`` matches no device, or the database could not be read.
        """
        ...

    def study(self, study_id: int) -> StudyRecord | None:
        """One study, None when the id is unknown.

        Raises:
            StoreError: the database could not be read.
        """
        ...

    def trials(self, study_id: int) -> list[TrialRow]:
        """Every trial of a study with its measurement and raw samples, in the order stored.

        Raises:
            StoreError: the database could not be read.
        """
        ...

    def roofline_points(self, device_id: int) -> RooflinePoints:
        """Intensity and FLOP/s of every OK trial of a device, as arrays (no configs).

        Raises:
            StoreError: the database could not be read.
        """
        ...

    def trial_details(self, trial_ids: Sequence[int]) -> dict[int, TrialDetail]:
        """Problem, config and numbers of the given trials, by id; unknown ids are left out.

        Raises:
            StoreError: the database could not be read.
        """
        ...

    def data_version(self) -> int:
        """A counter that changes whenever the store writes anything; one indexed row read.

        Raises:
            StoreError: the database could not be read.
        """
        ...
