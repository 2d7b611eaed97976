"""Shared fixtures: one in-order profiling queue on the embedded opencl:cpu device per session.

Tests that need a SYCL device carry the ``requires_xpu`` marker; it is decided once here, and
those tests are skipped (not failed) on a machine without any SYCL runtime.
"""

from __future__ import annotations

import functools
import os
import sys
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from _schedule import ModuleSeconds, module_seconds, order_longest_first
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import OperationalError

from xe2tune.errors import DeviceError
from xe2tune.harness import device_caps, open_queue
from xe2tune.kernels import DeviceCaps, Xe2Compiler, locate_xe2_compiler

if TYPE_CHECKING:  # dpctl must load after xe2tune has set the runtime environment
    import dpctl

CPU_FILTER = "opencl:cpu"

# The PostgreSQL server the database tests also run against (trust auth); each test creates a
# database of its own on it and drops it afterwards. CI starts it before .ci/run.
POSTGRES_SERVER = os.environ.get("XE2TUNE_TEST_POSTGRES",
                                 "postgresql+psycopg://postgres@127.0.0.1:5432/postgres")
BACKENDS = ("sqlite", "postgresql")

# The limits the opencl:cpu runtime reports (docs/cpu-runtime.md), stated directly so that
# validation tests need no device.
CPU_CAPS = DeviceCaps(
    name="Intel OpenCL CPU (stated)", backend="opencl", device_type="cpu",
    max_work_group_size=8192, sub_group_sizes=(4, 8, 16, 32, 64), local_mem_bytes=256 * 1024,
    compute_units=2, global_mem_bytes=8 << 30,
)


def pytest_configure(config: pytest.Config) -> None:
    # Tests and the CLIs they start never write into the user's data dir (default database,
    # measured ceilings); the native-extension and kernel caches stay shared on purpose (their
    # writes are atomic, and the SYCL runtime locks its own cache).
    if "XE2TUNE_DATA_DIR" not in os.environ:
        os.environ["XE2TUNE_DATA_DIR"] = tempfile.mkdtemp(prefix="xe2tune-test-data-")
    # Each pytest-xdist worker (inheriting the controller's environment) gets a data dir of its
    # own, so that two workers' CLIs never share a default database.
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker:
        os.environ["XE2TUNE_DATA_DIR"] = str(Path(os.environ["XE2TUNE_DATA_DIR"]) / worker)
    # Tests hold gRPC channels while they start subprocesses: grpcio's fork handlers would run in
    # each child between fork and exec and can abort it (as in cli/_worker.py). grpc reads this
    # when it starts, and no test module has imported it yet.
    os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")
    # The modules' seconds are recorded where every report arrives: the xdist controller (or
    # the one process of a run without xdist), never in a worker.
    if not hasattr(config, "workerinput"):
        config.pluginmanager.register(ModuleSeconds(), "xe2tune-module-seconds")
        share_bytecode()


def share_bytecode() -> None:
    """Let the suite's processes reuse compiled bytecode where PYTHONDONTWRITEBYTECODE is set.

    The suite starts some 340 Python processes (CLIs, device processes, campaign workers,
    servers) and three xdist workers that each rewrite the asserts of every test module; with
    the variable set (as on the machines here), each compiles every source of this checkout it
    imports anew (the installed packages keep the bytecode pip wrote). The bytecode goes where
    Python puts it by default, ``__pycache__`` beside the sources (ignored by git). Called in
    the controller before xdist starts its workers, which inherit the environment like every
    process a test starts.
    """
    if os.environ.pop("PYTHONDONTWRITEBYTECODE", None):
        sys.dont_write_bytecode = False


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    # One worker more than cores (`-n auto`, pyproject.toml): a fifth of the workers' time is
    # spent waiting (stale-owner timeouts, build and run limits, servers and a browser
    # starting), which the extra worker fills. On a 2-vCPU Zen 4 EPYC, warm caches: 7 min 46-53 s
    # with two workers, 6 min 58 s with three and the CLI's lighter start; on a 2-vCPU Xeon 6 min
    # 29 s with four against 6 min 11 s with three (docs/first-contact.md, the test suite).
    return len(os.sched_getaffinity(0)) + 1


@functools.cache
def _cpu_queue() -> dpctl.SyclQueue | None:
    try:
        return open_queue(CPU_FILTER)
    except DeviceError:
        return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    order_longest_first(items, module_seconds(getattr(config, "cache", None)))
    if any("requires_xpu" in item.keywords for item in items) and _cpu_queue() is None:
        skip = pytest.mark.skip(reason=f"no SYCL device {CPU_FILTER} (install intel-opencl-rt)")
        for item in items:
            if "requires_xpu" in item.keywords:
                item.add_marker(skip)


@pytest.fixture(scope="session")
def cpu_queue() -> dpctl.SyclQueue:
    """The in-order, profiling queue on opencl:cpu (tests using it carry requires_xpu)."""
    queue = _cpu_queue()
    if queue is None:
        pytest.skip(f"no SYCL device {CPU_FILTER}")
    return queue


@pytest.fixture(scope="session")
def cpu_caps(cpu_queue: dpctl.SyclQueue) -> DeviceCaps:
    """The limits of the real opencl:cpu device."""
    return device_caps(cpu_queue.sycl_device)


@functools.cache
def _postgres_unreachable() -> str | None:
    try:
        engine = create_engine(POSTGRES_SERVER)
        with engine.connect():
            pass
        engine.dispose()
    except (OperationalError, ImportError) as exc:
        return f"no PostgreSQL server at {POSTGRES_SERVER} ({str(exc).splitlines()[0]})"
    return None


@contextmanager
def postgres_database() -> Iterator[str]:
    """A new, empty PostgreSQL database, dropped afterwards (connections and all).

    Without a server this fails under CI (``CI`` set) and is skipped elsewhere with the reason.
    """
    reason = _postgres_unreachable()
    if reason is not None:
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    name = f"xe2t_test_{uuid.uuid4().hex[:16]}"
    admin = create_engine(POSTGRES_SERVER, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as connection:
            connection.execute(text(f'CREATE DATABASE "{name}"'))
        yield make_url(POSTGRES_SERVER).set(database=name).render_as_string(hide_password=False)
        with admin.connect() as connection:
            connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    finally:
        admin.dispose()


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """A PostgreSQL database of this test's own (:func:`postgres_database`)."""
    with postgres_database() as url:
        yield url


@pytest.fixture(scope="module")
def module_postgres_url() -> Iterator[str]:
    """A PostgreSQL database shared by the tests of one module (one server for them all)."""
    with postgres_database() as url:
        yield url


@pytest.fixture(params=BACKENDS)
def backend_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh database URL on each backend: a SQLite file, then a PostgreSQL database."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'xe2tune.db'}"
    return request.getfixturevalue("postgres_url")


@pytest.fixture
def xe2_compiler() -> Xe2Compiler:
    """Intel's Xe2 compiler; without it the test is skipped with the reason, except under CI,
    which installs it (scripts/install-xe2-compiler) and fails instead."""
    lookup = locate_xe2_compiler()
    if lookup.compiler is None:
        if os.environ.get("CI"):
            pytest.fail(f"CI installs the Xe2 compiler: {lookup.reason}")
        pytest.skip(lookup.reason or "no Xe2 compiler")
    return lookup.compiler
