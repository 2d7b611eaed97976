"""The SQLite ResultStore: the conformance suite on a real file (and in memory), plus what only a
shared file can show: concurrent readers and writers, and optuna's tables living alongside."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path

import optuna
import pytest

from xe2tune.db import BestQuery, ResultStore, open_optuna_storage, open_store
from xe2tune.db._engine import make_engine, use_wal
from xe2tune.errors import StoreError
from xe2tune.testing import launcher_config, ok_result, prefill, tune
from xe2tune.testing.store_contract import StoreContract


@pytest.fixture(params=["file", "memory"])
def any_store(request: pytest.FixtureRequest, tmp_path: Path) -> ResultStore:
    url = f"sqlite:///{tmp_path / 'xe2tune.db'}" if request.param == "file" else "sqlite://"
    store = open_store(url)
    yield store
    store.close()


class TestSqliteStore(StoreContract):
    @pytest.fixture
    def store(self, any_store: ResultStore) -> ResultStore:
        return any_store


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'xe2tune.db'}"


def test_file_is_in_wal_mode_and_readers_do_not_wait_for_a_writer(db_url: str,
                                                                   tmp_path: Path) -> None:
    writer, reader = open_store(db_url), open_store(db_url)
    tune(writer, prefill(512), [ok_result(launcher_config(), 1e-3)])
    raw = sqlite3.connect(tmp_path / "xe2tune.db")
    assert raw.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    raw.execute("BEGIN IMMEDIATE")  # another process holding the write lock
    raw.execute("UPDATE xe2t_meta SET value = value + 1")
    assert reader.best(BestQuery(head_dim=128, dtype="fp16", seq=512)) is not None
    raw.rollback()
    raw.close()


def _errors_in_threads(work: Callable[[int], None], count: int) -> list[BaseException]:
    """Run ``work(0)`` .. ``work(count - 1)``, each on a thread of its own; what they raised."""
    errors: list[BaseException] = []

    def run(index: int) -> None:
        try:
            work(index)
        except BaseException as exc:  # noqa: BLE001  (every failure is the finding)
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return errors


def _switch_to_wal_at_once(path: Path, openers: int) -> list[BaseException]:
    """What ``openers`` engines of one new SQLite file, released together, raise switching it
    to WAL."""
    engines = [make_engine(f"sqlite:///{path}") for _ in range(openers)]
    together = threading.Barrier(openers)

    def switch(index: int) -> None:
        together.wait()
        use_wal(engines[index])

    try:
        return _errors_in_threads(switch, openers)
    finally:
        for engine in engines:
            engine.dispose()


def test_openers_switching_a_new_file_to_wal_at_once_all_succeed(tmp_path: Path) -> None:
    """Two searches started together on a new SQLite file both switch it to WAL: SQLite fails
    one of two switches that meet at once, whatever its busy timeout, so the loser retries.
    Four openers per file: without the retry 2-8 of 800 switches failed per 200 files (scratch
    runs), and this test failed in each of three runs."""
    for index in range(300):
        path = tmp_path / f"{index}.db"
        assert _switch_to_wal_at_once(path, 4) == [], path
        with sqlite3.connect(path) as connection:
            assert connection.execute("PRAGMA journal_mode").fetchone() == ("wal",)


def test_writers_queue_on_the_lock_instead_of_failing(db_url: str) -> None:
    stores = [open_store(db_url) for _ in range(3)]

    def work(index: int) -> None:
        offset = 100 * (index + 1)
        for seq in range(offset, offset + 10):
            tune(stores[index], prefill(seq), [ok_result(launcher_config(), 1e-3)])

    assert _errors_in_threads(work, len(stores)) == []
    assert len(stores[0].best_per_problem()) == 30


def test_optuna_shares_the_database_and_survives_reopening(db_url: str) -> None:
    store = open_store(db_url)
    storage = optuna.storages.RDBStorage(store.optuna_storage_url(),
                                         engine_kwargs=store.optuna_engine_kwargs())
    study = optuna.create_study(storage=storage, study_name="s")
    study.optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=2)
    tune(store, prefill(512), [ok_result(launcher_config(), 1e-3)])
    store.close()
    reopened = open_store(db_url)
    assert len(optuna.load_study(study_name="s", storage=db_url).trials) == 2
    assert len(reopened.best_per_problem()) == 1


def _open_optuna_at_once(store: ResultStore, openers: int) -> list[BaseException]:
    """What ``openers`` threads released together get wrong opening optuna and creating a
    study each."""
    start = threading.Barrier(openers)

    def open_and_use(index: int) -> None:
        start.wait()
        optuna.create_study(storage=open_optuna_storage(store), study_name=f"s{index}")

    return _errors_in_threads(open_and_use, openers)


def test_openers_of_optuna_on_a_fresh_database_at_once_all_get_it(backend_url: str,
                                                                 tmp_path: Path) -> None:
    """Optuna's first open of a database creates its tables unlocked; openers racing it (as two
    searches started together) all get a working storage. Unguarded, 39 of 60 such opens
    failed on SQLite (three at once, 20 files)."""
    urls = ([backend_url] if not backend_url.startswith("sqlite")
            else [f"sqlite:///{tmp_path / f'fresh{i}.db'}" for i in range(5)])
    for url in urls:
        store = open_store(url)
        try:
            assert _open_optuna_at_once(store, 3) == [], url
            assert len(optuna.get_all_study_names(open_optuna_storage(store))) == 3
        finally:
            store.close()


def test_owners_asking_at_once_never_pop_the_same_waiting_trial(backend_url: str) -> None:
    """A trial given back (a killed owner's, an untold one asked ahead) or enqueued waits in
    optuna's queue; each waiting trial must go to one asker. Optuna pops one by reading it
    WAITING and setting it RUNNING, which on SQLite two storages interleaved: four threads with
    a storage each, asking 16 enqueued trials at once, got the same trial twice in 41 cases
    over 10 runs (and a trial so shared was left RUNNING by a search in the suite)."""
    store = open_store(backend_url)
    try:
        study = optuna.create_study(storage=open_optuna_storage(store), study_name="queue")
        for x in range(16):
            study.enqueue_trial({"x": x})
        askers, start = 4, threading.Barrier(4)
        popped: list[list[int]] = [[] for _ in range(askers)]

        def ask(index: int) -> None:
            mine = optuna.load_study(study_name="queue", storage=open_optuna_storage(store))
            start.wait()
            for _ in range(5):
                trial = mine.ask({"x": optuna.distributions.IntDistribution(0, 99)})
                popped[index].append(trial.number)

        errors = _errors_in_threads(ask, askers)
    finally:
        store.close()
    numbers = [n for mine in popped for n in mine]
    assert errors == []
    assert len(numbers) == len(set(numbers)) == 20, popped  # 16 popped once each, 4 new ones


@pytest.mark.parametrize(("make_url", "message"), [
    (lambda tmp: "not a url", "malformed database URL"),
    (lambda tmp: "nosuchdialect://x/y", "unknown database dialect"),
    (lambda tmp: f"sqlite:///{tmp}", "is a directory"),
    (lambda tmp: f"sqlite:///{tmp}/missing/x.db", "does not exist"),
    (lambda tmp: f"sqlite:///{tmp}/text.db", "is not an SQLite database"),
])
def test_bad_urls_give_one_line_errors(tmp_path: Path, make_url, message: str) -> None:
    (tmp_path / "text.db").write_text("hello, not a database\n")
    with pytest.raises(StoreError, match=message) as info:
        open_store(make_url(tmp_path))
    assert "\n" not in str(info.value)


def test_default_url_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch,
                                                tmp_path: Path) -> None:
    from xe2tune.db import default_database_url

    monkeypatch.delenv("XE2TUNE_DB", raising=False)
    monkeypatch.setenv("XE2TUNE_DATA_DIR", str(tmp_path))
    assert default_database_url() == f"sqlite:///{tmp_path / 'xe2tune.db'}"
    monkeypatch.setenv("XE2TUNE_DB", "sqlite:////elsewhere.db")
    assert default_database_url() == "sqlite:////elsewhere.db"
