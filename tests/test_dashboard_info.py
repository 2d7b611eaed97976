"""The data behind every dashboard view, asserted on the info objects (plotly is never loaded)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import optuna
import pytest
from _api_fixtures import (
    BASELINE_FAMILY,
    BASELINES,
    CONFIG_GRID,
    DEVICE_A,
    FAMILY,
    PEAKS,
    PROBLEMS_A,
    FilledDb,
    best_fraction,
    launcher_config,
    ok_result,
    shared_database,
)

from xe2tune.dashboards import ImportanceSource, collect_dashboard_info
from xe2tune.dashboards._best_table import _get_best_table_info
from xe2tune.dashboards._convergence import _get_convergence_info
from xe2tune.dashboards._importance import _get_importance_info
from xe2tune.dashboards._page import _table_row
from xe2tune.dashboards._roofline import _get_roofline_info
from xe2tune.db import DeviceRecord, ResultStore, open_store


@pytest.fixture(scope="module")
def filled(tmp_path_factory: pytest.TempPathFactory) -> FilledDb:
    return shared_database(tmp_path_factory.getbasetemp())


@pytest.fixture(scope="module")
def store(filled: FilledDb) -> Iterator[ResultStore]:
    opened = open_store(filled.url)
    yield opened
    opened.close()


def _device(store: ResultStore, name: str) -> DeviceRecord:
    return next(d for d in store.devices() if d.name == name)


def test_roofline_has_one_point_per_measured_config(store: ResultStore, filled: FilledDb):
    info = _get_roofline_info(store.results_frame(), _device(store, DEVICE_A.name),
                              store.best_per_problem())
    assert info.n_points == filled.ok_per_device[DEVICE_A.name]
    assert info.n_unplotted == 0
    assert len(info.series) == len(PROBLEMS_A)
    assert all(len(s.ai) == len(s.flops) == len(s.hover) == len(CONFIG_GRID)
               for s in info.series)
    assert sum(len(s.trial_ids) for s in info.series) == info.n_points
    assert "prefill d128 fp16 q1024 kv1024 h8/8 b1" in {s.label for s in info.series}


def test_roofline_highlights_the_best_config_of_each_problem(store: ResultStore):
    best = store.best_per_problem()
    device = _device(store, DEVICE_A.name)
    info = _get_roofline_info(store.results_frame(), device, best)
    assert set(info.best.trial_ids) == {b.trial_id for b in best if b.device_id == device.id}
    assert len(info.best.ai) == len(PROBLEMS_A)


def test_roofline_roofs_come_from_the_device_peaks(store: ResultStore):
    info = _get_roofline_info(store.results_frame(), _device(store, DEVICE_A.name),
                              store.best_per_problem())
    assert info.peak_bandwidth == PEAKS.bandwidth and info.peak_source == "catalog"
    assert [r.peak_flops for r in info.roofs] == [PEAKS.flops["fp16"], PEAKS.flops["fp32"]]
    assert info.roofs[0].label.startswith("bf16/fp16 peak")
    for roof in info.roofs:
        assert roof.ridge_ai == pytest.approx(roof.peak_flops / PEAKS.bandwidth)
        assert roof.flops[0] == pytest.approx(roof.ai[0] * PEAKS.bandwidth)
        assert roof.flops[1:] == (roof.peak_flops, roof.peak_flops)
        assert roof.ai[0] < roof.ridge_ai < roof.ai[2]


def test_roofline_points_sit_at_their_stated_fraction_below_the_roof(store: ResultStore):
    info = _get_roofline_info(store.results_frame(), _device(store, DEVICE_A.name),
                              store.best_per_problem())
    fp16_peak = PEAKS.flops["fp16"]
    fractions = {c[-1] for c in CONFIG_GRID}
    for series in info.series:
        for ai, flops in zip(series.ai, series.flops, strict=True):
            attainable = min(fp16_peak if "fp32" not in series.label else PEAKS.flops["fp32"],
                             ai * PEAKS.bandwidth)
            assert min(abs(flops / attainable - f) for f in fractions) < 1e-9


def test_roofline_hover_shows_the_config(store: ResultStore):
    info = _get_roofline_info(store.results_frame(), _device(store, DEVICE_A.name),
                              store.best_per_problem())
    hover = info.series[0].hover[0]
    assert "QK " in hover and "PV " in hover and "stages" in hover and "TFLOP/s" in hover
    assert hover.startswith(f"{FAMILY} QK ") and "baseline" not in hover
    seeded = [h for h in info.series[0].hover if "baseline" in h]
    assert len(seeded) == len(BASELINES)
    assert all(h.startswith(f"{BASELINE_FAMILY} QK ") for h in seeded)
    assert sorted(h.rsplit("baseline ", 1)[1] for h in seeded) == sorted(BASELINES.values())


def test_roofline_without_device_peaks_uses_the_recorded_ones(store: ResultStore):
    bare = _device(store, DEVICE_A.name).model_copy(update={"peak_flops": {},
                                                            "peak_bandwidth": None})
    info = _get_roofline_info(store.results_frame(), bare, store.best_per_problem())
    assert info.peak_source == "recorded with the measurements"
    assert info.peak_bandwidth == PEAKS.bandwidth
    assert {r.peak_flops for r in info.roofs} == {PEAKS.flops["fp16"]}  # only fp16/bf16 ran


def test_roofline_counts_ok_trials_it_cannot_place(tmp_path: Path):
    store = open_store(f"sqlite:///{tmp_path / 'nopeaks.db'}")
    try:
        device_id = store.upsert_device(DEVICE_A)
        problem = PROBLEMS_A[0]
        study = store.get_or_create_study(
            device_id=device_id, kernel_source_id=store.upsert_kernel_source("f", "h"),
            problem_id=store.upsert_problem(problem), sampler="random", optuna_study_name=None)
        placed = ok_result(problem, launcher_config(128, 64, 64, 1, 4), 0.5)
        unplaced = ok_result(problem, launcher_config(128, 128, 64, 1, 4), 0.4)
        store.record_trial(study.id, placed, number=0, is_default=True)
        store.record_trial(study.id, type(unplaced)(**{**unplaced.__dict__, "roofline": None}),
                           number=1)
        info = _get_roofline_info(store.results_frame(), _device(store, DEVICE_A.name),
                                  store.best_per_problem())
    finally:
        store.close()
    assert (info.n_points, info.n_unplotted) == (1, 1)


def test_best_table_rows_and_filters(store: ResultStore):
    best = store.best_per_problem()
    info = _get_best_table_info(best)
    assert len(info.rows) == len(best)
    assert info.dtypes == ("bf16", "fp16") and info.head_dims == (64, 128)
    assert info.modes == ("decode", "prefill") and len(info.devices) == 2
    row = info.rows[0]
    assert row.roofline_pct == pytest.approx(best_fraction() * 100)
    assert row.speedup == pytest.approx(best_fraction() / CONFIG_GRID[0][-1])
    assert row.time_ms == pytest.approx(best[0].median_s * 1e3)
    assert row.config.startswith("QK 128x64x32")
    assert (row.family, row.baseline) == (FAMILY, None)


def test_best_table_shows_each_baseline_beside_the_best(store: ResultStore):
    info = _get_best_table_info(store.best_per_problem())
    assert info.baseline_labels == tuple(sorted(BASELINES.values()))
    for row in info.rows:
        assert [c.label for c in row.baselines] == list(info.baseline_labels)
        for cell in row.baselines:
            fraction = CONFIG_GRID[next(i for i, label in BASELINES.items()
                                        if label == cell.label)][-1]
            assert (cell.family, cell.status) == (BASELINE_FAMILY, "ok")
            assert cell.speedup == pytest.approx(best_fraction() / fraction)
            assert cell.time_ms == pytest.approx(row.time_ms * cell.speedup)
            assert cell.config.startswith("QK ")
    flat = _table_row(info.rows[0])
    assert "baselines" not in flat and flat["time_ms"] == info.rows[0].time_ms
    for cell in info.rows[0].baselines:
        assert flat[f"baseline_ms:{cell.label}"] == cell.time_ms
        assert flat[f"baseline_speedup:{cell.label}"] == cell.speedup


def test_convergence_tracks_the_best_so_far(store: ResultStore, filled: FilledDb):
    frame = store.results_frame()
    study = store.study(filled.study_ids[0])
    assert study is not None
    info = _get_convergence_info(study, frame[frame["study_id"] == study.id])
    assert info.numbers == tuple(range(len(CONFIG_GRID) + 1))
    assert info.values_ms[-1] is None and info.n_failed == 1
    ok = [v for v in info.values_ms if v is not None]
    assert info.default_ms == ok[0]
    running = [v for v in info.best_so_far_ms if v is not None]
    assert running == sorted(running, reverse=True)
    assert running[-1] == min(ok)
    assert "prefill d128 fp16 q512 kv512" in info.title


def test_importance_ranks_the_search_parameters(store: ResultStore, filled: FilledDb):
    study = store.study(filled.study_ids[0])
    assert study is not None
    info = ImportanceSource(store).info(study)
    assert info.note is None
    assert set(info.params) == {"bq", "bk", "stages"}
    assert sum(info.importances) == pytest.approx(1.0)
    assert list(info.importances) == sorted(info.importances)


def test_importance_explains_when_it_cannot_rank():
    assert "no optuna study" in (_get_importance_info(1, None).note or "")
    lonely = optuna.create_study()
    lonely.add_trial(optuna.trial.create_trial(
        params={"bq": 64}, distributions={"bq": optuna.distributions.IntDistribution(1, 256)},
        value=1.0))
    assert "1 complete trial(s)" in (_get_importance_info(2, lonely).note or "")


def test_collect_reads_one_version_of_everything(store: ResultStore, filled: FilledDb):
    info = collect_dashboard_info(store)
    assert info.version == store.data_version()
    assert info.n_points == filled.n_ok
    assert [c.study_id for c in info.convergence] == filled.study_ids
    assert len(info.rooflines) == 2


def test_computing_infos_never_loads_plotly(filled: FilledDb):
    script = (
        "import sys\n"
        "from xe2tune.dashboards import collect_dashboard_info, ImportanceSource\n"
        "from xe2tune.db import open_store\n"
        f"store = open_store({filled.url!r})\n"
        "info = collect_dashboard_info(store)\n"
        "ImportanceSource(store).info(info.studies[0])\n"
        "assert info.n_points > 0\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] == 'plotly')\n"
        "assert not loaded, loaded\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
