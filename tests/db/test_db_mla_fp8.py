"""Latent attention (Dv != D) and FP8 K/V problems in the results database, on SQLite and
PostgreSQL: stored and read back with their Dv and K/V dtype, never answered across them by
``best`` (exact or nearest), in the JSON and C++ exports alike; databases from before the
columns existed upgrade with their rows and answer their queries as before."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from _cpp_dispatch import dispatch, expected_line
from _mla_fp8_store import (
    CASES,
    FP8_DECODE,
    FP8_MLA_DECODE,
    MHA_192,
    MHA_DECODE,
    MLA_DECODE,
    MLA_PREFILL,
    TUNED,
    fill,
)
from alembic import command
from sqlalchemy import create_engine

from xe2tune.db import (
    BestQuery,
    ResultFilters,
    ResultStore,
    export_json,
    load_json,
    migrate_database,
    open_store,
    problem_group,
)
from xe2tune.db._migrate import alembic_config
from xe2tune.kernels import ProblemSpec
from xe2tune.testing import launcher_config, ok_result, prefill, tune


@pytest.fixture
def filled(backend_url: str) -> Iterator[tuple[ResultStore, dict[ProblemSpec, str]]]:
    store = open_store(backend_url)
    hashes = fill(store)
    yield store, hashes
    store.close()


def test_best_never_answers_across_dv_or_the_kv_dtype(filled) -> None:
    store, hashes = filled
    for query, expected in CASES:
        best = store.best(query)
        if expected is None:
            assert best is None, query
            continue
        assert best is not None, query
        assert best.problem == expected and best.config_hash == hashes[expected], query
        assert problem_group(best.problem) == query.group
        exact = (expected.kv_len == query.seq and query.heads_q in (None, expected.heads_q))
        assert best.match == ("exact" if exact else "nearest"), query


def test_problems_round_trip_with_dv_and_kv_dtype(filled) -> None:
    store, hashes = filled
    stored = {s.problem for s in store.studies()}
    assert stored == {problem for problem, _ in TUNED}
    bests = store.best_per_problem()
    assert {b.problem: b.config_hash for b in bests} == hashes
    assert load_json(export_json(bests)) == bests
    # Dv and kv_dtype are in the key only when not the default: old problems keep their key
    assert '"head_dim_v"' not in MHA_192.key() and '"head_dim_v":128' in MLA_PREFILL.key()
    mla = store.results(ResultFilters(head_dim=192, head_dim_v=128))
    assert {r.problem for r in mla} == {MLA_PREFILL, *MLA_DECODE, FP8_MLA_DECODE}
    fp8 = store.results(ResultFilters(kv_dtype="e4m3"))
    assert {r.problem for r in fp8} == {FP8_DECODE} and len(fp8) == 2
    frame = store.results_frame(ResultFilters(kv_dtype="e5m2"))
    assert set(frame["kv_dtype"]) == {"e5m2"} and set(frame["head_dim_v"]) == {128}
    assert {r.problem for r in store.results(ResultFilters(head_dim_v=128))} == {
        MLA_PREFILL, *MLA_DECODE, FP8_MLA_DECODE, MHA_DECODE, FP8_DECODE}
    everything = store.results_frame()
    mha_problems = 3  # MHA_192, MHA_DECODE and FP8_DECODE: two trials each
    assert (everything["head_dim_v"] == everything["head_dim"]).sum() == 2 * mha_problems


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")
def test_cpp_header_picks_the_entry_of_the_same_dv_and_kv_dtype(filled, tmp_path: Path) -> None:
    store, _ = filled
    queries = [query for query, _ in CASES]
    answers = [expected_line(store, q) for q in queries]
    assert dispatch(store.best_per_problem(), queries, tmp_path) == answers
    assert sum(line != "none" for line in answers) == sum(e is not None for _, e in CASES)


def _downgrade(url: str, revision: str) -> None:
    # a plain engine: SQLite's foreign keys off, as the migrations run (tables are copied)
    engine = create_engine(url)
    config = alembic_config()
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.downgrade(config, revision)
    engine.dispose()


def test_a_database_from_before_dv_upgrades_with_its_rows_and_answers(backend_url: str) -> None:
    """Rows stored under revision 0007 (no Dv, no kv_dtype columns) read back the same."""
    decode = ProblemSpec(mode="decode", head_dim=64, dtype="fp16", q_len=1, kv_len=2048)
    old = [(prefill(seq, causal=causal), 1e-3 * seq / 512) for seq in (512, 2048)
           for causal in (False, True)] + [(decode, 1e-5)]
    queries = [BestQuery(head_dim=128, dtype="fp16", seq=seq, causal=causal)
               for seq in (512, 1000, 2048, 9000) for causal in (False, True)]
    queries.append(BestQuery(head_dim=64, dtype="fp16", seq=100, mode="decode"))
    store = open_store(backend_url)
    for index, (problem, median) in enumerate(old):
        tune(store, problem, [ok_result(launcher_config(8), median * 2),
                              ok_result(launcher_config(16 * (index + 1)), median)])
    before = [store.best(q) for q in queries]
    rows_before = store.results()
    store.close()

    _downgrade(backend_url, "0007")
    migrate_database(backend_url)
    store = open_store(backend_url)
    try:
        assert [store.best(q) for q in queries] == before
        assert store.results() == rows_before
        assert all(r.problem.head_dim_v == r.problem.head_dim and r.problem.kv_dtype is None
                   for r in rows_before)
        # new problems beside the old ones: the old queries still answer the same
        fill(store)
        assert [store.best(q) for q in queries] == before
    finally:
        store.close()
