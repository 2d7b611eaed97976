"""The confirmation round: nothing is called best until it beat the rest side by side.

Trials are timed minutes apart, and these machines drift by 20-50 % between minutes: a config
timed in a fast minute looks better than one timed in a slow one. So before a study stores its
best, its fastest few configs, its default and its baselines are re-timed together, in
alternating rounds in one worker (``TrialRunner.compare``); the best and every speedup come
from that round, never from a default timed in another run.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from xe2tune.db import ConfirmationEntry, ConfirmationRecord, ResultStore, TrialRow
from xe2tune.harness import MeasureRequest, TrialStatus
from xe2tune.kernels import DeviceCaps, KernelFamily, ProblemSpec

if TYPE_CHECKING:
    from xe2tune.tuner._budget import ConfirmSettings
    from xe2tune.tuner._trial_runner import TrialRunner


@dataclass(frozen=True)
class _Entry:
    row: TrialRow
    role: str
    label: str | None


def round_entries(rows: list[TrialRow], default_hash: str, baselines: Mapping[str, str], *,
                  top: int, family: KernelFamily, problem: ProblemSpec,
                  caps: DeviceCaps) -> list[_Entry]:
    """The default, the baselines and the ``top`` fastest others among a study's OK trials."""
    ok = sorted((r for r in rows if r.status is TrialStatus.OK and r.measurement
                 and r.measurement.median_s), key=lambda r: (r.objective, r.id))
    entries: list[_Entry] = []
    candidates = 0
    for row in ok:
        # Rows may come from remote submissions or older kernels: only configs that still run.
        if family.invalid_reason(row.config, problem, caps) is not None:
            continue
        label = baselines.get(row.config_hash) or row.baseline
        if row.config_hash == default_hash:
            entries.append(_Entry(row, "default", None))
        elif label is not None:
            entries.append(_Entry(row, "baseline", label))
        elif candidates < top:
            candidates += 1
            entries.append(_Entry(row, "candidate", None))
    return entries


def confirm(store: ResultStore, runner: TrialRunner, request: MeasureRequest, *, study_id: int,
            baselines: Mapping[str, str], settings: ConfirmSettings,
            caps: DeviceCaps) -> ConfirmationRecord | None:
    """Re-time a study's top configs, default and baselines side by side and store the round.

    ``request`` names the family, the problem and (as its config) the study's default. Returns
    the stored round, or None when the study has no OK trial or nothing ran OK in the round.

    Raises:
        TrialAbandoned: the runner was asked to stop (nothing is stored).
        DeviceProcessError: the runner failed.
        StoreError: the database failed.
    """
    family, problem = request.family, request.problem
    entries = round_entries(store.trials(study_id), request.config.config_hash(), baselines,
                            top=settings.top, family=family, problem=problem, caps=caps)
    if not entries:
        return None
    results = runner.compare([MeasureRequest(family, problem, e.row.config, request.seed)
                              for e in entries], settings.rounds)
    confirmed = []
    for entry, result in zip(entries, results, strict=True):
        ok = result.status is TrialStatus.OK and result.timing is not None
        rounds = result.extra.get("compare", {}).get("round_medians_s", ())
        confirmed.append(ConfirmationEntry(
            trial_id=entry.row.id, config_hash=entry.row.config_hash, role=entry.role,
            label=entry.label, status=result.status,
            median_s=result.timing.median if ok and result.timing else None,
            round_medians=tuple(rounds)))
    if not any(e.median_s for e in confirmed):
        return None
    record = ConfirmationRecord(study_id=study_id, rounds=settings.rounds,
                                entries=tuple(confirmed))
    store.record_confirmation(record)
    return record
