"""A real SQLite results database filled through the store's public write API, for API tests.

The rows are synthetic (the tuner is not what these tests exercise): every number is derived
from a stated roofline fraction through the harness's own roofline model, so a test can predict
which config is best. The device is named "Synthetic ..." so nobody mistakes it for hardware.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import optuna

from xe2tune.api import Settings
from xe2tune.db import DeviceRecord, ResultSubmission, TrialEntry, open_store
from xe2tune.harness import (
    CorrectnessReport,
    DevicePeaks,
    RooflineModel,
    TimingStats,
    TrialResult,
    TrialStatus,
)
from xe2tune.kernels import LauncherConfig, ProblemSpec

FAMILY = "sdpa_fwd_test"
SOURCE_HASH = "0123456789abcdef"
PEAKS = DevicePeaks(flops={"fp16": 116.7e12, "bf16": 116.7e12, "fp32": 13.7e12},
                    bandwidth=456e9, source="catalog")
DEVICE_A = DeviceRecord(name="Synthetic Xe2 A", backend="opencl", device_type="gpu",
                        driver="test-1", compute_units=20, peak_flops=PEAKS.flops,
                        peak_bandwidth=PEAKS.bandwidth, peak_source="catalog")
DEVICE_B = DEVICE_A.model_copy(update={"name": "Synthetic Xe2 B"})

PROBLEMS_A = (
    ProblemSpec("prefill", 128, "fp16", 512, 512),
    ProblemSpec("prefill", 128, "fp16", 1024, 1024),
    ProblemSpec("prefill", 128, "fp16", 4096, 4096),
    ProblemSpec("prefill", 128, "fp16", 1024, 1024, causal=True),
    ProblemSpec("decode", 128, "fp16", 1, 8192, heads_q=32, heads_kv=8),
    ProblemSpec("prefill", 64, "bf16", 2048, 2048),
)
PROBLEMS_B = (ProblemSpec("prefill", 64, "bf16", 2048, 2048),)

# (bq, bk, stages, sg_q, fraction of the roofline reached); the first is the family default.
CONFIG_GRID = ((64, 64, 1, 4, 0.30), (128, 64, 2, 8, 0.62), (128, 32, 2, 8, 0.48),
               (256, 64, 2, 8, 0.55), (64, 32, 3, 4, 0.41))
# Grid entries stored as seeded baselines of a second family (every study spans both), by index.
BASELINE_FAMILY = "sdpa_xmx_fwd_test"
BASELINES = {2: "oneDNN default", 3: "seed 000 SageV1"}


def launcher_config(head_dim: int, bq: int, bk: int, stages: int, sg_q: int, *,
                    family: str = FAMILY) -> LauncherConfig:
    """A valid-looking config in the seed vocabulary (BV = 64, so vtiles = D / 64)."""
    return LauncherConfig(family=family, shape_qk=(bq, bk, 32), shape_pv=(bq, 64, bk),
                          shape_out=(bq, head_dim), subgroup_layout=(sg_q, 1), stages=stages,
                          subgroup_size=16, knobs=(("prefetch", True),))


def ok_result(problem: ProblemSpec, config: LauncherConfig, fraction: float) -> TrialResult:
    """An OK trial whose median reaches ``fraction`` of the attainable FLOP/s."""
    model = RooflineModel(PEAKS)
    fastest = model.figures(problem, 1.0)
    median = fastest.flops / (fastest.attainable_flops * fraction)
    samples = (median * 0.99, median, median * 1.01, median * 1.03, median)
    return TrialResult(
        status=TrialStatus.OK, config=config, build_s=1.5, verify_s=0.2, bench_s=0.4,
        timing=TimingStats.from_samples(samples, warmup=3, n_buf=2, host_overhead_s=1e-6),
        correctness=CorrectnessReport(nonfinite=0, max_abs_error=1e-3, rel_l2_error=1e-4,
                                      atol=1e-2, rtol_l2=1e-2),
        roofline=model.figures(problem, median),
    )


def failed_result(config: LauncherConfig, status: TrialStatus, error: str) -> TrialResult:
    """A trial that never produced a timed, verified result."""
    return TrialResult(status=status, config=config, build_s=0.7, error=error)


@dataclass
class FilledDb:
    """What :func:`fill_database` stored, so tests can predict every answer."""

    url: str
    n_trials: int = 0
    n_ok: int = 0
    study_ids: list[int] = field(default_factory=list)
    ok_per_device: dict[str, int] = field(default_factory=dict)


def fill_database(path: str, *, with_failures: bool = True, url: str | None = None) -> FilledDb:
    """Create the SQLite file at ``path`` (or fill the database at ``url``) and store every
    problem's grid through the store."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    filled = FilledDb(url=url or f"sqlite:///{path}")
    store = open_store(filled.url)
    storage = optuna.storages.RDBStorage(store.optuna_storage_url(),
                                         engine_kwargs=store.optuna_engine_kwargs())
    try:
        source_id = store.upsert_kernel_source(FAMILY, SOURCE_HASH)
        for device, problems in ((DEVICE_A, PROBLEMS_A), (DEVICE_B, PROBLEMS_B)):
            device_id = store.upsert_device(device)
            for problem in problems:
                name = f"test:{device.name}:{problem.key()}"
                study = store.get_or_create_study(
                    device_id=device_id, kernel_source_id=source_id,
                    problem_id=store.upsert_problem(problem), sampler="tpe",
                    optuna_study_name=name)
                filled.study_ids.append(study.id)
                optuna_study = optuna.create_study(study_name=name, storage=storage)
                number = itertools.count()
                for grid_index, (bq, bk, stages, sg_q, fraction) in enumerate(CONFIG_GRID):
                    label = BASELINES.get(grid_index)
                    config = launcher_config(problem.head_dim, bq, bk, stages, sg_q,
                                             family=BASELINE_FAMILY if label else FAMILY)
                    result = ok_result(problem, config, fraction)
                    index = next(number)
                    store.record_trial(study.id, result, number=index, is_default=index == 0,
                                       baseline=label)
                    optuna_study.add_trial(optuna.trial.create_trial(
                        params={"bq": bq, "bk": bk, "stages": stages},
                        distributions={
                            "bq": optuna.distributions.CategoricalDistribution([64, 128, 256]),
                            "bk": optuna.distributions.CategoricalDistribution([32, 64]),
                            "stages": optuna.distributions.IntDistribution(1, 3)},
                        value=result.objective))
                    filled.n_trials += 1
                    filled.n_ok += 1
                    filled.ok_per_device[device.name] = filled.ok_per_device.get(
                        device.name, 0) + 1
                if with_failures:
                    broken = launcher_config(problem.head_dim, 512, 64, 4, 16)
                    store.record_trial(study.id, failed_result(
                        broken, TrialStatus.COMPILE_ERROR, "error: local memory exceeded"),
                        number=next(number))
                    filled.n_trials += 1
    finally:
        store.close()
    return filled


def best_fraction() -> float:
    """The roofline fraction of the config every problem's best trial was built with."""
    return max(fraction for *_, fraction in CONFIG_GRID)


def submission_payload(problem: ProblemSpec, config: LauncherConfig, fraction: float,
                       device: DeviceRecord = DEVICE_A) -> dict:
    """The JSON body of ``POST /v1/results`` for one OK trial (what a remote tuner sends)."""
    return ResultSubmission.from_result(
        ok_result(problem, config, fraction), device=device, family=FAMILY,
        source_hash=SOURCE_HASH, problem=problem).model_dump(mode="json")


_SHARED: dict[str, FilledDb] = {}


def shared_database(base_dir: Path) -> FilledDb:
    """One filled database per test session (this module is imported once per session)."""
    key = str(base_dir)
    if key not in _SHARED:
        _SHARED[key] = fill_database(str(base_dir / "api_shared.db"))
    return _SHARED[key]


def api_settings(**fields: object) -> Settings:
    """Settings for an app under TestClient, whose requests carry the Host header "testserver"."""
    return Settings(allowed_hosts=("testserver",), **fields)


def free_port() -> int:
    """A TCP port on loopback nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def xe2tune_command() -> str:
    """The ``xe2tune`` console script of the running interpreter's environment."""
    script = Path(sys.executable).with_name("xe2tune")
    return str(script) if script.exists() else "xe2tune"


@contextmanager
def running_server(db_url: str, log_path: Path, *, token: str | None = None, workers: int = 1,
                   startup_s: float = 120.0, extra_args: tuple[str, ...] = (),
                   executable: str | None = None) -> Iterator[str]:
    """``xe2tune serve`` as a real process on a free loopback port; yields its base URL.

    ``executable``: another tree's ``xe2tune`` console script (benchmarks compare two), else
    this environment's.
    """
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k != "XE2TUNE_API_TOKEN"}
    if token is not None:
        env["XE2TUNE_API_TOKEN"] = token
    command = [executable or xe2tune_command(), "serve", "--host", "127.0.0.1", "--port", str(port),
               "--db", db_url, "--workers", str(workers), *extra_args]
    with log_path.open("w") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + startup_s
        while True:
            try:
                with urllib.request.urlopen(f"{base}/healthz", timeout=2) as response:
                    if response.status == 200:
                        break
            except OSError as exc:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"xe2tune serve did not start:\n"
                                       f"{log_path.read_text()[-3000:]}") from exc
                time.sleep(0.3)
        yield base
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


# -- many synthetic trials (dashboards at scale, load benchmarks) --------------------------------

PLAN_BASELINES = ("seed 000 SageV1", "oneDNN default", "SYCL*TLA BMG")


@dataclass(frozen=True)
class FillPlan:
    """What to store: every problem studied on every device, trials spread evenly.

    The first trial of each study is its default config; the next ``baselines`` trials are
    stored as seeded baselines. Roofline fractions are a hash of (device, problem, trial), so
    every run stores the same numbers.
    """

    problems: tuple[ProblemSpec, ...]
    devices: tuple[DeviceRecord, ...]
    measurements: int
    baselines: int = 0

    def studies(self) -> list[tuple[int, int]]:
        """(device index, problem index) of every study, in creation order: problem by
        problem, so that a fill stopped early has spread over every device."""
        return [(d, p) for p in range(len(self.problems)) for d in range(len(self.devices))]

    def trials_per_study(self) -> list[int]:
        """How many trials each study of :meth:`studies` gets."""
        count = len(self.studies())
        return [self.measurements // count + (i < self.measurements % count)
                for i in range(count)]


def _plan_fraction(key: str) -> float:
    digest = int.from_bytes(hashlib.sha256(key.encode()).digest()[:4], "big")
    return 0.05 + 0.85 * digest / 2**32


def fill_studies(args: tuple[str, FillPlan, list[int]]) -> int:
    """Store the given studies of a plan (one transaction per study); the trial count.

    One argument tuple, so that a ``multiprocessing`` pool can map it over chunks of studies.
    """
    url, plan, indexes = args
    store = open_store(url)
    try:
        source_id = store.upsert_kernel_source(FAMILY, SOURCE_HASH)
        device_ids = [store.upsert_device(device) for device in plan.devices]
        studies = plan.studies()
        per_study = plan.trials_per_study()
        for index in indexes:
            device_index, problem_index = studies[index]
            problem = plan.problems[problem_index]
            study = store.get_or_create_study(
                device_id=device_ids[device_index], kernel_source_id=source_id,
                problem_id=store.upsert_problem(problem), sampler="random",
                optuna_study_name=None)
            entries = []
            for i in range(per_study[index]):
                config = dataclasses.replace(
                    launcher_config(problem.head_dim, (32, 64, 128, 256)[i % 4],
                                    (16, 32, 64, 128)[i // 4 % 4], 1 + i // 16 % 4,
                                    1 + i // 64 % 8),
                    knobs=(("variant", i // 512),))
                result = ok_result(problem, config,
                                   _plan_fraction(f"{device_index}:{problem.key()}:{i}"))
                baseline = PLAN_BASELINES[i - 1] if 1 <= i <= plan.baselines else None
                entries.append(TrialEntry(result, number=i, is_default=i == 0,
                                          baseline=baseline))
            store.record_trials(study.id, entries)  # one transaction per study
    finally:
        store.close()
    return sum(per_study[i] for i in indexes)
