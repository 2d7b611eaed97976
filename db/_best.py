"""The best config per tuned problem, and the exact-or-nearest lookup of ``xe2tune best``.

The nearest rule is integer-exact so the C++ dispatch of ``export_cpp`` reproduces it bit for
bit: seq distances are ratios max/min compared as fractions, never floating-point logarithms.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, Protocol, TypeVar

from sqlalchemy import exists, func, select
from sqlalchemy.orm import aliased

from xe2tune.db._confirmations import confirmed_bests, latest_confirmations
from xe2tune.db._convert import aware, stored_config
from xe2tune.db._models import Device, KernelSource, Measurement, Problem, Study, Trial
from xe2tune.db._records import BaselineResult, BestResult, problem_group
from xe2tune.errors import StoreError
from xe2tune.kernels import ProblemSpec
from xe2tune.measurement import TrialStatus

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

    from xe2tune.db._records import BestQuery, ConfirmationRecord, Match

_OK = Trial.status == TrialStatus.OK.value
_PROBLEM_COLUMNS = (Problem.id, Problem.mode, Problem.head_dim, Problem.dtype, Problem.q_len,
                    Problem.kv_len, Problem.heads_q, Problem.heads_kv, Problem.batch,
                    Problem.causal, Problem.head_dim_v,
                    Problem.kv_dtype)  # id, then ProblemSpec's fields in order


@dataclass(frozen=True)
class StudyBest:
    """A study's fastest OK median, with what it takes to choose between studies."""

    study_id: int
    device_id: int
    device_name: str
    kernel_source_id: int
    family: str
    problem_id: int
    problem: ProblemSpec
    best_median_s: float


def study_bests(session: Session, ids: list[int] | None, query: BestQuery | None = None, *,
                changed_after: int | None = None) -> list[StudyBest]:
    """Every study with at least one OK trial, narrowed to the query's group
    (``BestQuery.group``) and to the (device, problem) pairs with a study whose results changed
    after data version ``changed_after``.

    A study's best median is its newest confirmation round's, else its fastest OK trial's.

    The studies are chosen first and only their trials are aggregated, so a lookup reads the
    trials of its candidate problems only.
    """
    studies = select(Study.id).join(Problem, Problem.id == Study.problem_id)
    if ids is not None:
        studies = studies.where(Study.device_id.in_(ids))
    if changed_after is not None:
        changed = aliased(Study)
        studies = studies.where(exists().where(
            changed.device_id == Study.device_id, changed.problem_id == Study.problem_id,
            changed.results_version > changed_after))
    if query is not None:
        mode, head_dim, head_dim_v, dtype, kv_dtype, causal = query.group
        studies = studies.where(Problem.mode == mode, Problem.head_dim == head_dim,
                                Problem.head_dim_v == head_dim_v, Problem.dtype == dtype,
                                Problem.kv_dtype.is_(None) if kv_dtype is None
                                else Problem.kv_dtype == kv_dtype,
                                Problem.causal == causal)
    per_study = (
        select(Trial.study_id, func.min(Measurement.median_s).label("best"))
        .join(Measurement, Measurement.trial_id == Trial.id)
        .where(_OK, Measurement.median_s.is_not(None), Trial.study_id.in_(studies))
        .group_by(Trial.study_id).subquery()
    )
    confirmed = confirmed_bests()
    stmt = (
        select(Study.id, Study.device_id, Device.name, Study.kernel_source_id,
               KernelSource.family, *_PROBLEM_COLUMNS,
               func.coalesce(confirmed.c.best_median_s, per_study.c.best))
        .join(per_study, per_study.c.study_id == Study.id)
        .outerjoin(confirmed, confirmed.c.study_id == Study.id)
        .join(Device, Device.id == Study.device_id)
        .join(KernelSource, KernelSource.id == Study.kernel_source_id)
        .join(Problem, Problem.id == Study.problem_id)
    )
    return [
        StudyBest(study_id, device_id, name, source_id, family, problem_id,
                  ProblemSpec(*spec), best)
        for study_id, device_id, name, source_id, family, problem_id, *spec, best
        in session.execute(stmt)
    ]


def best_study_per_problem(rows: list[StudyBest]) -> dict[tuple[int, int], StudyBest]:
    """Per (device, problem): the fastest study among the newest kernel source of each family.

    An older source's numbers are kept in the database but never served once the family has
    been re-tuned with a newer source on that problem: the config may not even build any more.
    """
    newest: dict[tuple[int, int, str], int] = {}
    for row in rows:
        family = (row.device_id, row.problem_id, row.family)
        newest[family] = max(newest.get(family, 0), row.kernel_source_id)
    chosen: dict[tuple[int, int], StudyBest] = {}
    for row in rows:
        if row.kernel_source_id != newest[(row.device_id, row.problem_id, row.family)]:
            continue
        key = (row.device_id, row.problem_id)
        current = chosen.get(key)
        if current is None or (row.best_median_s, row.study_id) < (current.best_median_s,
                                                                   current.study_id):
            chosen[key] = row
    return chosen


def _ratio(a: int, b: int) -> Fraction:
    return Fraction(max(a, b), min(a, b))


def nearest_key(problem: ProblemSpec, query: BestQuery) -> tuple:
    """Sort key of a candidate problem: smaller is nearer; all zeros/ones means exact."""
    wanted_q = query.wanted_q_len
    mismatches = sum(
        wanted is not None and wanted != have
        for wanted, have in ((query.heads_q, problem.heads_q),
                             (query.heads_kv, problem.heads_kv), (query.batch, problem.batch))
    )
    return (_ratio(problem.kv_len, query.seq),
            _ratio(problem.q_len, wanted_q) if wanted_q is not None else Fraction(1),
            mismatches, problem.kv_len, problem.q_len, problem.heads_q, problem.heads_kv,
            problem.batch)


def is_exact(key: tuple) -> bool:
    """True when a candidate's nearest_key says it is the problem asked for."""
    return key[0] == 1 and key[1] == 1 and key[2] == 0


def choose_device(devices: Iterable[tuple[str, int]], device_given: bool) -> int:
    """The device to answer from, given the candidates' (device name, device id): the newest
    id of the one device name among them.

    Raises:
        StoreError: no device was asked for and candidates exist on several device names.
    """
    pairs = list(devices)
    names = sorted({name for name, _ in pairs})
    if len(names) > 1 and not device_given:
        raise StoreError("several devices have results for this query: " + ", ".join(names)
                         + "; choose one with device")
    return max(device_id for _, device_id in pairs)


class _HasProblem(Protocol):
    @property
    def problem(self) -> ProblemSpec: ...


C = TypeVar("C", bound=_HasProblem)


def nearest(candidates: Iterable[C], query: BestQuery) -> tuple[C, Match]:
    """The candidate (one per tuned problem of one device) whose problem is nearest the query,
    and whether it is the problem asked for."""
    key, found = min(((nearest_key(c.problem, query), c) for c in candidates),
                     key=lambda pair: pair[0])
    return found, "exact" if is_exact(key) else "nearest"


def names_device(wanted: str, name: str, device_id: int | None) -> bool:
    """The device filter of every lookup (``device_ids`` in SQL): an id, or the name compared
    case-insensitively."""
    wanted = wanted.strip()
    return wanted.lower() == name.lower() or (wanted.isdigit() and int(wanted) == device_id)


def best_among(tuned: Iterable[BestResult], query: BestQuery) -> BestResult | None:
    """What ``ResultStore.best`` answers for the query, chosen without a database read from
    the bests of ``ResultStore.best_per_problem`` read at the same data version (any subset
    holding the query's group will do): the same device rule, then the same nearest rule. None
    when nothing fits.

    Raises:
        StoreError: no device was asked for and candidates exist on several device names.
    """
    fits = [b for b in tuned
            if problem_group(b.problem) == query.group
            and (query.device is None or names_device(query.device, b.device, b.device_id))]
    if not fits:
        return None
    device_id = choose_device(((b.device, b.device_id) for b in fits), query.device is not None)
    found, match = nearest((b for b in fits if b.device_id == device_id), query)
    return found.model_copy(update={"match": match, "query": query})


def baseline_trials(session: Session, study_ids: list[int]
                    ) -> dict[int, list[tuple[Trial, Measurement | None]]]:
    """The seeded baseline trials of each study (any status), by label then trial id."""
    found: dict[int, list[tuple[Trial, Measurement | None]]] = {}
    for trial, measurement in session.execute(
        select(Trial, Measurement)
        .outerjoin(Measurement, Measurement.trial_id == Trial.id)
        .where(Trial.study_id.in_(study_ids), Trial.baseline.is_not(None))
        .order_by(Trial.baseline, Trial.id)
    ):
        found.setdefault(trial.study_id, []).append((trial, measurement))
    return found


def baseline_result(trial: Trial, measurement: Measurement | None,
                    best_median_s: float, round_median_s: float | None = None) -> BaselineResult:
    """A baseline's result; its median counts only when it ran OK (a failed one has none).

    ``round_median_s`` is its median in the confirmation round the best comes from, if any.
    """
    ok = trial.status == TrialStatus.OK.value and measurement is not None
    median = measurement.median_s if ok and measurement is not None else None
    median = round_median_s or median
    return BaselineResult(
        label=trial.baseline or "", family=trial.family, trial_id=trial.id,
        config=stored_config(trial.config, trial.id), config_hash=trial.config_hash,
        status=TrialStatus(trial.status), median_s=median,
        speedup=median / best_median_s if median is not None and best_median_s else None,
    )


def best_results(session: Session, chosen: list[StudyBest], *, match: Match,
                 query: BestQuery | None = None) -> list[BestResult]:
    """Build the BestResult of each chosen study: its fastest OK trial, the default's time and
    the study's seeded baselines (each one's speedup is its median over the best's).

    A study with a confirmation round answers from its newest round instead: the round's best,
    and every median and speedup as timed side by side in it.
    """
    if not chosen:
        return []
    study_ids = [row.study_id for row in chosen]
    ranked = (
        select(Trial.id.label("trial_id"),
               func.row_number().over(partition_by=Trial.study_id,
                                      order_by=(Measurement.median_s, Trial.id)).label("rank"))
        .join(Measurement, Measurement.trial_id == Trial.id)
        .where(_OK, Measurement.median_s.is_not(None), Trial.study_id.in_(study_ids))
        .subquery()
    )
    winners = {
        trial.study_id: (trial, measurement)
        for trial, measurement in session.execute(
            select(Trial, Measurement)
            .join(ranked, ranked.c.trial_id == Trial.id)
            .join(Measurement, Measurement.trial_id == Trial.id)
            .where(ranked.c.rank == 1)
        )
    }
    defaults: dict[int, float] = {
        study_id: median for study_id, median in session.execute(
            select(Trial.study_id, func.min(Measurement.median_s))
            .join(Measurement, Measurement.trial_id == Trial.id)
            .where(_OK, Trial.is_default, Trial.study_id.in_(study_ids))
            .group_by(Trial.study_id)
        )
    }
    sources: dict[int, str] = {
        source_id: source_hash for source_id, source_hash in session.execute(
            select(KernelSource.id, KernelSource.source_hash)
            .where(KernelSource.id.in_({row.kernel_source_id for row in chosen}))
        )
    }
    baselines = baseline_trials(session, study_ids)
    rounds = latest_confirmations(session, study_ids)
    winners.update(_confirmed_winners(session, rounds))
    results = []
    for row in chosen:
        trial, measurement = winners[row.study_id]
        default = defaults.get(row.study_id)
        median = measurement.median_s
        confirmation = rounds.get(row.study_id)
        in_round: dict[int, float] = {}
        if confirmation is not None:
            in_default = confirmation.default
            median = confirmation.best.median_s
            default = in_default.median_s if in_default is not None else None
            in_round = {e.trial_id: e.median_s for e in confirmation.entries if e.median_s}
        scale = measurement.median_s / median if measurement.median_s and median else 1.0
        results.append(BestResult(
            match=match, query=query, device_id=row.device_id, device=row.device_name,
            family=trial.family, source_hash=sources[row.kernel_source_id], problem=row.problem,
            study_id=row.study_id, trial_id=trial.id, config=stored_config(trial.config, trial.id),
            config_hash=trial.config_hash, baseline=trial.baseline, median_s=median,
            tflops=None if measurement.achieved_flops is None
            else measurement.achieved_flops * scale / 1e12,
            gbps=None if measurement.achieved_bandwidth is None
            else measurement.achieved_bandwidth * scale / 1e9,
            roofline_fraction=None if measurement.roofline_fraction is None
            else measurement.roofline_fraction * scale,
            peak_source=measurement.peak_source, default_median_s=default,
            speedup=default / median if default is not None and median else None,
            measured_at=aware(trial.created_at),
            baselines=tuple(baseline_result(t, m, median, in_round.get(t.id))
                            for t, m in baselines.get(row.study_id, ())),
            confirmed_rounds=confirmation.rounds if confirmation else None,
            confirmed_at=confirmation.created_at if confirmation else None,
        ))
    return results


def _confirmed_winners(session: Session, rounds: dict[int, ConfirmationRecord]
                       ) -> dict[int, tuple[Trial, Measurement]]:
    """Per confirmed study, the trial its newest round found best, with its measurement."""
    study_of = {c.best.trial_id: study_id for study_id, c in rounds.items()}
    return {
        study_of[trial.id]: (trial, measurement)
        for trial, measurement in session.execute(
            select(Trial, Measurement).join(Measurement, Measurement.trial_id == Trial.id)
            .where(Trial.id.in_(study_of)))
    }


def best_order(result: BestResult) -> tuple:
    """Sort key of best_per_problem listings."""
    p = result.problem
    return (result.device, result.device_id, p.mode, p.head_dim, p.head_dim_v, p.dtype,
            p.kv_dtype or "", p.causal, p.kv_len, p.q_len, p.heads_q, p.heads_kv, p.batch)
