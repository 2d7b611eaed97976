"""Replay backend and ``xe2tune replay``: Kernel Tuner caches (plain, gzipped) and T4 files."""

from __future__ import annotations

import gzip
import json
import math
import subprocess

import numpy as np
import pytest
from _spaces import EXAMPLES, SYNTHETIC_PARAMS, example, synthetic_time, write_cache

from xe2tune.tuner import NotARecordingError, load_recording, replay


@pytest.mark.parametrize("stem", sorted(EXAMPLES))
def test_loads_example_space_plain_and_gzipped_with_failed_configs_mapped(stem, tmp_path):
    gz = example(stem)
    plain = tmp_path / f"{stem}.json"
    plain.write_bytes(gzip.decompress(gz.read_bytes()))
    entries, failed = EXAMPLES[stem]
    cache = json.loads(plain.read_text())["cache"]
    a, b = load_recording(gz), load_recording(plain)
    assert len(a.space) == len(b.space) == entries
    assert int(a.failed.sum()) == failed
    assert a.space.configs == b.space.configs
    np.testing.assert_array_equal(a.times, b.times)
    for config, mean in zip(a.space.configs, a.times, strict=True):
        entry = cache[",".join(str(v) for v in config)]
        if isinstance(entry["time"], str):
            assert math.isnan(mean)
        else:
            assert mean == entry["time"]


def test_exhaustive_replay_finds_the_recorded_optimum(tmp_path):
    path = write_cache(tmp_path / "s.json", SYNTHETIC_PARAMS, synthetic_time, gz=True)
    rec = load_recording(path)
    run = replay(rec, "grid", budget=len(rec.space), seed=0)
    assert sorted(run.indices.tolist()) == list(range(len(rec.space)))
    assert run.best_so_far(rec.optimum)[-1] == rec.optimum
    assert rec.space.config(int(np.nanargmin(rec.times))) == {"x": 7, "y": 3, "z": 4}


@pytest.mark.slow
@pytest.mark.parametrize("stem", sorted(EXAMPLES))
def test_exhaustive_replay_of_example_space_finds_its_optimum(stem):
    rec = load_recording(example(stem))
    run = replay(rec, "grid", budget=len(rec.space), seed=0)
    assert np.nanmin(run.means) == rec.optimum


def test_failed_configs_are_told_as_failed_and_noise_draws_recorded_samples(tmp_path):
    path = write_cache(tmp_path / "s.json", SYNTHETIC_PARAMS, synthetic_time)
    rec = load_recording(path)
    failed = {i for i, c in enumerate(rec.space.configs) if c[0] == 0 and c[2] == 8}
    assert set(np.flatnonzero(rec.failed).tolist()) == failed
    rng = np.random.default_rng(3)
    i = next(i for i in range(len(rec.space)) if i not in failed)
    drawn = {rec.answer(i, rng) for _ in range(50)}
    assert drawn <= set(rec.samples[i]) and len(drawn) > 1
    assert rec.answer(next(iter(failed)), rng) is None
    a = replay(rec, "random", budget=40, seed=5, noise=True)
    b = replay(rec, "random", budget=40, seed=5, noise=True)
    np.testing.assert_array_equal(a.indices, b.indices)
    np.testing.assert_array_equal(a.means, rec.times[a.indices])


def test_t4_file_gives_the_same_space_as_the_cache(tmp_path):
    cache_path = write_cache(tmp_path / "s.json", SYNTHETIC_PARAMS, synthetic_time)
    cache = json.loads(cache_path.read_text())["cache"]
    results = []
    for entry in cache.values():
        ok = not isinstance(entry["time"], str)
        results.append(
            {
                "configuration": {k: entry[k] for k in SYNTHETIC_PARAMS},
                "times": {"runtimes": entry.get("times", [])},
                "invalidity": "correct" if ok else "runtime",
                "correctness": 1,
                "measurements": [{"name": "time", "value": entry["time"], "unit": "ms"}],
            }
        )
    results.append(
        {
            "configuration": {"x": 0, "y": 6, "z": 1},
            "times": {},
            "invalidity": "constraints",
            "correctness": 1,
            "measurements": [],
        }
    )
    t4 = tmp_path / "t4.json"
    t4.write_text(json.dumps({"schema_version": "1.0.0", "results": results}))
    a, b = load_recording(cache_path), load_recording(t4)
    assert a.space.configs == b.space.configs
    np.testing.assert_array_equal(a.times, b.times)
    assert b.samples == a.samples


@pytest.mark.parametrize("content", [b"not json", b"[1, 2]", b'{"cache": {}}'])
def test_not_a_recording_is_rejected(tmp_path, content):
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    with pytest.raises(NotARecordingError):
        load_recording(path)
    with pytest.raises(NotARecordingError, match="cannot read"):
        load_recording(tmp_path / "missing.json")


def xe2tune_replay(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["xe2tune", "replay", *args], capture_output=True, text=True, timeout=120)


def test_cli_replay_reports_scores_and_trials_to_fractions(tmp_path):
    path = write_cache(tmp_path / "s.json.gz", SYNTHETIC_PARAMS, synthetic_time, gz=True)
    done = xe2tune_replay(
        "--space", str(path), "--sampler", "random", "--budget", "30", "--seeds", "2", "--json"
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["configs"] == len(load_recording(path).space)
    assert [r["seed"] for r in report["runs"]] == [0, 1]
    assert report["budget_points"][-1] == 30
    assert set(report["runs"][0]["trials_to"]) == {"0.90", "0.95", "0.99"}
    assert report["optimum"] <= min(r["best_time"] for r in report["runs"])
    agg = report["aggregate"]
    assert -1.5 < agg["methodology_score"] < 1.0 and agg["methodology_error"] >= 0
    assert agg["trial_count_error"] >= 0
    assert agg["trial_count_score"] == pytest.approx(
        np.mean([r["trial_count_score"] for r in report["runs"]]))
    start, end = report["methodology_seconds"]
    # each run goes on until the methodology's run time (1.1x the range's end) is spent
    assert all(r["simulated_seconds"] >= 1.1 * end * 0.999 for r in report["runs"])


def test_cli_replay_prints_both_scores_and_says_why_a_time_score_is_missing(tmp_path):
    timed = write_cache(tmp_path / "timed.json", SYNTHETIC_PARAMS, synthetic_time)
    done = xe2tune_replay("--space", str(timed), "--sampler", "tpe", "--seeds", "2")
    assert done.returncode == 0, done.stderr
    assert "methodology score (simulated tuning time" in done.stdout
    assert "trial-count score:" in done.stdout
    bare = write_cache(tmp_path / "bare.json", SYNTHETIC_PARAMS, synthetic_time, costs=False)
    done = xe2tune_replay("--space", str(bare), "--sampler", "tpe", "--seeds", "2", "--json")
    assert done.returncode == 0, done.stderr
    agg = json.loads(done.stdout)["aggregate"]
    assert agg["methodology_score"] is None and "no compile, run or framework" in (
        agg["methodology_note"])
    assert agg["trial_count_score"] is not None


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--space", "{tmp}/missing.json"], "cannot read"),
        (["--space", "{tmp}/notcache.json"], "neither a Kernel Tuner cache"),
        (["--space", "{tmp}/s.json", "--budget", "100000"], "larger than the space"),
        (["--space", "{tmp}/s.json", "--sampler", "nope"], "unknown sampler"),
    ],
)
def test_cli_replay_bad_input_is_one_line_and_exit_2(tmp_path, args, message):
    write_cache(tmp_path / "s.json", SYNTHETIC_PARAMS, synthetic_time)
    (tmp_path / "notcache.json").write_text('{"device_name": "x"}')
    done = xe2tune_replay(*(a.format(tmp=tmp_path) for a in args))
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], done.stderr
