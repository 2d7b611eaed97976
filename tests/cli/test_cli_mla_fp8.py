"""``--head-dim-v`` and ``--kv-dtype`` on the command line: the default problems they give
(MLA prefill and decode shapes, FP8 K/V decode), what ``best``/``results`` print for them, and a
one-line error naming the accepted values for each bad one."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from _api_fixtures import xe2tune_command
from _mla_fp8_store import MLA_PREFILL, fill

from xe2tune.cli._search import _print_final as print_final
from xe2tune.db import open_store
from xe2tune.errors import InvalidProblem
from xe2tune.kernels import DEFAULT_HEAD_DIM_V, HEAD_DIMS, HEAD_DIMS_V, KV_DTYPES, ProblemSpec
from xe2tune.tuner import ProblemOverrides, default_problems
from xe2tune.tuner._problems import (
    CPU_MLA_DECODE_HEADS_Q,
    GPU_MLA_DECODE_HEADS_Q,
)


def test_mha_defaults_are_unchanged_and_name_neither_field() -> None:
    for on_gpu in (True, False):
        problems = default_problems(128, on_gpu=on_gpu, overrides=ProblemOverrides())
        assert {p.mode for p in problems} == {"prefill", "decode"}
        assert all(not p.is_mla and p.kv_dtype is None for p in problems)
        assert all("head_dim_v" not in p.key() and "kv_dtype" not in p.key() for p in problems)


def test_dv_apart_from_d_defaults_to_mla_prefill_shapes() -> None:
    problems = default_problems(192, on_gpu=True, overrides=ProblemOverrides(head_dim_v=128))
    assert problems and {p.mode for p in problems} == {"prefill"}
    assert {(p.head_dim, p.head_dim_v) for p in problems} == {(192, 128)}
    assert {p.dtype for p in problems} == {"fp16", "bf16"}
    assert all(p.heads_q == p.heads_kv for p in problems)


@pytest.mark.parametrize("on_gpu", [True, False])
def test_mla_decode_shares_one_kv_head_among_16_to_128_query_heads(on_gpu: bool) -> None:
    problems = default_problems(192, on_gpu=on_gpu, overrides=ProblemOverrides(
        head_dim_v=128, modes=["decode"]))
    assert problems and all(p.mode == "decode" and p.q_len == 1 for p in problems)
    assert {p.heads_kv for p in problems} == {1}
    assert {p.heads_q for p in problems} == set(
        GPU_MLA_DECODE_HEADS_Q if on_gpu else CPU_MLA_DECODE_HEADS_Q)
    assert min(GPU_MLA_DECODE_HEADS_Q) == 16 and max(GPU_MLA_DECODE_HEADS_Q) == 128


@pytest.mark.parametrize(("head_dim", "head_dim_v"), sorted(DEFAULT_HEAD_DIM_V.items()))
def test_an_absorbed_mla_head_dim_defaults_to_mla_decode(head_dim: int, head_dim_v: int) -> None:
    """``search --head-dim 576``: MLA decode, Dv 512, once the kernels accept D 576; until then
    refused as any unsupported head dim is."""
    if head_dim not in HEAD_DIMS:
        with pytest.raises(InvalidProblem, match=f"head dim {head_dim} is not supported"):
            default_problems(head_dim, on_gpu=True, overrides=ProblemOverrides())
        return
    problems = default_problems(head_dim, on_gpu=True, overrides=ProblemOverrides())
    assert {(p.mode, p.head_dim_v, p.heads_kv) for p in problems} == {("decode", head_dim_v, 1)}
    assert {p.heads_q for p in problems} == set(GPU_MLA_DECODE_HEADS_Q)


def test_kv_dtype_goes_to_decode_and_to_prefill_when_asked() -> None:
    both = default_problems(128, on_gpu=False, overrides=ProblemOverrides(kv_dtype="e4m3"))
    assert {(p.mode, p.kv_dtype) for p in both} == {("prefill", None), ("decode", "e4m3")}
    prefill = default_problems(128, on_gpu=False, overrides=ProblemOverrides(
        kv_dtype="e5m2", modes=["prefill"]))
    assert {(p.mode, p.kv_dtype) for p in prefill} == {("prefill", "e5m2")}
    mla = default_problems(192, on_gpu=False, overrides=ProblemOverrides(
        head_dim_v=128, kv_dtype="e4m3"))  # MLA prefill alone: the request is not dropped
    assert {(p.mode, p.kv_dtype) for p in mla} == {("prefill", "e4m3")}


def run(*args: str) -> subprocess.CompletedProcess[str]:
    # wide enough that rich wraps no printed line
    return subprocess.run([xe2tune_command(), *args], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "COLUMNS": "250"})


def test_search_dry_run_json_names_dv_and_the_kv_dtype() -> None:
    proc = run("search", "--head-dim", "192", "--head-dim-v", "128", "--mode", "decode",
               "--kv-dtype", "e4m3", "--dtype", "bf16", "--seq", "4096", "--heads-q", "128",
               "--target", "b580", "--dry-run", "--sample", "0", "--json")
    assert proc.returncode == 0, proc.stderr
    [plan] = json.loads(proc.stdout)["problems"]
    assert plan["problem"] == {"mode": "decode", "head_dim": 192, "dtype": "bf16", "q_len": 1,
                               "kv_len": 4096, "heads_q": 128, "heads_kv": 1, "batch": 1,
                               "causal": False, "head_dim_v": 128, "kv_dtype": "e4m3"}


def test_best_prints_and_answers_dv_and_the_kv_dtype(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'xe2tune.db'}"
    store = open_store(url)
    fill(store)
    store.close()
    proc = run("best", "--head-dim", "192", "--head-dim-v", "128", "--dtype", "fp16", "--seq",
               "1024", "--db", url)
    assert proc.returncode == 0, proc.stderr
    assert "NEAREST" in proc.stdout and "prefill D=192 Dv=128 fp16 q_len=4096" in proc.stdout
    proc = run("best", "--head-dim", "192", "--head-dim-v", "128", "--dtype", "fp16", "--seq",
               "4096", "--db", url, "--json")
    answer = json.loads(proc.stdout)
    assert answer["match"] == "exact" and answer["problem"]["head_dim_v"] == 128
    assert answer["problem"]["kv_len"] == MLA_PREFILL.kv_len
    proc = run("best", "--head-dim", "128", "--dtype", "fp16", "--kv-dtype", "e5m2", "--seq",
               "4096", "--mode", "decode", "--db", url)
    assert proc.returncode == 2
    assert "nothing tuned for decode D=128 fp16 K/V=e5m2" in proc.stderr
    proc = run("results", "--kv-dtype", "e5m2", "--db", url)
    assert proc.returncode == 0, proc.stderr
    assert "decode D192 Dv128 bf16 K/V=e5m2 1/8192" in proc.stdout


ACCEPTED_DV = ", ".join(map(str, HEAD_DIMS_V))
ACCEPTED_KV = ", ".join(KV_DTYPES)
PROBLEM = ("--head-dim", "128", "--seq", "512")
SEARCH = ("search", "--head-dim", "128", "--target", "b580", "--dry-run")


@pytest.mark.parametrize(("args", "needles"), [
    ((*SEARCH, "--head-dim-v", "100"), ("head dim v 100", ACCEPTED_DV)),
    ((*SEARCH, "--kv-dtype", "e3m4"), ("kv dtype 'e3m4'", ACCEPTED_KV)),
    ((*SEARCH, "--dtype", "fp32", "--kv-dtype", "e4m3"), ("fp16 or bf16", "fp32")),
    (("bench", *PROBLEM, "--head-dim-v", "100"), ("head dim v 100", ACCEPTED_DV)),
    (("bench", *PROBLEM, "--kv-dtype", "e3m4"), ("kv dtype 'e3m4'", ACCEPTED_KV)),
    (("inspect", *PROBLEM, "--dtype", "fp32", "--kv-dtype", "e5m2"), ("fp16 or bf16",)),
    (("best", *PROBLEM, "--dtype", "fp16", "--head-dim-v", "100"), ("100", ACCEPTED_DV)),
    (("best", *PROBLEM, "--dtype", "fp16", "--kv-dtype", "e3m4"), ("e3m4", ACCEPTED_KV)),
    (("best", *PROBLEM, "--dtype", "fp32", "--kv-dtype", "e4m3"), ("fp16 or bf16", "fp32")),
    (("results", "--kv-dtype", "e3m4"), ("e3m4", ACCEPTED_KV)),
    (("campaign", "create", "--head-dim", "192", "--head-dim-v", "100"),
     ("head dim v 100", ACCEPTED_DV)),
])
def test_bad_dv_or_kv_dtype_is_one_line_naming_the_accepted(
        args: tuple[str, ...], needles: tuple[str, ...], tmp_path: Path) -> None:
    proc = run(*args, "--db", f"sqlite:///{tmp_path / 'xe2tune.db'}") \
        if args[0] in ("best", "results", "campaign") else run(*args)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    [line] = proc.stderr.strip().splitlines()
    for needle in needles:
        assert needle in line, line


def test_search_summary_tells_mla_decode_problems_apart(capsys: pytest.CaptureFixture[str]
                                                        ) -> None:
    rows = [{"problem": ProblemSpec(mode="decode", head_dim=192, head_dim_v=128, dtype="bf16",
                                    kv_dtype="e4m3", q_len=1, kv_len=4096, heads_q=hq,
                                    heads_kv=1).to_dict(),
             "best_config": None, "best_median_s": 1e-3, "tflops": None,
             "roofline_fraction": None, "default_median_s": None, "speedup_vs_default": None,
             "trials": 1, "stored_before": 0, "measured": 1, "confirmed_rounds": None,
             "skipped": "not run"}
            for hq in (16, 128)]
    print_final(rows)
    out = capsys.readouterr().out
    assert "decode 4096 h16/1 bf16 K/V=e4m3" in out and "decode 4096 h128/1 bf16 K/V=e4m3" in out
