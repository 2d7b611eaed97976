"""The ResultStore conformance suite (optuna's ``pytest_storages`` pattern).

Every ResultStore implementation's test module subclasses :class:`StoreContract` and provides a
``store`` fixture. This module imports pytest (the ``[test]`` extra); the builders it uses are
``xe2tune.testing.records``.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace
from typing import TYPE_CHECKING

import pytest
from pydantic import ValidationError

from xe2tune.db import (
    BestQuery,
    BestsSince,
    ConfirmationEntry,
    ConfirmationRecord,
    MeasuredCeilings,
    ResultFilters,
    ResultStore,
    ResultSubmission,
    TrialEntry,
    results_csv,
)
from xe2tune.errors import StoreError
from xe2tune.measurement import TimingStats, TrialStatus
from xe2tune.testing.records import (
    DEVICE,
    failed_result,
    launcher_config,
    ok_result,
    prefill,
    submission,
    tune,
)

if TYPE_CHECKING:
    import pandas


class StoreContract:
    """Behaviour every ResultStore must have. Subclasses provide a fresh ``store`` fixture."""

    @pytest.fixture
    def store(self) -> ResultStore:
        """A fresh, empty store; each implementation's test module overrides this."""
        raise NotImplementedError

    # -- devices, ceilings, sources, problems, studies ---------------------------------------

    def test_upsert_device_is_keyed_by_name_backend_driver(self, store: ResultStore) -> None:
        first = store.upsert_device(DEVICE)
        assert store.upsert_device(DEVICE) == first
        measured = DEVICE.model_copy(update={"peak_bandwidth": 400e9, "peak_source": "measured"})
        assert store.upsert_device(measured) == first
        newer = store.upsert_device(DEVICE.model_copy(update={"driver": "2.0"}))
        assert newer != first
        [one, two] = store.devices()
        assert (one.id, one.peak_bandwidth, one.peak_source) == (first, 400e9, "measured")
        assert one.peak_flops == DEVICE.peak_flops and one.sub_group_sizes == (16, 32)
        assert two.driver == "2.0"

    def test_ceilings_round_trip_and_replace(self, store: ResultStore) -> None:
        device_id = store.upsert_device(DEVICE)
        assert store.ceilings(device_id) is None
        store.save_ceilings(device_id, MeasuredCeilings(flops={"fp32": 1e11}, bandwidth=5e10))
        store.save_ceilings(device_id, MeasuredCeilings(
            flops={"fp16": 2e11, "fp32": 1e11}, bandwidth=6e10, details={"copy_mb": 256}))
        got = store.ceilings(device_id)
        assert got is not None
        assert got.flops == {"fp16": 2e11, "fp32": 1e11} and got.bandwidth == 6e10
        assert got.details == {"copy_mb": 256} and got.measured_at is not None
        with pytest.raises(StoreError, match="unknown device"):
            store.save_ceilings(device_id + 99, MeasuredCeilings(flops={}, bandwidth=1.0))

    def test_sources_and_problems_are_idempotent(self, store: ResultStore) -> None:
        assert store.upsert_kernel_source("f", "h1") == store.upsert_kernel_source("f", "h1")
        assert store.upsert_kernel_source("f", "h1") != store.upsert_kernel_source("f", "h2")
        assert store.upsert_problem(prefill(512)) == store.upsert_problem(prefill(512))
        assert store.upsert_problem(prefill(512)) != store.upsert_problem(prefill(512,
                                                                                  causal=True))

    def test_study_is_one_per_triple(self, store: ResultStore) -> None:
        ids = dict(device_id=store.upsert_device(DEVICE),
                   kernel_source_id=store.upsert_kernel_source("f", "h"),
                   problem_id=store.upsert_problem(prefill(512)))
        created = store.get_or_create_study(**ids, sampler="random", optuna_study_name=None)
        again = store.get_or_create_study(**ids, sampler="tpe", optuna_study_name="s1")
        assert again.id == created.id and again.sampler == "random"
        assert again.optuna_study_name == "s1" and again.problem == prefill(512)
        other = dict(ids, problem_id=store.upsert_problem(prefill(1024)))
        with pytest.raises(StoreError, match="already belongs"):
            store.get_or_create_study(**other, sampler="tpe", optuna_study_name="s1")
        with pytest.raises(StoreError, match="unknown problem id"):
            store.get_or_create_study(**dict(ids, problem_id=999), sampler="tpe",
                                      optuna_study_name=None)

    def test_a_study_moves_to_another_optuna_study_keeping_its_trials(
            self, store: ResultStore) -> None:
        study_id = tune(store, prefill(512), [ok_result(launcher_config(), 1e-3)])
        held = store.study(study_id)
        moved = store.move_to_optuna_study(study_id, "s2")
        assert moved.id == study_id and moved.optuna_study_name == "s2"
        assert moved.problem == held.problem and moved.sampler == held.sampler
        assert store.study(study_id).optuna_study_name == "s2"
        assert len(store.trials(study_id)) == 1
        assert store.move_to_optuna_study(study_id, "s2").optuna_study_name == "s2"
        other = tune(store, prefill(1024), [ok_result(launcher_config(), 1e-3)])
        with pytest.raises(StoreError, match="already belongs"):
            store.move_to_optuna_study(other, "s2")
        with pytest.raises(StoreError, match="unknown study id"):
            store.move_to_optuna_study(999, "s3")

    # -- trials ----------------------------------------------------------------------------

    def test_record_and_find_trial_keep_every_statistic(self, store: ResultStore) -> None:
        config = launcher_config()
        result = replace(ok_result(config, 1e-3), extra={"work_groups": 64, "plan": "split-kv"})
        study_id = tune(store, prefill(512), [result])
        found = store.find_trial(study_id, config.config_hash())
        assert found is not None and found.status is TrialStatus.OK and found.is_default
        assert found.config == config and found.number == 0
        assert found.extra == {"work_groups": 64, "plan": "split-kv"}
        m = found.measurement
        assert m is not None and result.timing and result.roofline
        assert m.samples == result.timing.samples and m.iterations == 5
        assert m.median_s == pytest.approx(result.timing.median) == found.objective
        assert m.p90_s == pytest.approx(result.timing.p90) and m.warmup == 3
        assert m.roofline_fraction == pytest.approx(result.roofline.roofline_fraction)
        assert m.tflops == pytest.approx(result.roofline.tflops) and m.peak_source == "catalog"
        assert m.max_abs_error == 1e-3 and m.rel_l2_error == 2e-4 and m.passed
        assert store.find_trial(study_id, "0" * 16) is None

    def test_a_config_is_never_stored_twice(self, store: ResultStore) -> None:
        config = launcher_config()
        study_id = tune(store, prefill(512), [ok_result(config, 1e-3)])
        with pytest.raises(StoreError, match="already stored"):
            store.record_trial(study_id, ok_result(config, 2e-3))
        assert len(store.trials(study_id)) == 1

    @pytest.mark.parametrize("broken", ["untimed_ok", "unverified_ok", "nan_sample"])
    def test_inconsistent_results_are_refused(self, store: ResultStore, broken: str) -> None:
        # (A result's hash is its config's; a posted hash is checked by the submission, below.)
        study_id = tune(store, prefill(512), [])
        good = ok_result(launcher_config(), 1e-3)
        assert good.timing is not None and good.correctness is not None
        bad = {
            "untimed_ok": replace(good, timing=None),
            "unverified_ok": replace(good, correctness=None),
            "nan_sample": replace(good, timing=TimingStats((math.nan, 1.0), 1, 2, 1, 0.0)),
        }[broken]
        version = store.data_version()
        with pytest.raises(StoreError, match="inconsistent trial result"):
            store.record_trial(study_id, bad)
        assert store.trials(study_id) == [] and store.data_version() == version

    def test_failed_trials_keep_their_error_and_are_never_best(self, store: ResultStore) -> None:
        bad = launcher_config(stages=3)
        study_id = tune(store, prefill(512), [
            failed_result(bad, TrialStatus.COMPILE_ERROR, "error: no member named 'x'")])
        [row] = store.trials(study_id)
        assert row.status is TrialStatus.COMPILE_ERROR and row.measurement is None
        assert row.error == "error: no member named 'x'" and row.objective == math.inf
        assert store.best(BestQuery(head_dim=128, dtype="fp16", seq=512)) is None
        assert store.best_per_problem() == []

    # -- best ------------------------------------------------------------------------------

    def test_best_is_the_fastest_ok_trial_with_speedup_over_default(
            self, store: ResultStore) -> None:
        default, fast, faster = launcher_config(), launcher_config(128), launcher_config(128, 32)
        tune(store, prefill(1024), [
            ok_result(default, 4e-3), ok_result(fast, 2e-3),
            failed_result(faster, TrialStatus.WRONG_RESULT, "max error 3.2")])
        best = store.best(BestQuery(head_dim=128, dtype="fp16", seq=1024))
        assert best is not None and best.match == "exact" and best.problem == prefill(1024)
        assert best.config_hash == fast.config_hash() and best.launcher_config() == fast
        assert best.median_s == pytest.approx(2e-3)
        assert best.default_median_s == pytest.approx(4e-3)
        assert best.speedup == pytest.approx(2.0) and best.device == DEVICE.name

    def test_best_falls_back_to_the_nearest_seq_on_a_log_scale(self, store: ResultStore) -> None:
        configs = {seq: launcher_config(bq) for seq, bq in ((512, 32), (2048, 64), (4096, 128))}
        for seq, config in configs.items():
            tune(store, prefill(seq), [ok_result(config, 1e-3)])
        tune(store, prefill(3000, causal=True), [ok_result(launcher_config(16), 1e-3)])
        tune(store, prefill(3000, head_dim=64), [ok_result(launcher_config(16, head_dim=64),
                                                           1e-3)])

        def ask(seq: int) -> tuple[str, int, str]:
            best = store.best(BestQuery(head_dim=128, dtype="fp16", seq=seq))
            assert best is not None
            return best.match, best.problem.kv_len, best.config_hash

        assert ask(3000) == ("nearest", 4096, configs[4096].config_hash())  # 1.37x < 1.46x
        assert ask(1024) == ("nearest", 512, configs[512].config_hash())  # 2x tie: smaller
        assert ask(100000) == ("nearest", 4096, configs[4096].config_hash())
        assert ask(2048) == ("exact", 2048, configs[2048].config_hash())
        assert store.best(BestQuery(head_dim=128, dtype="bf16", seq=512)) is None
        assert store.best(BestQuery(head_dim=128, dtype="fp16", seq=512, mode="decode")) is None

    def test_best_prefers_matching_heads_and_flags_differences(self, store: ResultStore) -> None:
        mha, gqa = launcher_config(32), launcher_config(64)
        tune(store, prefill(1024), [ok_result(mha, 1e-3)])
        tune(store, prefill(1024, heads_q=32, heads_kv=8), [ok_result(gqa, 1e-3)])
        query = BestQuery(head_dim=128, dtype="fp16", seq=1024, heads_q=32, heads_kv=8)
        assert store.best(query).config_hash == gqa.config_hash()
        any_heads = store.best(BestQuery(head_dim=128, dtype="fp16", seq=1024))
        assert any_heads is not None and any_heads.match == "exact"
        assert any_heads.problem.heads_q == 8  # ties go to the smaller problem
        other = store.best(BestQuery(head_dim=128, dtype="fp16", seq=1024, heads_q=16,
                                     heads_kv=16))
        assert other is not None and other.match == "nearest"

    def test_best_serves_the_newest_kernel_source(self, store: ResultStore) -> None:
        old, new = launcher_config(32), launcher_config(64)
        tune(store, prefill(512), [ok_result(old, 1e-4)], source_hash="old")
        tune(store, prefill(512), [ok_result(new, 9e-4)], source_hash="new")
        best = store.best(BestQuery(head_dim=128, dtype="fp16", seq=512))
        assert best is not None and best.source_hash == "new"
        assert best.config_hash == new.config_hash()

    def test_best_needs_a_device_when_several_have_results(self, store: ResultStore) -> None:
        other = DEVICE.model_copy(update={"name": "Intel(R) Arc(TM) 140V GPU"})
        tune(store, prefill(512), [ok_result(launcher_config(32), 1e-3)])
        tune(store, prefill(512), [ok_result(launcher_config(64), 1e-3)], device=other)
        query = BestQuery(head_dim=128, dtype="fp16", seq=512)
        with pytest.raises(StoreError, match="several devices"):
            store.best(query)
        best = store.best(query.model_copy(update={"device": "intel(r) arc(tm) 140v gpu"}))
        assert best is not None and best.config_hash == launcher_config(64).config_hash()
        with pytest.raises(StoreError, match="no device 'B770'"):
            store.best(query.model_copy(update={"device": "B770"}))
        assert len(store.best_per_problem()) == 2
        assert len(store.best_per_problem(device=DEVICE.name)) == 1

    def test_best_per_problem_lists_every_tuned_problem_in_order(
            self, store: ResultStore) -> None:
        for seq in (2048, 512):
            tune(store, prefill(seq), [ok_result(launcher_config(), 2e-3),
                                       ok_result(launcher_config(128), 1e-3)])
        tune(store, prefill(512, causal=True), [ok_result(launcher_config(), 1e-3)],
             default_first=False)
        listing = store.best_per_problem()
        assert [(b.problem.causal, b.problem.kv_len) for b in listing] == [
            (False, 512), (False, 2048), (True, 512)]
        assert [b.speedup for b in listing] == [pytest.approx(2.0), pytest.approx(2.0), None]
        assert all(b.match == "exact" and b.query is None for b in listing)

    def test_best_per_problem_since_brings_what_changed_and_nothing_else(
            self, store: ResultStore) -> None:
        def every_best() -> dict:
            return {(b.device_id, b.problem): b for b in store.best_per_problem()}

        empty = store.best_per_problem_since(-1)
        assert empty.bests == () and empty.version == store.data_version()
        short = tune(store, prefill(512), [ok_result(launcher_config(), 2e-3)])
        tune(store, prefill(1024), [ok_result(launcher_config(), 2e-3)])
        first = store.best_per_problem_since(empty.version)
        assert [b.problem.kv_len for b in first.bests] == [512, 1024]
        held = {(b.device_id, b.problem): b for b in first.bests}
        assert held == every_best()

        def changed(since: BestsSince) -> BestsSince:
            update = store.best_per_problem_since(since.version)
            held.update(((b.device_id, b.problem), b) for b in update.bests)
            assert held == every_best()
            return update

        faster = launcher_config(128)
        store.record_trial(short, ok_result(faster, 1e-3), number=1)
        one = changed(first)
        assert [(b.problem.kv_len, b.config_hash) for b in one.bests] == [
            (512, faster.config_hash())]
        store.upsert_device(DEVICE.model_copy(update={"peak_bandwidth": 500e9}))
        store.record_trial(short, failed_result(launcher_config(256), TrialStatus.TIMEOUT, "t"),
                           number=2)
        quiet = changed(one)  # a failed trial changes no best, but its study is read again
        assert [b.problem.kv_len for b in quiet.bests] == [512]
        unmoved = changed(quiet)
        assert unmoved.bests == () and unmoved.version == quiet.version
        newer = tune(store, prefill(1024), [ok_result(launcher_config(64), 5e-3)],
                     source_hash="src-2")  # a newer kernel source: served, although slower
        replaced = changed(unmoved)
        assert [(b.problem.kv_len, b.source_hash) for b in replaced.bests] == [(1024, "src-2")]
        trial = store.trials(newer)[0]
        store.record_confirmation(ConfirmationRecord(study_id=newer, rounds=3, entries=(
            ConfirmationEntry(trial_id=trial.id, config_hash=trial.config_hash,
                              role="default", status=TrialStatus.OK, median_s=4e-3),)))
        confirmed = changed(replaced)
        assert [(b.problem.kv_len, b.confirmed_rounds) for b in confirmed.bests] == [(1024, 3)]
        assert list(store.best_per_problem_since(-1).bests) == store.best_per_problem()

    # -- listings, submissions, change counter -----------------------------------------------

    def test_results_are_newest_first_filtered_and_paged(self, store: ResultStore) -> None:
        tune(store, prefill(512), [ok_result(launcher_config(), 1e-3),
                                   failed_result(launcher_config(32), TrialStatus.TIMEOUT, "t")])
        tune(store, prefill(4096, causal=True), [ok_result(launcher_config(), 2e-3)])
        rows = store.results()
        assert [r.trial_id for r in rows] == sorted((r.trial_id for r in rows), reverse=True)
        assert len(rows) == store.count_results() == 3
        assert rows[0].problem.kv_len == 4096 and rows[0].measurement is not None
        assert rows[0].measurement.samples is None  # listings leave the raw samples out
        ok = ResultFilters(status=TrialStatus.OK)
        assert store.count_results(ok) == 2
        assert [r.problem.kv_len for r in store.results(ResultFilters(seq_max=1024))] == [512,
                                                                                         512]
        assert store.count_results(ResultFilters(causal=True, mode="prefill")) == 1
        assert [r.trial_id for r in store.results(limit=2, offset=1)] == [r.trial_id
                                                                          for r in rows[1:]]
        with pytest.raises(StoreError, match="limit"):
            store.results(limit=0)

    def test_results_frame_has_one_flat_row_per_trial(self, store: ResultStore) -> None:
        tune(store, prefill(512), [ok_result(launcher_config(), 1e-3),
                                   failed_result(launcher_config(32), TrialStatus.TIMEOUT, "t")])
        frame = store.results_frame()
        assert len(frame) == 2
        assert {"median_s", "tflops", "gbps", "roofline_fraction", "iterations", "shape_qk",
                "stages", "status", "kv_len", "max_abs_error"} <= set(frame.columns)
        assert list(frame["status"]) == ["timeout", "ok"]
        assert frame["shape_qk"].iloc[1] == "64x64x32"
        assert frame["tflops"].iloc[1] == pytest.approx(1e9 / 1e-3 / 1e12)
        assert store.results_frame(ResultFilters(head_dim=64)).empty

    def test_submit_result_is_idempotent(self, store: ResultStore) -> None:
        payload = submission(launcher_config(), 1e-3, prefill(512))
        first = store.submit_result(payload)
        again = store.submit_result(payload)
        assert first.created and not again.created
        assert (again.trial_id, again.study_id) == (first.trial_id, first.study_id)
        [row] = store.results()
        assert row.origin == "remote" and row.trial_id == first.trial_id
        best = store.best(BestQuery(head_dim=128, dtype="fp16", seq=512))
        assert best is not None and best.trial_id == first.trial_id

    def test_a_submitted_trial_is_stored_as_the_tuner_stores_it(self, store: ResultStore) -> None:
        result = replace(ok_result(launcher_config(), 1e-3), extra={"plan": "split-kv"})
        local = tune(store, prefill(512), [result])
        body = ResultSubmission.from_result(
            result, device=DEVICE, family="sdpa_prefill", source_hash="src-2",
            problem=prefill(512)).model_dump_json()
        arrived = ResultSubmission.model_validate_json(body)
        assert arrived.trial_result() == result
        remote = store.submit_result(arrived)
        [mine], [theirs] = store.trials(local), store.trials(remote.study_id)
        same = {"config", "config_hash", "family", "status", "build_s", "verify_s", "bench_s",
                "error", "measurement", "extra"}
        assert theirs.model_dump(include=same) == mine.model_dump(include=same)
        assert (mine.origin, theirs.origin) == ("local", "remote")
        with pytest.raises(ValidationError, match="config_hash 'deadbeef' does not match"):
            ResultSubmission.model_validate({**json.loads(body), "config_hash": "deadbeef"})

    def test_data_version_moves_on_every_write_and_only_then(self, store: ResultStore) -> None:
        start = store.data_version()
        device_id = store.upsert_device(DEVICE)
        after_device = store.data_version()
        assert after_device > start
        store.upsert_device(DEVICE)
        store.best_per_problem()
        store.results()
        assert store.data_version() == after_device
        store.save_ceilings(device_id, MeasuredCeilings(flops={"fp32": 1.0}, bandwidth=1.0))
        assert store.data_version() > after_device
        before = store.data_version()
        tune(store, prefill(512), [ok_result(launcher_config(), 1e-3)])
        assert store.data_version() > before

    def test_studies_report_counts_and_best(self, store: ResultStore) -> None:
        study_id = tune(store, prefill(512), [
            ok_result(launcher_config(), 2e-3), ok_result(launcher_config(128), 1e-3),
            failed_result(launcher_config(32), TrialStatus.LAUNCH_ERROR, "wg too large")])
        [study] = store.studies()
        assert study.id == study_id and (study.n_trials, study.n_ok) == (3, 2)
        assert study.best_median_s == pytest.approx(1e-3) and study.family == "sdpa_prefill"
        assert store.study(study_id) == study and store.study(study_id + 1) is None
        assert [t.number for t in store.trials(study_id)] == [0, 1, 2]

    # -- families and seeded baselines -------------------------------------------------------

    def test_trials_carry_their_own_family_and_baseline_label(self, store: ResultStore) -> None:
        cpu, xmx = launcher_config(), launcher_config(family="sdpa_xmx_prefill")
        assert cpu.config_hash() != xmx.config_hash()  # same shapes, two kernels
        study_id = tune(store, prefill(512), [ok_result(xmx, 2e-3), ok_result(cpu, 1e-3)],
                        family="sdpa_prefill+sdpa_xmx_prefill",
                        baselines={0: "seed 000 SageV1"})
        [first, second] = store.trials(study_id)
        assert (first.family, first.baseline) == ("sdpa_xmx_prefill", "seed 000 SageV1")
        assert (second.family, second.baseline) == ("sdpa_prefill", None)
        assert first.config.family == "sdpa_xmx_prefill"
        found = store.find_trial(study_id, xmx.config_hash())
        assert found is not None and found.baseline == "seed 000 SageV1"
        [row] = store.results(ResultFilters(family="sdpa_xmx_prefill"))
        assert (row.trial_id, row.family, row.baseline) == (first.id, "sdpa_xmx_prefill",
                                                            "seed 000 SageV1")
        frame = store.results_frame()
        assert list(frame["family"]) == ["sdpa_prefill", "sdpa_xmx_prefill"]
        assert list(frame["baseline"].fillna("-")) == ["-", "seed 000 SageV1"]
        assert store.count_results(ResultFilters(family="sdpa_decode")) == 0

    def test_best_shows_every_baseline_of_the_problem_beside_it(self, store: ResultStore) -> None:
        tuned = launcher_config(128, family="sdpa_xmx_prefill")
        sage = launcher_config(256, family="sdpa_xmx_prefill")
        onednn = launcher_config(32, family="sdpa_xmx_prefill")
        tune(store, prefill(1024), [
            ok_result(sage, 3e-3),
            failed_result(onednn, TrialStatus.COMPILE_ERROR, "out of registers"),
            ok_result(launcher_config(), 4e-3), ok_result(tuned, 1e-3)],
            baselines={0: "seed 000 SageV1", 1: "oneDNN default"}, default_first=False)
        best = store.best(BestQuery(head_dim=128, dtype="fp16", seq=1024))
        assert best is not None and best.config_hash == tuned.config_hash()
        assert (best.family, best.baseline) == ("sdpa_xmx_prefill", None)
        assert [(b.label, b.family, b.status, b.config_hash) for b in best.baselines] == [
            ("oneDNN default", "sdpa_xmx_prefill", TrialStatus.COMPILE_ERROR,
             onednn.config_hash()),
            ("seed 000 SageV1", "sdpa_xmx_prefill", TrialStatus.OK, sage.config_hash())]
        failed, seed = best.baselines
        assert failed.median_s is None and failed.speedup is None
        assert seed.median_s == pytest.approx(3e-3) and seed.speedup == pytest.approx(3.0)
        assert seed.config == sage
        [listed] = store.best_per_problem()
        assert listed.baselines == best.baselines

    def test_a_winning_baseline_is_named_as_the_best(self, store: ResultStore) -> None:
        sage = launcher_config(256, family="sdpa_xmx_prefill")
        tune(store, prefill(512), [ok_result(sage, 1e-3), ok_result(launcher_config(), 2e-3)],
             baselines={0: "seed 000 SageV1"})
        best = store.best(BestQuery(head_dim=128, dtype="fp16", seq=512))
        assert best is not None and best.baseline == "seed 000 SageV1"
        assert [(b.label, b.speedup) for b in best.baselines] == [("seed 000 SageV1", 1.0)]
        no_baselines = tune(store, prefill(2048), [ok_result(launcher_config(), 1e-3)])
        other = store.best(BestQuery(head_dim=128, dtype="fp16", seq=2048))
        assert other is not None and other.study_id == no_baselines
        assert other.baseline is None and other.baselines == ()

    @pytest.mark.parametrize("label", ["", "x" * 65])
    def test_baseline_labels_are_bounded(self, store: ResultStore, label: str) -> None:
        study_id = tune(store, prefill(512), [])
        with pytest.raises(StoreError, match="baseline label must be 1 to 64 characters"):
            store.record_trial(study_id, ok_result(launcher_config(), 1e-3), baseline=label)
        assert store.trials(study_id) == []

    def test_submitted_baselines_are_stored_with_their_label(self, store: ResultStore) -> None:
        payload = submission(launcher_config(family="sdpa_xmx_prefill"), 1e-3, prefill(512))
        store.submit_result(payload.model_copy(update={"baseline": "SYCL*TLA example"}))
        [row] = store.results()
        assert (row.family, row.baseline) == ("sdpa_xmx_prefill", "SYCL*TLA example")

    # -- batch writes and streamed reads -----------------------------------------------------

    def test_record_trials_stores_the_rows_record_trial_stores(self, store: ResultStore) -> None:
        results = [replace(ok_result(launcher_config(), 2e-3), extra={"plan": "split-kv"}),
                   ok_result(launcher_config(256, family="sdpa_xmx_prefill"), 1e-3),
                   failed_result(launcher_config(32), TrialStatus.COMPILE_ERROR, "boom"),
                   replace(ok_result(launcher_config(128), 3e-3), timing=None,
                           status=TrialStatus.WRONG_RESULT)]
        entries = [TrialEntry(r, number=i, is_default=i == 0,
                              baseline="seed 000 SageV1" if i == 1 else None)
                   for i, r in enumerate(results)]
        one_by_one = tune(store, prefill(512), results, baselines={1: "seed 000 SageV1"})
        batched = tune(store, prefill(1024), [])
        version = store.data_version()
        ids = store.record_trials(batched, entries)
        assert store.data_version() == version + 1  # one transaction
        assert ids == [t.id for t in store.trials(batched)]

        def stored(study_id: int) -> list[dict[str, object]]:
            return [t.model_dump(exclude={"id", "study_id", "created_at"})
                    for t in store.trials(study_id)]

        assert stored(batched) == stored(one_by_one) and len(stored(batched)) == 4
        frame = store.results_frame().drop(columns=["trial_id", "created_at", "problem_id",
                                                    "kv_len", "q_len", "study_id"],
                                           errors="ignore")
        assert frame.iloc[:4].reset_index(drop=True).equals(frame.iloc[4:].reset_index(drop=True))

    def test_record_trials_is_all_or_nothing(self, store: ResultStore) -> None:
        good = ok_result(launcher_config(), 1e-3)
        study_id = tune(store, prefill(512), [good])
        fresh = [TrialEntry(ok_result(launcher_config(bq), 1e-3)) for bq in (32, 128)]
        version = store.data_version()
        untimed = TrialEntry(replace(ok_result(launcher_config(256), 1e-3), timing=None))
        for entries, message in (
            ([fresh[0], untimed], r"inconsistent trial result \(entry 1 of 2\)"),
            ([fresh[0], TrialEntry(good)], "already stored"),
            ([fresh[0], fresh[1], fresh[0]], "appears twice in one batch"),
            ([fresh[0], TrialEntry(fresh[1].result, baseline="x" * 65)], "baseline label"),
        ):
            with pytest.raises(StoreError, match=message):
                store.record_trials(study_id, entries)
            assert len(store.trials(study_id)) == 1 and store.data_version() == version
        with pytest.raises(StoreError, match="unknown study id"):
            store.record_trials(study_id + 1000, fresh)
        assert len(store.record_trials(study_id, fresh)) == 2

    def test_results_frames_stream_the_results_frame(self, store: ResultStore) -> None:
        [chunk] = store.results_frames()
        assert chunk.empty and list(chunk.columns) == list(store.results_frame().columns)
        tune(store, prefill(512), [ok_result(launcher_config(), 1e-3),
                                   failed_result(launcher_config(32), TrialStatus.TIMEOUT, "t"),
                                   ok_result(launcher_config(128), 2e-3)],
             baselines={2: "oneDNN default"})
        tune(store, prefill(4096, causal=True), [ok_result(launcher_config(), 2e-3),
                                                 ok_result(launcher_config(256), 3e-3)])

        def csv(frames: list[pandas.DataFrame]) -> str:
            return "".join(results_csv(f, header=i == 0) for i, f in enumerate(frames))

        whole = store.results_frame()
        chunks = list(store.results_frames(chunk_rows=2))
        assert [len(c) for c in chunks] == [2, 2, 1]
        assert csv(chunks) == csv([whole])
        assert ",3,5,2," in csv(chunks)  # warmup, iterations, n_buf: integers, not 3.0
        newest = list(store.results_frames(limit=3, chunk_rows=2))
        assert csv(newest) == csv([whole.head(3)])
        failed = ResultFilters(status=TrialStatus.TIMEOUT)
        assert csv(list(store.results_frames(failed))) == csv([store.results_frame(failed)])
