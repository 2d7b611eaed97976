"""``xe2tune.sdpa()`` launches the tuned config from the results database.

A config other than the family default is measured for a tiny problem on the real opencl:cpu
device and stored through the database's write API, as a search stores its trials; sdpa() must
then build that config (exact problem, and a nearby untuned one), still compute the right
answer, read the database once per problem, and fall back to the default when asked to or when
nothing is tuned.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from _tuned_store import store_tuned

import xe2tune
from xe2tune import _sdpa
from xe2tune._tuned import forget_tuned_configs
from xe2tune.errors import InvalidConfig
from xe2tune.kernels import (
    LauncherConfig,
    ProblemSpec,
    check_output,
    family_for,
    make_inputs,
    reference_sdpa,
)

pytestmark = pytest.mark.requires_xpu

PROBLEM = ProblemSpec(mode="prefill", head_dim=64, dtype="fp16", q_len=40, kv_len=40,
                      heads_q=4, heads_kv=2, batch=1, causal=True)
NEARBY = ProblemSpec(mode="prefill", head_dim=64, dtype="fp16", q_len=56, kv_len=56,
                     heads_q=4, heads_kv=2, batch=1, causal=True)


@pytest.fixture
def builds(monkeypatch: pytest.MonkeyPatch) -> list[dict]:
    """The defines of every program sdpa() builds (the real build still runs)."""
    seen: list[dict] = []
    real = _sdpa.build_program

    def recording(queue, source_file, kernel_names, defines):  # noqa: ANN001, ANN202
        seen.append(dict(defines))
        return real(queue, source_file, kernel_names, defines)

    monkeypatch.setattr(_sdpa, "build_program", recording)
    return seen


@pytest.fixture
def database(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    url = f"sqlite:///{tmp_path / 'tuned.db'}"
    monkeypatch.setenv("XE2TUNE_DB", url)
    forget_tuned_configs()
    yield url
    forget_tuned_configs()


def _defines(config: LauncherConfig, problem: ProblemSpec, caps) -> dict:  # noqa: ANN001
    return dict(family_for(problem, caps, config.family).plan(config, problem, caps).defines)


def _run(problem: ProblemSpec, queue, **kwargs) -> None:  # noqa: ANN001
    q, k, v = make_inputs(problem, seed=7)
    out = xe2tune.sdpa(q, k, v, causal=problem.causal, device=queue, **kwargs)
    assert check_output(problem, out, reference_sdpa(problem, q, k, v)).passed


def test_sdpa_uses_the_tuned_config_and_stays_correct(cpu_queue, cpu_caps, database: str,
                                                      builds: list[dict]) -> None:
    tuned = store_tuned(database, cpu_queue, cpu_caps, PROBLEM)
    default = family_for(PROBLEM, cpu_caps).default_config(PROBLEM, cpu_caps)
    assert _defines(tuned, PROBLEM, cpu_caps) != _defines(default, PROBLEM, cpu_caps)

    _run(PROBLEM, cpu_queue)
    assert builds[-1] == _defines(tuned, PROBLEM, cpu_caps)
    _run(NEARBY, cpu_queue)  # not tuned itself: the nearest tuned problem's best
    assert builds[-1] == _defines(tuned, NEARBY, cpu_caps)
    _run(PROBLEM, cpu_queue, config="default")
    assert builds[-1] == _defines(default, PROBLEM, cpu_caps)

    # looked up once per process: the database is gone, the answer stays
    Path(database.removeprefix("sqlite:///")).unlink()
    _run(PROBLEM, cpu_queue)
    assert builds[-1] == _defines(tuned, PROBLEM, cpu_caps)


def test_sdpa_runs_the_default_when_nothing_is_tuned(cpu_queue, cpu_caps, database: str,
                                                     builds: list[dict]) -> None:
    default = family_for(PROBLEM, cpu_caps).default_config(PROBLEM, cpu_caps)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no database yet is not worth a warning
        _run(PROBLEM, cpu_queue)
    assert builds[-1] == _defines(default, PROBLEM, cpu_caps)


def test_an_unreadable_database_warns_and_runs_the_default(cpu_queue, cpu_caps, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch,
                                                           builds: list[dict]) -> None:
    not_a_db = tmp_path / "notes.db"
    not_a_db.write_text("not a database")
    monkeypatch.setenv("XE2TUNE_DB", f"sqlite:///{not_a_db}")
    forget_tuned_configs()
    with pytest.warns(UserWarning, match="cannot read tuned configs"):
        _run(PROBLEM, cpu_queue)
    assert builds[-1] == _defines(
        family_for(PROBLEM, cpu_caps).default_config(PROBLEM, cpu_caps), PROBLEM, cpu_caps)
    forget_tuned_configs()


def test_a_config_that_is_not_one_is_refused(cpu_queue) -> None:
    q = np.zeros((8, 2, 64), np.float16)
    with pytest.raises(InvalidConfig, match="'fastest'"):
        xe2tune.sdpa(q, q, q, config="fastest", device=cpu_queue)


def test_sdpa_never_launches_a_config_tuned_for_another_dv(cpu_queue, cpu_caps, database: str,
                                                           builds: list[dict]) -> None:
    mha = ProblemSpec(mode="prefill", head_dim=192, dtype="fp16", q_len=40, kv_len=40,
                      heads_q=4, heads_kv=2, causal=True)
    mla = dataclasses.replace(mha, head_dim_v=128)
    for_mha = store_tuned(database, cpu_queue, cpu_caps, mha)
    default = family_for(mla, cpu_caps).default_config(mla, cpu_caps)
    # the MHA problem's best (ShapeOut (BQ, 192)) cannot even launch the MLA problem: taking it
    # would fail the call instead of running the MLA default
    assert for_mha.shape_out[1] == 192 != default.shape_out[1]
    _run(mla, cpu_queue)
    assert builds[-1] == _defines(default, mla, cpu_caps)

    forget_tuned_configs()
    for_mla = store_tuned(database, cpu_queue, cpu_caps, mla)
    _run(mla, cpu_queue)
    assert builds[-1] == _defines(for_mla, mla, cpu_caps)
