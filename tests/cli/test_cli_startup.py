"""Every ``xe2tune`` start pays only for what its command uses.

``import xe2tune.cli``, ``--help`` and the bad inputs the arguments alone reveal answer without
the results database's stack, the tuner's, the device runtime's or the server's: each check runs
in a fresh interpreter and reads its ``sys.modules`` when it exits.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

# SQLAlchemy, Alembic (migrations only) and pandas (db), optuna (tuner), dpctl and the SYCL
# extension (harness), FastAPI, uvicorn and grpc (serve): together over a CPU second, for the
# commands that use them. NumPy (the kernel families, statistics, dashboard reads; dpctl's too):
# a fifth of a read command's start.
HEAVY = ("pandas", "sqlalchemy", "alembic", "optuna", "dpctl", "_sycl_jit", "fastapi", "uvicorn",
         "grpc", "numpy")

# Writes the heavy modules loaded to $XE2TUNE_PROBE at exit (after sys.exit too), then runs the
# console script's main() with the given arguments.
RUN_CLI = """
import atexit, json, os, sys

def _report():
    loaded = sorted({m.split('.')[0] for m in sys.modules} & set(json.loads(os.environ['HEAVY'])))
    with open(os.environ['XE2TUNE_PROBE'], 'w') as out:
        json.dump(loaded, out)

atexit.register(_report)
from xe2tune.cli import main
sys.argv = ['xe2tune', *sys.argv[1:]]
main()
"""
PROBLEM = ("--head-dim", "64", "--seq", "64")


def _run(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    probe = tmp_path / "probe.json"
    proc = subprocess.run(
        [sys.executable, "-c", RUN_CLI, *args], capture_output=True, text=True, timeout=120,
        cwd=tmp_path, env={**os.environ, "HEAVY": json.dumps(HEAVY), "XE2TUNE_PROBE": str(probe),
                           "XE2TUNE_DB": f"sqlite:///{tmp_path / 'never-opened.db'}"})
    return proc, json.loads(probe.read_text())


def test_importing_the_cli_loads_nothing_heavy() -> None:
    code = ("import json, sys, xe2tune.cli; "
            f"print(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}} & {set(HEAVY)!r})))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == []


@pytest.mark.parametrize("args", [("--help",), ("search", "--help"), ("bench", "--help"),
                                  ("campaign", "token", "--help")], ids=" ".join)
def test_help_loads_nothing_heavy(tmp_path: Path, args: tuple[str, ...]) -> None:
    proc, loaded = _run(tmp_path, *args)
    assert proc.returncode == 0, proc.stderr
    assert "Usage:" in proc.stdout
    assert loaded == []


# Not here: search's checks need the device class (below).
BAD_ARGUMENTS = [
    (("bench", *PROBLEM, "--dtype", "fp64"), "fp64"),
    (("bench", "--head-dim", "7", "--seq", "64"), "head dim 7"),
    (("bench", *PROBLEM, "--kv-dtype", "e3m4"), "kv dtype 'e3m4'"),
    (("inspect", *PROBLEM, "--dtype", "fp32", "--kv-dtype", "e5m2"), "fp16 or bf16"),
    (("search", "--head-dim", "lots"), "--head-dim"),
    (("best", *PROBLEM, "--dtype", "fp64"), "dtype 'fp64'"),
    (("results", "--format", "xml"), "format 'xml'"),
    (("export", "--format", "xml"), "format 'xml'"),
    (("campaign", "token", "create", "--campaign", "1", "--name", " "), "--name"),
    (("worker", "--campaign", "1", "--stale-after", "30"), "--stale-after goes with --grpc"),
    (("worker", "--campaign", "1", "--grpc", "tuner.lab:13000", "--api", "tuner.lab"),
     "--api 'tuner.lab': accepted"),
    (("serve", "--host", "0.0.0.0"), "plain text is served on loopback only"),
    (("serve", "--grpc-port", "13000"), "--grpc-port without TLS"),
    (("campaign", "create", "--head-dim", "128", "--sampler", "nope"), "unknown sampler 'nope'"),
    (("campaign", "create", "--head-dim", "7"), "head dim 7"),
    (("campaign", "create", "--head-dim", "128", "--trials", "0"), "--trials must be >= 1"),
    (("replay", "--space", "missing.json", "--sampler", "nope"), "unknown sampler 'nope'"),
]


@pytest.mark.parametrize(("args", "needle"), BAD_ARGUMENTS,
                         ids=[" ".join(args) for args, _ in BAD_ARGUMENTS])
def test_bad_arguments_fail_before_anything_heavy_loads(
        tmp_path: Path, args: tuple[str, ...], needle: str) -> None:
    proc, loaded = _run(tmp_path, *args)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], proc.stderr
    assert loaded == []
    assert not (tmp_path / "never-opened.db").exists()


# search's default problems and budget depend on the device class: dpctl resolves the device
# before they are checked, and nothing else heavy loads.
DEVICE_CLASS = ["dpctl", "numpy"]  # dpctl imports NumPy
SEARCH_BAD_ARGUMENTS = [
    (("--head-dim", "128", "--sampler", "nope"), "unknown sampler 'nope'", []),
    (("--head-dim", "7"), "head dim 7", DEVICE_CLASS),
    (("--head-dim", "128", "--trials", "0"), "--trials must be >= 1", DEVICE_CLASS),
    (("--head-dim", "128", "--confirm-rounds", "0"), "--confirm-rounds must be >= 1",
     DEVICE_CLASS),
    (("--head-dim", "128", "--seq", "abc"), "cannot read 'abc'", DEVICE_CLASS),
    (("--head-dim", "128", "--dtype", "fp64"), "dtype 'fp64'", DEVICE_CLASS),
]


@pytest.mark.parametrize(("args", "needle", "heavy"), SEARCH_BAD_ARGUMENTS,
                         ids=[" ".join(args) for args, _, _ in SEARCH_BAD_ARGUMENTS])
def test_search_checks_its_arguments_with_the_device_class_alone(
        tmp_path: Path, args: tuple[str, ...], needle: str, heavy: list[str]) -> None:
    proc, loaded = _run(tmp_path, "search", *args)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], proc.stderr
    assert loaded == heavy
    assert not (tmp_path / "never-opened.db").exists()


def test_the_probe_sees_a_command_that_loads_the_database(tmp_path: Path) -> None:
    # the checks above can fail: a command that opens the database loads SQLAlchemy
    proc, loaded = _run(tmp_path, "results")
    assert proc.returncode == 2, proc.stderr  # no database file: nothing tuned
    assert "sqlalchemy" in loaded


def test_alembic_loads_only_when_a_database_is_migrated(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'tune.db'}"
    proc, loaded = _run(tmp_path, "migrate", "--db", url)  # a new file: the schema is created
    assert proc.returncode == 0, proc.stderr
    assert {"sqlalchemy", "alembic"} <= set(loaded)
    proc, loaded = _run(tmp_path, "results", "--db", url)  # at head: read as it is
    assert proc.returncode == 0, proc.stderr
    assert "sqlalchemy" in loaded and "alembic" not in loaded


def test_a_read_command_loads_the_database_stack_and_no_numpy(tmp_path: Path) -> None:
    # NumPy comes with the kernel families, the statistics and the dashboard's reads, which
    # listing a database's campaigns never touches (nor the status of one, a worker's start...)
    url = f"sqlite:///{tmp_path / 'tune.db'}"
    assert _run(tmp_path, "migrate", "--db", url)[0].returncode == 0
    proc, loaded = _run(tmp_path, "campaign", "list", "--db", url)
    assert proc.returncode == 0, proc.stderr
    assert loaded == ["sqlalchemy"]
