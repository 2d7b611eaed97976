"""Replay backend: answer trials from a recorded, brute-forced search space instead of a device.

A recording is a Kernel Tuner cache file (JSON, optionally gzipped) or a T4 results file in which
every valid config was measured. The space is derived from the file: the configs it holds are the
valid ones (configs breaking the kernel's restrictions are absent from a cache, and marked
``"constraints"`` in a T4 file). A failed config (a string such as ``"RuntimeFailedConfig"`` in
``time``, or a T4 invalidity other than ``correct``) counts as evaluated-and-failed. As in Kernel
Tuner's simulation mode, the objective is the recorded mean ``time``; with ``noise`` a trial is
answered by one of the recorded raw samples instead, drawn with the run's seed.

What a trial cost when the space was recorded is kept too, for the time-based methodology score
(``tuner._methodology``): its build cost (compile and verification time) and its run cost (the
sum of the raw run times, plus the framework and strategy time of the recording), in seconds.
"""

from __future__ import annotations

import gzip
import json
import math
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import optuna

from xe2tune.errors import Xe2TuneError
from xe2tune.tuner._samplers import make_sampler
from xe2tune.tuner._space import EmptySpaceError, FiniteSpace

__all__ = [
    "DEFAULT_MAX_BYTES", "NotARecordingError", "Recording", "ReplayRun", "load_recording",
    "replay",
]

_T4_FAILED = {"timeout", "compile", "runtime", "correctness"}
# The largest recorded spaces at hand hold 11 MiB of JSON; a file past this cap (a gzip bomb
# expands 1000x) is refused before it is decompressed further, with memory bounded by the cap.
DEFAULT_MAX_BYTES = 256 << 20


class NotARecordingError(Xe2TuneError):
    """A file that is missing, unreadable, or neither a Kernel Tuner cache nor a T4 file."""


@dataclass(frozen=True, eq=False)
class Recording:
    """A brute-forced space: for each valid config, its mean time and raw samples (ms).

    ``times[i]`` is NaN where config ``i`` failed; ``samples[i]`` is empty then.
    ``build_seconds[i]`` (compile + verification) and ``run_seconds[i]`` (raw run times +
    framework + strategy) are what config ``i`` cost when recorded, failed or not; a field the
    file lacks counts 0, and both are NaN where the file records no time at all.
    """

    source: str
    kernel_name: str
    device_name: str
    space: FiniteSpace
    times: np.ndarray
    samples: tuple[tuple[float, ...], ...]
    build_seconds: np.ndarray
    run_seconds: np.ndarray

    @property
    def failed(self) -> np.ndarray:
        """Boolean mask of the configs that failed (compile or runtime)."""
        return np.isnan(self.times)

    @property
    def optimum(self) -> float:
        """The best (lowest) recorded mean time."""
        return float(np.nanmin(self.times))

    def answer(self, index: int, rng: np.random.Generator | None = None) -> float | None:
        """The objective for config ``index``: its mean, or a raw sample drawn with ``rng``.

        Returns None for a failed config.
        """
        mean = self.times[index]
        if math.isnan(mean):
            return None
        raw = self.samples[index]
        if rng is None or not raw:
            return float(mean)
        return float(raw[rng.integers(len(raw))])


@dataclass(frozen=True, eq=False)
class ReplayRun:
    """One sampler run on a recording: the configs in the order tried and their mean times.

    ``means[k]`` is the recorded mean of the k-th trial's config (NaN if it failed), whatever
    value the sampler was told, so that scores never depend on the noise draw.
    ``strategy_seconds[k]`` is the wall time the k-th trial spent in optuna and the sampler
    (ask and tell), measured live: the strategy's own share of a tuning run's time.
    """

    sampler: str
    seed: int
    indices: np.ndarray
    means: np.ndarray
    strategy_seconds: np.ndarray

    def best_so_far(self, fallback: float) -> np.ndarray:
        """Best mean after each trial; ``fallback`` until the first config that did not fail."""
        filled = np.where(np.isnan(self.means), np.inf, self.means)
        best = np.minimum.accumulate(filled)
        return np.where(np.isinf(best), fallback, best)


def load_recording(path: str | Path, *, max_bytes: int | None = None) -> Recording:
    """Load a Kernel Tuner cache file (``.json`` or ``.json.gz``) or a T4 results file.

    ``max_bytes`` (default ``DEFAULT_MAX_BYTES``) caps the JSON text, after decompression:
    reading stops there.

    Args:
        path: the file; ``.gz`` is decompressed.
        max_bytes: the cap on the decompressed JSON (None: ``DEFAULT_MAX_BYTES``).

    Raises:
        NotARecordingError: the file is missing or unreadable, holds more than ``max_bytes`` of
            JSON, is not JSON, or has neither the cache keys (``tune_params_keys``,
            ``tune_params``, ``cache``) nor T4 ``results``.
    """
    path = Path(path)
    data = _read_json(path, DEFAULT_MAX_BYTES if max_bytes is None else max_bytes)
    try:
        if isinstance(data, dict) and {"tune_params_keys", "tune_params", "cache"} <= data.keys():
            return _from_cache(path, data)
        if isinstance(data, dict) and isinstance(data.get("results"), list):
            return _from_t4(path, data)
    except (KeyError, TypeError, AttributeError) as exc:
        raise NotARecordingError(f"{path}: malformed entry ({type(exc).__name__}: {exc})") from None
    raise NotARecordingError(
        f"{path} is neither a Kernel Tuner cache file (keys tune_params_keys, tune_params, "
        "cache) nor a T4 results file (key results)"
    )


def replay(
    recording: Recording, sampler: str, *, budget: int, seed: int, noise: bool = False,
    until_seconds: float | None = None, progress: Callable[[], None] | None = None,
) -> ReplayRun:
    """Run ``sampler`` for ``budget`` trials through optuna's ask/tell, answered by the recording.

    With ``until_seconds``, the run goes on past ``budget`` until the simulated tuning time (the
    recorded cost of the configs tried plus the live strategy time) reaches it, or the space is
    exhausted. Failed configs are told as ``TrialState.FAIL``. The study is in memory: replays
    are cheap and nothing of them is worth keeping. ``progress`` is called after each trial
    (model-based samplers slow down as trials accumulate: a whole space can take hours).

    Args:
        recording: a brute-forced space, from :func:`load_recording`.
        sampler: one of ``SAMPLER_NAMES``.
        budget: trials to run (1..len(space)).
        seed: the sampler's seed.
        noise: answer each trial with one recorded raw sample instead of the mean.
        until_seconds: keep going past ``budget`` until this much simulated tuning time.
        progress: called after each trial.

    Raises:
        ValueError: ``budget`` is not in 1..len(space).
        UnknownSamplerError: ``sampler`` is not a registered name.
        RuntimeError: the sampler proposed a config that is not in the recording.
    """
    space = recording.space
    if not 1 <= budget <= len(space):
        raise ValueError(f"budget {budget} is outside 1..{len(space)} (the space's size)")
    study = optuna.create_study(direction="minimize", sampler=make_sampler(sampler, space, seed))
    distributions = space.distributions()
    rng = np.random.default_rng(seed) if noise else None
    indices, seconds = [], []
    elapsed = 0.0
    while len(indices) < budget or (
        until_seconds is not None and elapsed < until_seconds and len(indices) < len(space)
    ):
        start = time.perf_counter()
        trial = study.ask(distributions)
        index = space.index(trial.params)
        if index is None:
            raise RuntimeError(f"sampler {sampler!r} proposed {trial.params}, not in the space")
        value = recording.answer(index, rng)
        if value is None:
            study.tell(trial, state=optuna.trial.TrialState.FAIL)
        else:
            study.tell(trial, value)
        indices.append(index)
        seconds.append(time.perf_counter() - start)
        elapsed += seconds[-1] + _recorded_cost(recording, index)
        if progress is not None:
            progress()
    chosen = np.array(indices, dtype=np.int64)
    return ReplayRun(
        sampler=sampler, seed=seed, indices=chosen, means=recording.times[chosen],
        strategy_seconds=np.array(seconds),
    )


def _recorded_cost(recording: Recording, index: int) -> float:
    """A first visit's recorded cost (the samplers never revisit); 0 where none is recorded."""
    return float(np.nan_to_num(recording.build_seconds[index] + recording.run_seconds[index]))


def _read_json(path: Path, max_bytes: int) -> Any:
    try:
        handle = path.open("rb")
    except OSError as exc:
        raise NotARecordingError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        with handle:
            gzipped = handle.read(2) == b"\x1f\x8b"
            handle.seek(0)
            stream = gzip.GzipFile(fileobj=handle) if gzipped else handle
            raw = stream.read(max_bytes + 1)  # decompresses no further than that
        if len(raw) > max_bytes:
            raise NotARecordingError(
                f"{path} holds more than {max_bytes} bytes of JSON"
                + (" once decompressed" if gzipped else "")
                + f"; accepted: at most {max_bytes} (XE2TUNE_REPLAY_MAX_BYTES sets the cap)"
            )
        return json.loads(raw)
    except (OSError, EOFError, zlib.error, UnicodeDecodeError, RecursionError,
            json.JSONDecodeError) as exc:
        raise NotARecordingError(f"{path} is not a JSON (or gzipped JSON) file: {exc}") from None


def _from_cache(path: Path, data: dict[str, Any]) -> Recording:
    keys = list(data["tune_params_keys"])
    params = {k: data["tune_params"][k] for k in keys}
    rows, times, samples, costs = [], [], [], []
    for entry in data["cache"].values():
        rows.append({k: entry[k] for k in keys})
        mean = entry.get("time")
        ok = _is_number(mean)
        times.append(float(mean) if ok else math.nan)
        samples.append(tuple(entry.get("times", ())) if ok else ())
        costs.append(_costs(
            [entry.get("compile_time"), entry.get("verification_time")],
            [entry.get("times"), entry.get("framework_time"), entry.get("strategy_time")],
            1e-3,  # Kernel Tuner records milliseconds
        ))
    return _recording(path, data, params, rows, times, samples, costs)


def _from_t4(path: Path, data: dict[str, Any]) -> Recording:
    unit = _SECONDS_PER.get(str(data.get("metadata", {}).get("timeunit", "seconds")).lower(), 1.0)
    rows, times, samples, costs = [], [], [], []
    for result in data["results"]:
        invalidity = result.get("invalidity")
        if invalidity == "constraints":
            continue
        mean = next(
            (m.get("value") for m in result.get("measurements", ()) if m.get("name") == "time"),
            None,
        )
        ok = invalidity not in _T4_FAILED and _is_number(mean)
        rows.append(dict(result["configuration"]))
        times.append(float(mean) if ok else math.nan)
        recorded = result.get("times", {})
        samples.append(tuple(recorded.get("runtimes", ())) if ok else ())
        costs.append(_costs(
            [recorded.get("compilation"), recorded.get("validation")],
            [recorded.get("runtimes"), recorded.get("framework"), recorded.get("search_algorithm")],
            unit,
        ))
    if not rows:
        raise NotARecordingError(f"{path} is a T4 file without a single valid config")
    params = {k: _ordered({r[k] for r in rows}) for k in rows[0]}
    return _recording(path, data, params, rows, times, samples, costs)


_SECONDS_PER = {"seconds": 1.0, "s": 1.0, "milliseconds": 1e-3, "ms": 1e-3,
                "microseconds": 1e-6, "nanoseconds": 1e-9, "ns": 1e-9}
"""T4 ``metadata.timeunit`` values, as the reference package reads them."""


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _costs(build: list[Any], run: list[Any], unit: float) -> tuple[float, float]:
    """(build, run) seconds from recorded fields: numbers or lists of numbers (summed).

    As in the reference package, a negative or non-numeric entry (a failure marker) is left
    out, and a config with no usable field at all has no recorded cost (NaN).
    """
    def total(fields: list[Any]) -> float | None:
        values = [v for f in fields for v in (f if isinstance(f, (list, tuple)) else [f])]
        kept = [float(v) for v in values if _is_number(v) and v >= 0]
        return sum(kept) * unit if kept else None

    b, r = total(build), total(run)
    if b is None and r is None:
        return math.nan, math.nan
    return b or 0.0, r or 0.0


def _recording(
    path: Path,
    data: dict[str, Any],
    params: dict[str, list[Any]],
    rows: list[dict[str, Any]],
    times: list[float],
    samples: list[tuple[float, ...]],
    costs: list[tuple[float, float]],
) -> Recording:
    try:
        space = FiniteSpace.from_params(params, rows)
    except (ValueError, EmptySpaceError) as exc:
        raise NotARecordingError(f"{path}: {exc}") from None
    times_array = np.array(times, dtype=float)
    if np.isnan(times_array).all():
        raise NotARecordingError(f"{path}: every recorded config failed, there is no optimum")
    times_array.setflags(write=False)
    build, run = (np.array(c, dtype=float).reshape(len(costs)) for c in zip(*costs, strict=True))
    build.setflags(write=False)
    run.setflags(write=False)
    return Recording(
        source=str(path),
        kernel_name=str(data.get("kernel_name", "")),
        device_name=str(data.get("device_name", "")),
        space=space,
        times=times_array,
        samples=tuple(samples),
        build_seconds=build,
        run_seconds=run,
    )


def _ordered(values: set[Any]) -> list[Any]:
    try:
        return sorted(values)
    except TypeError:
        return sorted(values, key=repr)
