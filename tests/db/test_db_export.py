"""Exports: JSON round-trips; the C++ header compiles with g++ and its dispatch function returns
the same config as ResultStore.best for every query, exact, nearest or ambiguous."""

from __future__ import annotations

import itertools
import json
import shutil
import subprocess
from pathlib import Path

import pytest
from _cpp_dispatch import dispatch, expected_line

from xe2tune.db import BestQuery, ResultStore, export_cpp, export_json, load_json, open_store
from xe2tune.db._cpp import c_string
from xe2tune.kernels import ProblemSpec
from xe2tune.testing import DEVICE, launcher_config, ok_result, prefill, tune

OTHER_DEVICE = DEVICE.model_copy(update={"name": "Intel(R) Arc(TM) 140V GPU \"LNL\""})


@pytest.fixture
def store(tmp_path: Path) -> ResultStore:
    store = open_store(f"sqlite:///{tmp_path / 'xe2tune.db'}")
    bq = itertools.count(1)
    for seq, causal, dtype in itertools.product((512, 2048, 8192), (False, True),
                                                ("fp16", "bf16")):
        tune(store, prefill(seq, causal=causal, dtype=dtype), [
            ok_result(launcher_config(), 3e-3),
            ok_result(launcher_config(16 * (next(bq) % 8 + 1), stages=3, unroll=4,
                                      variant="split", dpas=True), 1e-3)])
    for kv_len in (1024, 32768):
        decode = ProblemSpec(mode="decode", head_dim=128, dtype="fp16", q_len=1, kv_len=kv_len,
                             heads_q=32, heads_kv=8)
        tune(store, decode, [ok_result(launcher_config(16, 64, family="sdpa_decode"), 1e-4)],
             family="sdpa_decode")
    tune(store, prefill(1024, heads_q=32, heads_kv=8), [ok_result(launcher_config(32), 1e-3)])
    tune(store, prefill(1024, head_dim=64), [ok_result(launcher_config(64, head_dim=64), 1e-3)],
         device=OTHER_DEVICE)
    tune(store, prefill(512, head_dim=64), [ok_result(launcher_config(128, head_dim=64), 1e-3)])
    tune(store, prefill(1024, heads_q=16, heads_kv=16), [
        ok_result(launcher_config(256, family="sdpa_xmx_prefill", grf=256), 2e-3),
        ok_result(launcher_config(64), 3e-3),
        ok_result(launcher_config(128, family="sdpa_xmx_prefill", grf=128), 1e-3)],
        family="sdpa_prefill+sdpa_xmx_prefill", baselines={0: "seed 000 SageV1"})
    yield store
    store.close()


QUERIES = [
    BestQuery(head_dim=128, dtype="fp16", seq=seq, causal=causal, heads_q=heads_q,
              heads_kv=heads_kv)
    for seq in (1, 512, 700, 1024, 1500, 2048, 4096, 5000, 8192, 100000)
    for causal in (False, True)
    for heads_q, heads_kv in ((None, None), (32, 8), (8, 8), (16, 16))
] + [
    BestQuery(head_dim=128, dtype="bf16", seq=3000, batch=2),
    BestQuery(head_dim=128, dtype="bf16", seq=3000, q_len=1000),
    BestQuery(head_dim=128, dtype="fp32", seq=512),
    BestQuery(head_dim=128, dtype="fp16", seq=1, mode="decode"),
    BestQuery(head_dim=128, dtype="fp16", seq=8000, mode="decode", heads_q=32, heads_kv=8),
    BestQuery(head_dim=128, dtype="fp16", seq=6000, mode="decode", q_len=4),
    BestQuery(head_dim=64, dtype="fp16", seq=512),
    BestQuery(head_dim=64, dtype="fp16", seq=512, device=OTHER_DEVICE.name.upper()),
    BestQuery(head_dim=64, dtype="fp16", seq=512, device=DEVICE.name),
]


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")
def test_cpp_header_compiles_and_dispatches_like_best(store: ResultStore,
                                                      tmp_path: Path) -> None:
    answers = [expected_line(store, q) for q in QUERIES]
    assert dispatch(store.best_per_problem(), QUERIES, tmp_path) == answers
    assert {line.split()[0] for line in answers} == {"exact", "nearest", "none",
                                                     "ambiguous_device"}
    assert {line.split()[4] for line in answers if line.startswith(("exact", "nearest"))} == {
        "sdpa_prefill", "sdpa_decode", "sdpa_xmx_prefill"}


def test_cpp_header_names_each_entrys_family_for_the_launcher_to_switch_on(
        store: ResultStore) -> None:
    best = store.best_per_problem()
    header = export_cpp(best)
    enum = next(line for line in header.splitlines() if line.startswith("enum class Family"))
    assert "sdpa_decode = 0" in enum and "sdpa_xmx_prefill" in enum
    assert "sdpa_prefill" in enum  # registered families are listed even when untuned
    xmx = next(b for b in best if b.family == "sdpa_xmx_prefill")
    assert xmx.baseline is None and [b.label for b in xmx.baselines] == ["seed 000 SageV1"]
    entry = next(line for line in header.splitlines() if xmx.config_hash in line)
    assert entry.lstrip().startswith("{Family::sdpa_xmx_prefill, ShapeQK{128, 64, 32}")
    assert '"sdpa_xmx_prefill", ' + c_string(xmx.config_hash) in entry
    odd = xmx.model_copy(update={"family": "vendor-x"})
    assert "family_" in export_cpp([odd]) and '"vendor-x"' in export_cpp([odd])


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")
def test_cpp_header_of_nothing_still_compiles(tmp_path: Path) -> None:
    (tmp_path / "empty.hpp").write_text(export_cpp([]))
    (tmp_path / "main.cpp").write_text(
        '#include "empty.hpp"\nint main() { xe2tune::tuned::Query q{xe2tune::tuned::Mode::'
        'prefill, 128, xe2tune::tuned::DType::fp16, false, 512};\n'
        'return xe2tune::tuned::select_config(q) == nullptr ? 0 : 1; }\n')
    subprocess.run(["g++", "-std=c++17", "-Wall", "-Wextra", "-Werror", "-o",
                    str(tmp_path / "empty"), str(tmp_path / "main.cpp")], check=True)
    subprocess.run([str(tmp_path / "empty")], check=True)


def test_cpp_header_speaks_the_launcher_vocabulary(store: ResultStore) -> None:
    header = export_cpp(store.best_per_problem())
    for word in ("ShapeQK{", "ShapePV{", "ShapeOut{", "SubgroupLayout{", "PipelineStages{",
                 "VTiles{", '"variant", "split"', '"dpas", "true", 1LL', '"unroll", "4", 4LL'):
        assert word in header


def test_json_export_round_trips(store: ResultStore) -> None:
    listing = store.best_per_problem()
    loaded = load_json(export_json(listing))
    assert loaded == listing
    assert all(result.launcher_config().config_hash() == result.config_hash
               for result in loaded)
    assert all(r.config.family == r.family for r in loaded)
    assert any(r.baselines for r in loaded)


def test_json_version_1_reads_with_the_family_and_the_new_hash(store: ResultStore) -> None:
    document = json.loads(export_json(store.best_per_problem()))
    for entry in document["configs"]:  # what version 1 wrote: no family in the config
        del entry["config"]["family"], entry["baselines"], entry["baseline"]
        entry["config_hash"] = "0123456789abcdef"
    document["version"] = 1
    loaded = load_json(json.dumps(document))
    assert [(r.config_hash, r.config) for r in loaded] == [
        (r.config_hash, r.config) for r in store.best_per_problem()]


@pytest.mark.parametrize(("text", "message"), [
    ("[]", "not an xe2tune-best-configs"),
    ('{"format": "xe2tune-best-configs", "version": 7, "configs": []}', "version 7"),
])
def test_json_import_rejects_other_documents(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        load_json(text)
