"""``best_among`` (what ``/v1/best`` answers from its in-memory snapshot) against
``ResultStore.best`` (the same rule through SQL), query by query, on a real SQLite database.

The database holds two devices, a third device row under device A's name (a driver update,
whose id is newer), several sequence lengths, causal and decode problems and a bf16 problem on
two devices, so the device rule, the nearest rule and the several-devices error are all met.
"""

from __future__ import annotations

import itertools

import pytest
from _api_fixtures import DEVICE_A, DEVICE_B, FAMILY, fill_database, launcher_config, ok_result

from xe2tune.db import BestQuery, best_among, open_store
from xe2tune.errors import StoreError
from xe2tune.kernels import ProblemSpec

UPDATED_A = DEVICE_A.model_copy(update={"driver": "test-2"})  # same name, a newer device row
UPDATED_A_PROBLEM = ProblemSpec("prefill", 128, "fp16", 2048, 2048)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory):
    filled = fill_database(str(tmp_path_factory.mktemp("among") / "among.db"))
    store = open_store(filled.url)
    source_id = store.upsert_kernel_source(FAMILY, "benchmark-synthetic")
    study = store.get_or_create_study(
        device_id=store.upsert_device(UPDATED_A), kernel_source_id=source_id,
        problem_id=store.upsert_problem(UPDATED_A_PROBLEM), sampler="tpe",
        optuna_study_name="test:updated-a")
    store.record_trial(study.id, ok_result(UPDATED_A_PROBLEM, launcher_config(128, 128, 64, 2, 8),
                                           0.5), number=0, is_default=True)
    try:
        yield store
    finally:
        store.close()


def _queries(store) -> list[BestQuery]:
    devices = [None, DEVICE_A.name, DEVICE_A.name.upper(), f" {DEVICE_B.name} "]
    devices += [str(d.id) for d in store.devices()]
    keys = [("prefill", 128, "fp16", False), ("prefill", 128, "fp16", True),
            ("decode", 128, "fp16", False), ("prefill", 64, "bf16", False),
            ("prefill", 96, "fp16", False)]
    queries = []
    for (mode, head_dim, dtype, causal), device, seq in itertools.product(
            keys, devices, (1, 300, 512, 700, 1024, 2048, 3000, 8192, 10**6)):
        queries.append(BestQuery(mode=mode, head_dim=head_dim, dtype=dtype, causal=causal,
                                 seq=seq, device=device))
    queries += [BestQuery(mode="decode", head_dim=128, dtype="fp16", seq=8192, q_len=1,
                          heads_q=32, heads_kv=8, batch=1, device=DEVICE_A.name),
                BestQuery(mode="decode", head_dim=128, dtype="fp16", seq=8192, heads_q=16,
                          device=DEVICE_A.name),
                BestQuery(head_dim=128, dtype="fp16", seq=1024, q_len=512, batch=4,
                          device=DEVICE_A.name)]
    return queries


def _answer(lookup):
    try:
        return lookup()
    except StoreError as exc:
        return f"StoreError: {exc}"


def test_best_among_answers_what_the_store_answers(store):
    tuned = store.best_per_problem()
    outcomes = set()
    for query in _queries(store):
        through_sql = _answer(lambda q=query: store.best(q))
        in_memory = _answer(lambda q=query: best_among(tuned, q))
        assert in_memory == through_sql, query
        outcomes.add(type(through_sql).__name__ if not isinstance(through_sql, str) else "error")
        if through_sql is not None and not isinstance(through_sql, str):
            outcomes.add(through_sql.match)
    # every kind of answer was met: exact, nearest, nothing, several devices
    assert outcomes >= {"BestResult", "exact", "nearest", "NoneType", "error"}


def test_best_among_takes_the_newest_device_row_of_a_name(store):
    query = BestQuery(head_dim=128, dtype="fp16", seq=2048, device=DEVICE_A.name)
    answer = best_among(store.best_per_problem(), query)
    assert answer is not None and answer.match == "exact"
    assert answer.device_id == max(d.id for d in store.devices() if d.name == DEVICE_A.name)
    assert answer == store.best(query)


def test_an_unknown_device_is_nothing_in_memory_and_an_error_through_sql(store):
    # The index names the unknown device itself (404 with the known ones) before it asks.
    query = BestQuery(head_dim=128, dtype="fp16", seq=512, device="no such device")
    assert best_among(store.best_per_problem(), query) is None
    with pytest.raises(StoreError, match="no device"):
        store.best(query)
