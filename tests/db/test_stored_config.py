"""A stored config is parsed once, where a row becomes a record; it leaves in its JSON form."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from xe2tune.db import BestQuery, ResultFilters, open_store
from xe2tune.errors import StoreError
from xe2tune.kernels import LauncherConfig
from xe2tune.testing import launcher_config, ok_result, prefill, tune


def test_records_carry_the_value_object_and_dump_its_json_form(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'r.db'}")
    try:
        config = launcher_config(bq=32)
        study_id = tune(store, prefill(512), [ok_result(config, 1e-3)])
        (trial,) = store.trials(study_id)
        (row,) = store.results(ResultFilters())
        best = store.best(BestQuery(head_dim=128, dtype="fp16", seq=512))
    finally:
        store.close()
    assert best is not None
    for record in (trial, row, best):
        assert isinstance(record.config, LauncherConfig) and record.config == config
        assert record.model_dump(mode="json")["config"] == config.to_dict()
        assert record.model_dump()["config"] == config.to_dict()


def test_a_stored_config_that_is_not_one_fails_the_read_naming_its_trial(tmp_path: Path) -> None:
    path = tmp_path / "r.db"
    store = open_store(f"sqlite:///{path}")
    try:
        study_id = tune(store, prefill(512), [ok_result(launcher_config(), 1e-3)])
    finally:
        store.close()
    with sqlite3.connect(path) as db:  # written by something other than xe2tune's two writers
        db.execute("UPDATE xe2t_trials SET config = '{\"family\": \"sdpa_prefill\"}'")
    store = open_store(f"sqlite:///{path}")
    try:
        for read in (lambda: store.trials(study_id), lambda: store.results(ResultFilters()),
                     lambda: store.best(BestQuery(head_dim=128, dtype="fp16", seq=512))):
            with pytest.raises(StoreError, match="trial 1: the stored config is not a launcher "
                                                 "config .*missing shape_qk"):
                read()
    finally:
        store.close()
