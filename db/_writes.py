"""Repository functions that write. Each takes a Session inside a transaction and never commits."""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING

from sqlalchemy import select, update

from xe2tune.db._convert import measurement_row
from xe2tune.db._models import (
    Ceiling,
    Device,
    KernelSource,
    Meta,
    Problem,
    Study,
    Trial,
    utcnow,
)
from xe2tune.db._records import TrialEntry
from xe2tune.db._validate import trial_problems
from xe2tune.errors import StoreError

if TYPE_CHECKING:
    from collections.abc import Collection, Sequence

    from sqlalchemy.orm import Session

    from xe2tune.db._records import DeviceRecord, MeasuredCeilings
    from xe2tune.kernels import ProblemSpec
    from xe2tune.measurement import TrialResult

DATA_VERSION = "data_version"
_DEVICE_FIELDS = ("device_type", "compute_units", "global_mem_bytes", "local_mem_bytes",
                  "max_work_group_size")
_PEAK_FIELDS = ("peak_bandwidth", "peak_source")


def bump_data_version(session: Session) -> int:
    """Advance the change counter readers poll; the new value.

    The row stays locked until the transaction ends, so on a server database the versions of
    concurrent writers are in the order they commit.
    """
    session.execute(update(Meta).where(Meta.key == DATA_VERSION).values(value=Meta.value + 1))
    return session.scalars(select(Meta.value).where(Meta.key == DATA_VERSION)).one()


def stamp_results(session: Session, study_ids: Collection[int], version: int) -> None:
    """Record that these studies' results changed at data version ``version``."""
    ids = sorted(study_ids)
    for start in range(0, len(ids), _IN_LIST_ROWS):
        session.execute(update(Study).where(Study.id.in_(ids[start:start + _IN_LIST_ROWS]))
                        .values(results_version=version))


def upsert_device(session: Session, device: DeviceRecord) -> int:
    """Insert or update the device with this (name, backend, driver, compute units); return its
    id.

    A record without peaks (``peak_source`` None: a caller that only needs the id) leaves the
    stored peaks as they are; it must not erase the measured ones.
    """
    row = session.scalars(
        select(Device).where(Device.name == device.name, Device.backend == device.backend,
                             Device.driver == device.driver,
                             Device.compute_units == device.compute_units)
    ).one_or_none()
    if row is None:
        row = Device(name=device.name, backend=device.backend, driver=device.driver,
                     compute_units=device.compute_units)
        session.add(row)
    fields = _DEVICE_FIELDS + (_PEAK_FIELDS if device.peak_source is not None else ())
    for name in fields:
        if getattr(row, name, None) != getattr(device, name):
            setattr(row, name, getattr(device, name))
    if row.sub_group_sizes != list(device.sub_group_sizes):
        row.sub_group_sizes = list(device.sub_group_sizes)
    if (device.peak_source is not None or row.peak_flops is None) \
            and row.peak_flops != dict(device.peak_flops):
        row.peak_flops = dict(device.peak_flops)
    session.flush()
    return row.id


def save_ceilings(session: Session, device_id: int, ceilings: MeasuredCeilings) -> None:
    """Replace the device's measured ceilings."""
    if session.get(Device, device_id) is None:
        raise StoreError(f"unknown device id {device_id}")
    row = session.get(Ceiling, device_id) or Ceiling(device_id=device_id)
    row.flops = dict(ceilings.flops)
    row.bandwidth = ceilings.bandwidth
    row.llc_bytes = ceilings.llc_bytes
    row.details = dict(ceilings.details)
    row.measured_at = (ceilings.measured_at.replace(tzinfo=None) if ceilings.measured_at
                       else utcnow())
    session.add(row)


def upsert_kernel_source(session: Session, family: str, source_hash: str) -> int:
    """The id of (family, source_hash), inserted when new."""
    row = session.scalars(
        select(KernelSource).where(KernelSource.family == family,
                                  KernelSource.source_hash == source_hash)
    ).one_or_none()
    if row is None:
        row = KernelSource(family=family, source_hash=source_hash)
        session.add(row)
        session.flush()
    return row.id


def upsert_problem(session: Session, problem: ProblemSpec) -> int:
    """The id of this problem, inserted when new."""
    key = problem.key()
    row = session.scalars(select(Problem).where(Problem.key == key)).one_or_none()
    if row is None:
        # every field, Dv and kv_dtype included: to_dict leaves them out at their defaults
        row = Problem(key=key, **asdict(problem))
        session.add(row)
        session.flush()
    return row.id


def get_or_create_study(
    session: Session, *, device_id: int, kernel_source_id: int, problem_id: int, sampler: str,
    optuna_study_name: str | None,
) -> Study:
    """The study of the triple, created on first use; fills in a missing optuna study name."""
    for model, ident in ((Device, device_id), (KernelSource, kernel_source_id),
                         (Problem, problem_id)):
        if session.get(model, ident) is None:
            raise StoreError(f"unknown {model.__tablename__[5:-1].replace('_', ' ')} id {ident}")
    study = session.scalars(
        select(Study).where(Study.device_id == device_id,
                            Study.kernel_source_id == kernel_source_id,
                            Study.problem_id == problem_id)
    ).one_or_none()
    if study is None:
        study = Study(device_id=device_id, kernel_source_id=kernel_source_id,
                      problem_id=problem_id, sampler=sampler)
        session.add(study)
    if study.optuna_study_name is None and optuna_study_name is not None:
        _name_optuna_study(session, study, optuna_study_name)
    session.flush()
    return study


def _name_optuna_study(session: Session, study: Study, optuna_study_name: str) -> None:
    taken = session.scalars(
        select(Study.id).where(Study.optuna_study_name == optuna_study_name)
    ).first()
    if taken is not None and taken != study.id:
        raise StoreError(
            f"optuna study name {optuna_study_name!r} already belongs to study {taken}"
        )
    study.optuna_study_name = optuna_study_name


def move_to_optuna_study(session: Session, study_id: int, optuna_study_name: str) -> None:
    """Point the study at another optuna study (its trials and records stay its own)."""
    study = session.get(Study, study_id)
    if study is None:
        raise StoreError(f"unknown study id {study_id}")
    _name_optuna_study(session, study, optuna_study_name)
    session.flush()


def find_trial(session: Session, study_id: int, config_hash: str) -> Trial | None:
    """The trial of this config in this study, if stored."""
    return session.scalars(
        select(Trial).where(Trial.study_id == study_id, Trial.config_hash == config_hash)
    ).one_or_none()


BASELINE_MAX = 64  # xe2t_trials.baseline is String(64)


def insert_trial(
    session: Session, study_id: int, result: TrialResult, *, number: int | None,
    is_default: bool, origin: str, baseline: str | None = None,
) -> int:
    """Validate and store one trial with its measurement; return the trial id."""
    entry = TrialEntry(result, number=number, is_default=is_default, baseline=baseline)
    return insert_trials(session, study_id, [entry], origin=origin)[0]


def insert_trials(session: Session, study_id: int, entries: Sequence[TrialEntry], *,
                  origin: str) -> list[int]:
    """Validate every trial of one study, then store them all with their measurements in one
    flush; return their ids in order. Nothing is added when any of them is refused.

    A trial's family is its config's (a LauncherConfig's family name fits the column). The
    config's JSON form is made here, once: it is what the row stores.
    """
    batch = len(entries) > 1
    for index, entry in enumerate(entries):
        problems = trial_problems(entry.result)
        if entry.baseline is not None and not 0 < len(entry.baseline) <= BASELINE_MAX:
            problems.append(f"baseline label must be 1 to {BASELINE_MAX} characters, "
                            f"got {len(entry.baseline)}")
        if problems:
            where = f" (entry {index} of {len(entries)})" if batch else ""
            raise StoreError(f"inconsistent trial result{where}: {'; '.join(problems)}")
    if session.get(Study, study_id) is None:
        raise StoreError(f"unknown study id {study_id}")
    hashes = [entry.result.config_hash for entry in entries]
    if len(set(hashes)) < len(hashes):
        twice = next(h for h in hashes if hashes.count(h) > 1)
        raise StoreError(f"config {twice} appears twice in one batch for study {study_id}")
    stored = _stored_trials(session, study_id, hashes)
    if stored:
        config_hash, trial_id = next(iter(stored.items()))
        raise StoreError(
            f"config {config_hash} is already stored in study {study_id} (trial {trial_id}); "
            "look it up with find_trial instead of measuring it again"
        )
    trials = [
        Trial(study_id=study_id, number=entry.number, config=entry.result.config.to_dict(),
              config_hash=config_hash, family=entry.result.config.family,
              baseline=entry.baseline, status=entry.result.status.value,
              is_default=entry.is_default, origin=origin, build_s=entry.result.build_s,
              verify_s=entry.result.verify_s, bench_s=entry.result.bench_s,
              error=entry.result.error, extra=dict(entry.result.extra),
              measurement=measurement_row(entry.result))
        for entry, config_hash in zip(entries, hashes, strict=True)
    ]
    session.add_all(trials)
    session.flush()
    return [trial.id for trial in trials]


_IN_LIST_ROWS = 500  # bound parameters per IN list (old SQLite builds allow 999)


def _stored_trials(session: Session, study_id: int, hashes: list[str]) -> dict[str, int]:
    """Trial id by config hash of those of ``hashes`` already stored in the study."""
    found: dict[str, int] = {}
    for start in range(0, len(hashes), _IN_LIST_ROWS):
        found.update(session.execute(
            select(Trial.config_hash, Trial.id).where(
                Trial.study_id == study_id,
                Trial.config_hash.in_(hashes[start:start + _IN_LIST_ROWS]))).all())
    return found
