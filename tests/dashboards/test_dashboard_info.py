"""The data behind every dashboard view, asserted on the info objects (plotly is never loaded).

The endpoints that serve them (pages, limits, downsampling over HTTP) are in test_api.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
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
    PROBLEMS_B,
    FilledDb,
    best_fraction,
    launcher_config,
    ok_result,
    shared_database,
)

from xe2tune.dashboards import BestPageQuery, DashboardCache, ImportanceSource, collect_summary
from xe2tune.dashboards._best_table import best_page, get_best_table_info
from xe2tune.dashboards._collect import collect_convergence
from xe2tune.dashboards._downsample import downsample, pareto_front
from xe2tune.dashboards._importance import get_importance_info
from xe2tune.dashboards._labels import problem_label
from xe2tune.dashboards._page import _table_row
from xe2tune.dashboards._roofline import get_roofline_info
from xe2tune.dashboards._units import decade_ticks, engineering
from xe2tune.db import DeviceRecord, MeasuredCeilings, ResultStore, open_store
from xe2tune.kernels import ProblemSpec
from xe2tune.testing import launcher_config as store_config
from xe2tune.testing import ok_result as timed_result
from xe2tune.testing import prefill, tune


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


def _roofline(store: ResultStore, name: str = DEVICE_A.name, **kwargs):
    return get_roofline_info(store, _device(store, name), store.best_per_problem(), **kwargs)


def _drawn(info, kind: str | None = None) -> list[int]:
    return [i for s in info.series if kind is None or s.kind == kind for i in s.trial_ids]


def test_roofline_draws_every_measured_config_when_they_fit(store: ResultStore,
                                                            filled: FilledDb):
    info = _roofline(store)
    assert info.n_points == info.n_measurements == filled.ok_per_device[DEVICE_A.name]
    assert sorted(_drawn(info)) == sorted(set(_drawn(info)))  # each point in one trace
    assert len(_drawn(info)) == info.n_points
    assert info.caption == f"{info.n_points} measured configs, all drawn"


def test_roofline_highlights_the_best_config_of_each_problem(store: ResultStore):
    best = store.best_per_problem()
    device = _device(store, DEVICE_A.name)
    info = _roofline(store)
    assert set(_drawn(info, "best")) == {b.trial_id for b in best if b.device_id == device.id}
    assert len(_drawn(info, "best")) == len(PROBLEMS_A)


def test_roofline_roofs_come_from_the_device_peaks(store: ResultStore):
    info = _roofline(store)
    assert info.peak_bandwidth == PEAKS.bandwidth and info.peak_source == "catalog"
    assert [r.peak_flops for r in info.roofs] == [PEAKS.flops["fp16"], PEAKS.flops["fp32"]]
    assert [r.label for r in info.roofs] == ["bf16/fp16 117 TFLOP/s", "fp32 13.7 TFLOP/s"]
    for roof in info.roofs:
        assert roof.ridge_ai == pytest.approx(roof.peak_flops / PEAKS.bandwidth)
        assert roof.flops[0] == pytest.approx(roof.ai[0] * PEAKS.bandwidth)
        assert roof.flops[1:] == (roof.peak_flops, roof.peak_flops)
        assert roof.ai[0] < roof.ridge_ai < roof.ai[2]


def test_roofline_points_sit_at_their_stated_fraction_below_the_roof(store: ResultStore):
    info = _roofline(store)
    fractions = {c[-1] for c in CONFIG_GRID}
    for series in info.series:
        for ai, flops in zip(series.ai, series.flops, strict=True):
            attainable = min(PEAKS.flops["fp16"], ai * PEAKS.bandwidth)  # fp16/bf16 only
            assert min(abs(flops / attainable - f) for f in fractions) < 1e-9


def test_roofline_hover_shows_problem_config_and_numbers(store: ResultStore):
    info = _roofline(store)
    hovers = [h for s in info.series for h in s.hover]
    assert all(h.count("<br>") == 3 for h in hovers)
    problem, config, numbers, where = hovers[0].split("<br>")
    assert problem.startswith(("prefill d", "decode d")) and " h" in problem
    assert config.startswith(f"{FAMILY} QK ") or config.startswith(f"{BASELINE_FAMILY} QK ")
    assert "PV " in config and "stages" in config
    assert " ms, " in numbers and "FLOP/s" in numbers and "of roofline" in numbers
    assert where.startswith("trial ")
    seeded = [h for h in hovers if "baseline" in h]
    assert len(seeded) == len(BASELINES) * len(PROBLEMS_A)
    assert all(f"{BASELINE_FAMILY} QK " in h for h in seeded)


def test_roofline_prefers_measured_ceilings_then_device_then_recorded_peaks(tmp_path: Path):
    store = open_store(f"sqlite:///{tmp_path / 'peaks.db'}")
    try:
        bare = DEVICE_A.model_copy(update={"peak_flops": {}, "peak_bandwidth": None,
                                           "peak_source": None})
        device_id = store.upsert_device(bare)
        problem = PROBLEMS_A[0]
        study = store.get_or_create_study(
            device_id=device_id, kernel_source_id=store.upsert_kernel_source("f", "h"),
            problem_id=store.upsert_problem(problem), sampler="random", optuna_study_name=None)
        store.record_trial(study.id, ok_result(problem, launcher_config(128, 64, 64, 1, 4), 0.5),
                           number=0, is_default=True)
        recorded = _roofline(store)
        assert recorded.peak_source == "recorded with the measurements"
        assert recorded.peak_bandwidth == PEAKS.bandwidth
        assert {r.peak_flops for r in recorded.roofs} == {PEAKS.flops["fp16"]}
        store.save_ceilings(device_id, MeasuredCeilings(flops={"fp16": 50e12}, bandwidth=200e9))
        measured = _roofline(store)
    finally:
        store.close()
    assert (measured.peak_source, measured.peak_bandwidth) == ("measured", 200e9)
    assert [r.label for r in measured.roofs] == ["fp16 50 TFLOP/s"]


def test_pareto_front_keeps_the_points_nothing_beats_on_both_axes():
    ai = np.array([1.0, 2.0, 2.0, 3.0, 0.5, 3.0])
    flops = np.array([5.0, 4.0, 6.0, 1.0, 9.0, 0.5])
    # (0.5, 9) fastest; (2, 6) beats (1, 5) and (2, 4); (3, 1) has the most intensity.
    assert pareto_front(ai, flops).tolist() == [2, 3, 4]


def test_downsample_keeps_every_best_baseline_and_front_point_within_the_budget():
    rng = np.random.default_rng(0)
    n = 50_000
    ai = 10 ** rng.uniform(0, 3, n)
    flops = np.minimum(100e12, ai * 456e9) * rng.uniform(0.01, 1, n)
    best = np.zeros(n, dtype=bool)
    best[rng.choice(n, 300, replace=False)] = True
    baseline = np.zeros(n, dtype=bool)
    baseline[rng.choice(n, 600, replace=False)] = True
    kept = downsample(ai, flops, best, baseline, budget=3000)
    groups = [kept.best, kept.baseline, kept.pareto, kept.sampled]
    drawn = np.concatenate(groups)
    assert len(drawn) == len(set(drawn.tolist())) == kept.n_points <= 3000
    assert set(np.flatnonzero(best)) <= set(drawn.tolist())
    assert set(np.flatnonzero(baseline)) <= set(drawn.tolist())
    assert set(pareto_front(ai, flops).tolist()) <= set(drawn.tolist())
    assert len(kept.sampled) > 1000  # the budget is used, not just the must-keep points
    # The sample spans the cloud: both ends of each axis are represented.
    sample_ai = np.log10(ai[kept.sampled])
    assert sample_ai.min() < 0.1 and sample_ai.max() > 2.9


def test_downsample_draws_must_keep_points_even_past_the_budget():
    ai, flops = np.arange(1.0, 11.0), np.arange(10.0, 0.0, -1.0)
    everything = np.ones(10, dtype=bool)
    kept = downsample(ai, flops, everything, everything, budget=3)
    assert kept.n_points == 10 and len(kept.sampled) == 0
    rising = np.arange(1.0, 11.0)  # only the last point is on the front
    some = np.zeros(10, dtype=bool)
    some[:6] = True  # 7 must-keep points, budget 4: the sample still gets 4 // 2 of the 3 left
    assert len(downsample(ai, rising, some, some, budget=4).sampled) == 2


def test_roofline_downsamples_a_device_past_the_budget(store: ResultStore, filled: FilledDb):
    info = _roofline(store, max_points=12)
    best_ids = {b.trial_id for b in store.best_per_problem() if b.device == DEVICE_A.name}
    assert info.n_measurements == filled.ok_per_device[DEVICE_A.name] > info.n_points
    assert set(_drawn(info, "best")) == best_ids
    assert len(_drawn(info, "baseline")) + len(
        [h for s in info.series if s.kind == "best" for h in s.hover if "baseline" in h]
    ) == len(BASELINES) * len(PROBLEMS_A)
    assert info.caption.startswith(f"{info.n_points:,} points stand for "
                                   f"{info.n_measurements:,} measurements")


def test_engineering_units_name_the_unit_and_its_prefix():
    assert engineering(456e9, "B/s") == "456 GB/s"
    assert engineering(116.7e12, "FLOP/s") == "117 TFLOP/s"
    assert engineering(2.5e9, "FLOP/s") == "2.5 GFLOP/s"
    ticks = decade_ticks(3e9, 2e14, "FLOP/s")
    assert ticks["ticktext"] == ["1 GFLOP/s", "10 GFLOP/s", "100 GFLOP/s", "1 TFLOP/s",
                                 "10 TFLOP/s", "100 TFLOP/s", "1 PFLOP/s"]
    assert decade_ticks(0.5, 300, None)["ticktext"] == ["0.1", "1", "10", "100", "1000"]


def test_best_table_rows_and_filters(store: ResultStore):
    best = store.best_per_problem()
    info = get_best_table_info(best)
    assert len(info.rows) == len(best)
    assert info.dtypes == ("bf16", "fp16") and info.head_dims == (64, 128)
    assert info.modes == ("decode", "prefill") and len(info.devices) == 2
    row = info.rows[0]
    assert row.roofline_pct == pytest.approx(best_fraction() * 100)
    assert row.speedup == pytest.approx(best_fraction() / CONFIG_GRID[0][-1])
    assert row.time_ms == pytest.approx(best[0].median_s * 1e3)
    assert row.config.startswith("QK 128x64x32")
    assert (row.family, row.baseline) == (FAMILY, None)
    assert (row.trial_id, row.study_id) == (best[0].trial_id, best[0].study_id)


def test_best_table_compares_with_the_fastest_baseline(store: ResultStore):
    info = get_best_table_info(store.best_per_problem())
    assert info.baseline_labels == tuple(sorted(BASELINES.values()))
    fastest = max(BASELINES, key=lambda i: CONFIG_GRID[i][-1])
    for row in info.rows:
        assert [c.label for c in row.baselines] == list(info.baseline_labels)
        for cell in row.baselines:
            fraction = CONFIG_GRID[next(i for i, label in BASELINES.items()
                                        if label == cell.label)][-1]
            assert (cell.family, cell.status) == (BASELINE_FAMILY, "ok")
            assert cell.speedup == pytest.approx(best_fraction() / fraction)
            assert cell.time_ms == pytest.approx(row.time_ms * cell.speedup)
            assert cell.config.startswith("QK ")
        assert row.fastest_baseline == BASELINES[fastest]
        assert row.baseline_speedup == pytest.approx(best_fraction() / CONFIG_GRID[fastest][-1])
    flat = _table_row(info.rows[0])
    assert flat["time_ms"] == info.rows[0].time_ms
    assert [b["label"] for b in flat["baselines"]] == list(info.baseline_labels)


def test_best_page_filters_sorts_and_slices(store: ResultStore):
    rows = get_best_table_info(store.best_per_problem()).rows
    page = best_page(rows, BestPageQuery(dtype="fp16", sort="time_ms", descending=True,
                                         limit=2, offset=1))
    fp16 = sorted((r for r in rows if r.dtype == "fp16"), key=lambda r: -r.time_ms)
    assert page.total == len(fp16) == sum(p.dtype == "fp16" for p in PROBLEMS_A)
    assert [r.trial_id for r in page.rows] == [r.trial_id for r in fp16[1:3]]
    assert best_page(rows, BestPageQuery(head_dim=64, device=DEVICE_A.name)).total == 1
    assert best_page(rows, BestPageQuery(offset=100)).rows == ()
    with pytest.raises(ValueError, match="accepted: time_ms, tflops"):
        BestPageQuery(sort="nope")
    with pytest.raises(ValueError, match="limit must be 1..500"):
        BestPageQuery(limit=0)


def test_convergence_tracks_the_best_so_far(store: ResultStore, filled: FilledDb):
    study = store.study(filled.study_ids[0])
    assert study is not None
    info = collect_convergence(store, study)
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
    assert "no optuna study" in (get_importance_info(1, None).note or "")
    lonely = optuna.create_study()
    lonely.add_trial(optuna.trial.create_trial(
        params={"bq": 64}, distributions={"bq": optuna.distributions.IntDistribution(1, 256)},
        value=1.0))
    assert "1 complete trial(s)" in (get_importance_info(2, lonely).note or "")


def test_summary_counts_at_one_version(store: ResultStore, filled: FilledDb):
    summary = collect_summary(store)
    assert summary.version == store.data_version()
    assert (summary.n_measurements, summary.n_ok) == (filled.n_trials, filled.n_ok)
    assert [s.id for s in summary.studies] == filled.study_ids
    assert len(summary.devices) == 2
    assert summary.n_problems == len(set(PROBLEMS_A) | set(PROBLEMS_B))
    assert len(summary.table.rows) == len(store.best_per_problem())


def test_computing_infos_never_loads_plotly(filled: FilledDb):
    script = (
        "import sys\n"
        "from xe2tune.dashboards import collect_summary, ImportanceSource\n"
        "from xe2tune.dashboards._roofline import get_roofline_info\n"
        "from xe2tune.db import open_store\n"
        f"store = open_store({filled.url!r})\n"
        "summary = collect_summary(store)\n"
        "ImportanceSource(store).info(summary.studies[0])\n"
        "info = get_roofline_info(store, summary.devices[0], store.best_per_problem())\n"
        "assert info.n_points > 0\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] == 'plotly')\n"
        "assert not loaded, loaded\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]


class _HeldRooflineReads:
    """A store whose roofline reads wait while ``go`` is clear: a recompute that takes long."""

    def __init__(self, store: ResultStore) -> None:
        self._store = store
        self.go = threading.Event()
        self.go.set()

    def __getattr__(self, name: str):
        return getattr(self._store, name)

    def roofline_points(self, device_id: int):
        self.go.wait(60)
        return self._store.roofline_points(device_id)


def _measurements_drawn(cache: DashboardCache, device_id: int) -> int:
    return json.loads(cache.roofline(device_id))["n_measurements"]


def test_the_page_never_waits_for_a_recompute(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'ahead.db'}")
    tune(store, prefill(512), [timed_result(store_config(), 1e-3)])
    [device] = store.devices()
    assert device.id is not None
    on_request = DashboardCache(store)  # no ahead thread: every view is computed on request
    assert _measurements_drawn(on_request, device.id) == 1
    held = _HeldRooflineReads(store)
    cache = DashboardCache(held)
    cache.start_ahead(0.01)
    try:
        assert _measurements_drawn(cache, device.id) == 1
        held.go.clear()  # the ahead thread's next roofline blocks
        tune(store, prefill(1024), [timed_result(store_config(), 1e-3)])
        assert _measurements_drawn(on_request, device.id) == 2
        # answered at once with the last complete view, while the new one is computed
        assert _measurements_drawn(cache, device.id) == 1 and not cache.views_ready()
        assert json.loads(cache.summary_json())["version"] <= store.data_version()
        held.go.set()
        deadline = time.monotonic() + 60
        while not cache.views_ready():
            assert time.monotonic() < deadline, "the ahead thread never computed the new view"
            time.sleep(0.02)
        assert _measurements_drawn(cache, device.id) == 2
    finally:
        held.go.set()
        cache.close()
        store.close()


class _CountedRooflineReads:
    """A store that counts its roofline reads: how often the ahead thread recomputed."""

    def __init__(self, store: ResultStore) -> None:
        self._store = store
        self.reads = 0

    def __getattr__(self, name: str):
        return getattr(self._store, name)

    def roofline_points(self, device_id: int):
        self.reads += 1
        return self._store.roofline_points(device_id)


def test_the_ahead_thread_rests_while_no_page_asks(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from xe2tune.dashboards import _service

    monkeypatch.setattr(_service, "WATCHED_S", 0.5)
    store = open_store(f"sqlite:///{tmp_path / 'rest.db'}")
    tune(store, prefill(512), [timed_result(store_config(), 1e-3)])
    counted = _CountedRooflineReads(store)
    cache = DashboardCache(counted)
    cache.start_ahead(0.01)

    def wait_ready() -> None:
        deadline = time.monotonic() + 60
        while not cache.views_ready():  # a page's question: it asks
            assert time.monotonic() < deadline, "the ahead thread never computed the views"
            time.sleep(0.02)

    try:
        wait_ready()  # the first views, computed at start
        time.sleep(0.8)  # nobody asks for longer than WATCHED_S
        reads = counted.reads
        tune(store, prefill(1024), [timed_result(store_config(), 1e-3)])
        time.sleep(0.5)
        assert counted.reads == reads  # the data moved, but no page is open
        wait_ready()  # a page asks again: the views of the new version are computed ahead
        assert counted.reads > reads
    finally:
        cache.close()
        store.close()


def test_every_drawn_trace_type_is_in_the_pages_plotly_bundle(store: ResultStore,
                                                               filled: FilledDb):
    from xe2tune.dashboards._plotly_imports import (
        DRAWN_TRACE_TYPES,
        GL2D_BUNDLE,
        GL2D_VERSION,
        plotly_js,
    )

    cache = DashboardCache(store)
    views = [json.loads(cache.roofline(d.id)) for d in store.devices()]
    for study_id in filled.study_ids[:3]:
        views += [json.loads(cache.study(study_id)), json.loads(cache.importance(study_id))]
    drawn = {trace.get("type", "scatter") for view in views if view.get("figure")
             for trace in view["figure"]["data"]}
    assert drawn and drawn <= DRAWN_TRACE_TYPES, drawn
    bundle = GL2D_BUNDLE.read_text(encoding="utf-8")
    assert f"(gl2d - minified) v{GL2D_VERSION}" in bundle[:200]
    for kind in DRAWN_TRACE_TYPES:
        assert f'moduleType:"trace",name:"{kind}"' in bundle, kind
    from plotly.offline import get_plotlyjs_version
    served = plotly_js()
    assert (served == bundle) == (get_plotlyjs_version() == GL2D_VERSION)


def test_the_study_list_offers_the_latest_studies_and_counts_them_all(
        store: ResultStore, filled: FilledDb, monkeypatch: pytest.MonkeyPatch):
    from xe2tune.dashboards import _page

    summary = collect_summary(store)
    every = sorted(s.id for s in summary.studies)
    assert len(every) > 2
    monkeypatch.setattr(_page, "STUDY_CHOICES", 2)
    view = _page.summary_view(summary)
    assert [sid for sid, _ in view["studies"]] == every[-2:]
    assert view["counts"]["studies"] == len(every)
    chosen = {every[0]}  # a report names the studies it embeds
    assert [sid for sid, _ in _page.summary_view(summary, study_ids=chosen)["studies"]] == [
        every[0]]


def test_problem_labels_name_dv_and_the_kv_dtype_only_when_not_the_default():
    mha = ProblemSpec("decode", 128, "fp16", 1, 4096, heads_q=32, heads_kv=8)
    assert problem_label(mha) == "decode d128 fp16 q1 kv4096 h32/8 b1"
    mla_fp8 = ProblemSpec("decode", 192, "bf16", 1, 8192, heads_q=128, heads_kv=1,
                          head_dim_v=128, kv_dtype="e4m3")
    assert problem_label(mla_fp8) == "decode d192 dv128 bf16 KV:e4m3 q1 kv8192 h128/1 b1"
