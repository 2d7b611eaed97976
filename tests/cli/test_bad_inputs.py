"""Every bad input gets a one-line error (CLI, exit 2) or a 4xx (API), and files stay untouched.

Configs with zero tiles, NaN/Infinity or absurd sizes, oversize or malformed request bodies, a
foreign Host header, another program's database, an old-schema database under a read-only
command, a gzip bomb given to replay: each through the real console script or a real running
``xe2tune serve``.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import math
import os
import sqlite3
import subprocess
import sys
import time
import tracemalloc
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from _api_fixtures import running_server, xe2tune_command
from _spaces import SYNTHETIC_PARAMS, synthetic_time, write_cache
from conftest import CPU_CAPS

from xe2tune.db import MeasuredCeilings, migrate_database, open_store
from xe2tune.errors import InvalidConfig, StoreError
from xe2tune.kernels import LauncherConfig, ProblemSpec, family_for_mode
from xe2tune.testing import launcher_config, ok_result, prefill, submission, tune
from xe2tune.tuner import NotARecordingError, load_recording, replay

TOKEN = "bad-inputs-token"
# A valid prefill config of the family's space (hd64): the base every bad config changes.
GOOD = {"shape_qk": [32, 16, 16], "shape_pv": [32, 16, 16], "shape_out": [32, 64],
        "subgroup_layout": [8, 1], "stages": 1, "subgroup_size": 8,
        "knobs": {"rows_per_item": 4, "kv_stage": False, "kv_pack": False}}


def run(*args: str, env: dict[str, str] | None = None,
        timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run([xe2tune_command(), *args], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=timeout)


def assert_one_line_error(proc: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


def fingerprint(path: Path) -> tuple[str, list[str]]:
    """The file's sha256 and the names of its SQLite siblings (-wal, -shm, -journal)."""
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    siblings = sorted(p.name for p in path.parent.iterdir()
                      if p.name.startswith(path.name) and p != path)
    return digest, siblings


# -- configs --------------------------------------------------------------------------------

BAD_CONFIGS = [
    ({"shape_pv": [32, 0, 16]}, "shape_pv[1] must be an integer in 1..4096, got 0"),
    ({"shape_out": [32, 64], "shape_pv": [32, -16, 16]}, "shape_pv[1]"),
    ({"stages": math.inf}, "stages must be an integer in 0..16, got inf"),
    ({"stages": math.nan}, "stages must be an integer"),
    ({"stages": -1}, "stages must be an integer in 0..16"),
    ({"stages": 10**30}, "stages must be an integer"),
    ({"stages": True}, "stages must be an integer"),
    ({"stages": 1.5}, "stages must be an integer"),
    ({"subgroup_size": "8"}, "subgroup_size must be an integer"),
    ({"shape_qk": [32, 16]}, "shape_qk must be a list of 3 integers"),
    ({"shape_qk": "32,16,16"}, "shape_qk must be a list of 3 integers"),
    ({"shape_out": [32, 10**9]}, "shape_out[1] must be an integer in 1..4096"),
    ({"knobs": {"rows_per_item": 1.5}}, "knobs.rows_per_item must be a boolean, an integer"),
    ({"knobs": {"rows_per_item": 2**40}}, "knobs.rows_per_item must be an integer"),
    ({"knobs": {"x" * 100: 1}}, "knob name must be a name"),
    ({"knobs": [["rows_per_item", 4]]}, "knobs must be a JSON object"),
    ({"knobs": {f"k{i}": 1 for i in range(40)}}, "accepted: at most 32"),
    ({"family": "sdpa prefill; rm -rf"}, "family must be a name"),
    ({"vtiles": math.inf}, "vtiles must be an integer"),
    ({"surprise": 1}, "unknown config fields: surprise"),
]


@pytest.mark.parametrize(("change", "message"), BAD_CONFIGS,
                         ids=[message for _, message in BAD_CONFIGS])
def test_a_malformed_config_is_refused_with_its_field(change: dict, message: str) -> None:
    with pytest.raises(InvalidConfig) as info:
        LauncherConfig.from_dict({**GOOD, **change}, family="sdpa_prefill")
    assert message in info.value.reason and "\n" not in info.value.reason


@pytest.mark.parametrize(("change", "message"), [
    ({"rows_per_item": 4096, "bq": 4096}, "bq 4096 is outside the sdpa_prefill space"),
    ({"rows_per_item": 24, "bq": 96}, "rows_per_item 24 is outside the sdpa_prefill space for "
                                      "this problem; accepted: 1, 2, 4, 6, 8, 12"),
    ({"bk": 1024, "kv_stage": False}, "bk 1024 is outside the sdpa_prefill space for this "
                                      "problem; accepted: 8, 16, 32, 64, 128"),
])
def test_configs_off_the_family_space_are_invalid_with_the_accepted_values(
        change: dict, message: str) -> None:
    problem = ProblemSpec("prefill", 64, "fp16", 256, 256)
    family = family_for_mode("prefill")
    params = {**family.params_from_config(family.default_config(problem, CPU_CAPS)),
              "kv_pack": False, **change}
    config = family.config_from_params(problem, params)
    reason = family.invalid_reason(config, problem, CPU_CAPS)
    assert reason is not None and message in reason


def test_stored_knobs_of_the_wrong_kind_are_a_reason_not_a_crash() -> None:
    problem = ProblemSpec("prefill", 64, "fp16", 256, 256)
    family = family_for_mode("prefill")
    config = LauncherConfig.from_dict(
        {**GOOD, "knobs": {**GOOD["knobs"], "rows_per_item": "four"}}, family="sdpa_prefill")
    assert "knob rows_per_item must be an integer" in family.invalid_reason(
        config, problem, CPU_CAPS)


@pytest.mark.parametrize(("config", "needle"), [
    ({**GOOD, "shape_pv": [32, 0, 16]}, "shape_pv[1]"),
    ('{"shape_qk": [32,16,16], "shape_pv": [32,16,16], "shape_out": [32,64], '
     '"subgroup_layout": [8,1], "stages": Infinity, "subgroup_size": 8}', "stages"),
    ({**GOOD, "stages": 1e300}, "stages"),
], ids=["bv0", "stages-infinity", "stages-1e300"])
def test_bench_refuses_a_malformed_config_before_touching_the_device(config, needle: str):
    text = config if isinstance(config, str) else json.dumps(config)
    started = time.monotonic()
    proc = run("bench", "--head-dim", "64", "--seq", "64", "--config", text)
    assert_one_line_error(proc, needle)
    assert time.monotonic() - started < 60


@pytest.fixture(scope="module")
def measured_db(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A database where opencl:cpu already has measured peaks: bench opens the device at once."""
    from xe2tune.cli._session import device_record
    from xe2tune.harness import list_devices

    url = f"sqlite:///{tmp_path_factory.mktemp('peaks') / 'peaks.db'}"
    listing = next(d for d in list_devices() if d.filter_string.startswith("opencl:cpu"))
    store = open_store(url)
    try:
        device_id = store.upsert_device(device_record(listing, None))
        store.save_ceilings(device_id, MeasuredCeilings(
            flops={"fp32": 1e11, "fp16": 1e11, "bf16": 1e11}, bandwidth=1e10))
    finally:
        store.close()
    return url


@pytest.mark.requires_xpu
def test_bench_refuses_a_config_that_would_hang_the_compiler(measured_db: str) -> None:
    # Passes every structural check (BQ % TM == 0, one work-item), then kept the runtime
    # compiler busy for 300 s: now it is outside the family's space.
    hang = {**GOOD, "shape_qk": [4096, 16, 16], "shape_pv": [4096, 16, 16],
            "shape_out": [4096, 64], "subgroup_layout": [1, 1],
            "knobs": {**GOOD["knobs"], "rows_per_item": 4096}}
    started = time.monotonic()
    proc = run("bench", "--head-dim", "64", "--seq", "256", "--mode", "prefill", "--config",
               json.dumps(hang), "--db", measured_db, "--device", "opencl:cpu")
    assert_one_line_error(proc, "outside the sdpa_prefill space", "accepted:")
    assert time.monotonic() - started < 90


@pytest.mark.parametrize(("args", "needle"), [
    (["bench", "--head-dim", "64", "--seq", "0"], "--seq"),
    (["bench", "--head-dim", "64", "--seq", "-5"], "--seq"),
    (["bench", "--head-dim", "64", "--seq", "99999999999999"], "--seq"),
    (["bench", "--head-dim", "64", "--q-len", "4", "--kv-len", "0"], "--kv-len"),
    (["bench", "--head-dim", "64", "--seq", "64", "--heads-kv", "0"], "--heads-kv"),
    (["bench", "--head-dim", "64", "--seq", "64", "--batch", "-1"], "--batch"),
    (["bench", "--head-dim", "64", "--seq", "64", "--batch", "lots"], "--batch"),
    (["bench", "--head-dim", "-64", "--seq", "64"], "head dim -64"),
    (["best", "--head-dim", "64", "--dtype", "fp16", "--seq", "0"], "--seq"),
    (["best", "--head-dim", "64", "--dtype", "fp16", "--seq", "10000000000000000000000"],
     "--seq"),
    (["results", "--study", "100000000000000000000000"], "--study"),
])
def test_nonsense_problem_options_are_one_line(args: list[str], needle: str) -> None:
    assert_one_line_error(run(*args), needle)


# -- the API --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    base = tmp_path_factory.mktemp("bad-api")
    url = f"sqlite:///{base / 'api.db'}"
    with running_server(url, base / "serve.log", token=TOKEN) as address:
        yield address


def request(url: str, *, method: str = "GET", body: bytes | None = None,
            headers: dict[str, str] | None = None) -> tuple[int, dict]:
    """One real HTTP request; (status, JSON body) whatever the status."""
    headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json",
               **(headers or {})}
    req = urllib.request.Request(url, data=body, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def payload() -> dict:
    """A valid POST /v1/results body (an OK trial of the prefill family)."""
    return submission(launcher_config(), 1e-3, prefill(512)).model_dump(mode="json")


def _post(server: str, body: dict | bytes) -> tuple[int, dict]:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return request(f"{server}/v1/results", method="POST", body=raw)


def _with_config(**change: object) -> dict:
    body = payload()
    body["config"] = {**body["config"], **change}
    return body


def _nested(path: str, value: object) -> dict:
    body = payload()
    *parents, leaf = path.split(".")
    node = body
    for name in parents:
        node = node[name]
    node[leaf] = value
    return body


BAD_BODIES = {
    "config bv 0": (_with_config(shape_pv=[64, 0, 64]), 422, "shape_pv[1]"),
    "config stages Infinity": (_with_config(stages=math.inf), 422, "stages"),
    "config stages NaN": (_with_config(stages=math.nan), 422, "stages"),
    "config stages huge": (_with_config(stages=10**40), 422, "stages"),
    "problem kv_len huge": (_nested("problem.kv_len", 10**30), 422, "problem.kv_len"),
    "timing sample NaN": (_nested("timing.samples", [math.nan] * 5), 422, "timing.samples"),
    "peak Infinity": (_nested("roofline.peak_flops", math.inf), 422, "roofline.peak_flops"),
    "device name 10k chars": (_nested("device.name", "x" * 10_000), 422, "device.name"),
    "error 100k chars": (_nested("error", "e" * 100_000), 422, "body field error"),
    "30k samples": (_nested("timing.samples", [1e-3] * 30_000), 422, "timing.samples"),
    "extra with 1000 keys": (_nested("extra", {f"k{i}": i for i in range(1000)}), 422,
                             "body field extra"),
    "subgroup sizes 1000": (_nested("device.sub_group_sizes", [16] * 1000), 422,
                            "device.sub_group_sizes"),
    "deeply nested JSON": (b"[" * 200_000 + b"]" * 200_000, 400, "parsing the body"),
    "not JSON": (b"{not json", 422, "JSON"),
}


@pytest.mark.parametrize("name", sorted(BAD_BODIES))
def test_bad_submissions_get_a_4xx_with_a_json_detail_and_store_nothing(server: str,
                                                                        name: str) -> None:
    body, status, needle = BAD_BODIES[name]
    stored = request(f"{server}/v1/results")[1]["total"]
    code, answer = _post(server, body)
    assert code == status, answer
    assert needle in answer["detail"] and "\n" not in answer["detail"]
    assert request(f"{server}/v1/results")[1]["total"] == stored


def test_a_10_mb_body_is_413_and_not_stored(server: str) -> None:
    stored = request(f"{server}/v1/results")[1]["total"]
    code, answer = _post(server, b'{"error": "' + b"x" * 10_000_000 + b'"}')
    assert code == 413 and "at most 1048576 bytes" in answer["detail"]
    assert request(f"{server}/v1/results")[1]["total"] == stored


def test_a_chunked_body_past_the_limit_is_413(server: str) -> None:
    def chunks() -> Iterator[bytes]:
        yield b'{"error": "'
        for _ in range(40):
            yield b"y" * 65536
    req = urllib.request.Request(f"{server}/v1/results", data=chunks(), method="POST",
                                 headers={"Authorization": f"Bearer {TOKEN}",
                                          "Content-Type": "application/json",
                                          "Transfer-Encoding": "chunked"})
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(req, timeout=30)
    assert info.value.code == 413
    assert "at most" in json.loads(info.value.read())["detail"]


def test_a_valid_submission_is_still_stored(server: str) -> None:
    body = _nested("problem.kv_len", 2048)
    body["problem"]["q_len"] = 2048
    code, answer = _post(server, body)
    assert code == 201, answer
    assert request(f"{server}/v1/results?seq_min=2048")[1]["total"] == 1


@pytest.mark.parametrize("path", ["/healthz", "/v1/best?head_dim=128&dtype=fp16&seq=512",
                                  "/v1/results", "/"])
@pytest.mark.parametrize("host", ["attacker.example", "attacker.example:8000", "127.0.0.2",
                                  "localhost.attacker.example"])
def test_a_foreign_host_header_is_400(server: str, path: str, host: str) -> None:
    code, answer = request(f"{server}{path}", headers={"Host": host})
    assert code == 400 and "Host header" in answer["detail"] and "127.0.0.1" in answer["detail"]


def test_the_best_fast_path_checks_the_host_too(server: str) -> None:
    path = f"{server}/v1/best?head_dim=128&dtype=fp16&seq=4096"
    assert request(path)[0] in (200, 404)
    assert request(path)[0] in (200, 404)  # answered from the fast path now
    assert request(path, headers={"Host": "attacker.example"})[0] == 400


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "LOCALHOST", "[::1]:9"])
def test_loopback_names_are_answered(server: str, host: str) -> None:
    assert request(f"{server}/healthz", headers={"Host": host})[0] == 200


def test_allowed_hosts_are_configurable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("XE2TUNE_ALLOWED_HOSTS", "tuner.lab.example")
    with running_server(f"sqlite:///{tmp_path / 'a.db'}", tmp_path / "serve.log") as address:
        assert request(f"{address}/healthz", headers={"Host": "tuner.lab.example:80"})[0] == 200
        assert request(f"{address}/healthz", headers={"Host": "other.example"})[0] == 400


def test_serve_refuses_a_malformed_allowed_host() -> None:
    proc = run("serve", "--port", "0", "--allowed-host", "http://x/", "--db", "sqlite://")
    assert_one_line_error(proc, "allowed host 'http://x/'")


# -- databases ------------------------------------------------------------------------------


@pytest.fixture
def foreign_db(tmp_path: Path) -> Path:
    """Another program's SQLite file, in WAL mode like many are."""
    path = tmp_path / "crm.db"
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA journal_mode = WAL")
        db.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)")
        db.execute("INSERT INTO customers (name) VALUES ('Ada')")
    db.close()
    return path


@pytest.mark.parametrize("args", [
    ["results"], ["best", "--head-dim", "128", "--dtype", "fp16", "--seq", "512"],
    ["export"], ["migrate"], ["devices"], ["report", "--out", "REPORT"],
    ["serve", "--port", "0"],
], ids=lambda args: args[0])
def test_a_foreign_database_is_refused_and_left_untouched(foreign_db: Path, tmp_path: Path,
                                                         args: list[str]) -> None:
    before = fingerprint(foreign_db)
    args = [str(tmp_path / "r.html") if a == "REPORT" else a for a in args]
    proc = run(*args, "--db", f"sqlite:///{foreign_db}")
    assert_one_line_error(proc, "is not an xe2tune database", "customers")
    assert fingerprint(foreign_db) == before
    assert not (tmp_path / "r.html").exists()


def test_the_store_refuses_a_foreign_database_but_not_an_optuna_one(foreign_db: Path,
                                                                  tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="not an xe2tune database"):
        open_store(f"sqlite:///{foreign_db}")
    with pytest.raises(StoreError, match="not an xe2tune database"):
        migrate_database(f"sqlite:///{foreign_db}")
    with sqlite3.connect(tmp_path / "optuna.db") as db:  # optuna's own table names are ours
        db.execute("CREATE TABLE studies (study_id INTEGER PRIMARY KEY)")
    db.close()
    open_store(f"sqlite:///{tmp_path / 'optuna.db'}").close()


READERS = [
    ["results"], ["results", "--format", "json"],
    ["best", "--head-dim", "128", "--dtype", "fp16", "--seq", "512"],
    ["export"], ["report", "--out", "REPORT"],
]


@pytest.mark.parametrize("args", READERS, ids=lambda args: " ".join(args[:3]))
def test_read_only_commands_refuse_an_old_schema_and_leave_it_untouched(
        tmp_path: Path, args: list[str]) -> None:
    path = tmp_path / "old.db"
    migrate_database(f"sqlite:///{path}", "0001")
    before = fingerprint(path)
    assert before[1] == []
    args = [str(tmp_path / "r.html") if a == "REPORT" else a for a in args]
    proc = run(*args, "--db", f"sqlite:///{path}")
    assert_one_line_error(proc, "schema revision 0001", "xe2tune migrate")
    assert fingerprint(path) == before


def test_migrate_then_read(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    url = f"sqlite:///{path}"
    migrate_database(url, "0001")
    assert run("migrate", "--db", url).returncode == 0
    proc = run("results", "--db", url)
    assert proc.returncode == 0 and "0 results" in proc.stdout, proc.stderr


@pytest.mark.parametrize("args", READERS, ids=lambda args: " ".join(args[:3]))
def test_read_only_commands_never_change_a_current_database(tmp_path: Path,
                                                            args: list[str]) -> None:
    path = tmp_path / "x.db"
    store = open_store(f"sqlite:///{path}")
    tune(store, prefill(512), [ok_result(launcher_config(), 2e-3)])
    store.close()
    before = fingerprint(path)
    assert before[1] == []
    args = [str(tmp_path / "r.html") if a == "REPORT" else a for a in args]
    proc = run(*args, "--db", f"sqlite:///{path}")
    assert proc.returncode == 0, proc.stderr
    assert fingerprint(path) == before


def test_report_reads_optuna_studies_without_writing(tmp_path: Path) -> None:
    path = tmp_path / "searched.db"
    # with optuna studies beside our tables, as a search leaves them; in a process of its own,
    # which closes every connection (and so the -wal file) when it ends, as a search does
    subprocess.run([sys.executable, "-c", "import sys; from _api_fixtures import fill_database; "
                    "fill_database(sys.argv[1])", str(path)], check=True,
                   cwd=Path(__file__).parents[1], timeout=300)
    before = fingerprint(path)
    assert before[1] == []
    proc = run("report", "--out", str(tmp_path / "r.html"), "--db", f"sqlite:///{path}")
    assert proc.returncode == 0, proc.stderr
    assert fingerprint(path) == before


def test_read_only_commands_do_not_create_a_missing_database(tmp_path: Path) -> None:
    path = tmp_path / "none.db"
    assert_one_line_error(run("results", "--db", f"sqlite:///{path}"), "nothing tuned")
    assert not path.exists()


# -- replay files ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def bomb(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """50 MB of zeros, gzipped to about 50 KB."""
    path = tmp_path_factory.mktemp("bomb") / "space.json.gz"
    with gzip.open(path, "wb", compresslevel=9) as handle:
        for _ in range(50):
            handle.write(b"0" * 1_000_000)
    return path


def test_a_gzip_bomb_is_refused_quickly_with_bounded_memory(bomb: Path) -> None:
    assert bomb.stat().st_size < 200_000
    started = time.monotonic()
    proc = run("replay", "--space", str(bomb), env={"XE2TUNE_REPLAY_MAX_BYTES": "1000000"})
    assert_one_line_error(proc, "more than 1000000 bytes of JSON once decompressed")
    assert time.monotonic() - started < 60
    tracemalloc.start()
    try:
        with pytest.raises(NotARecordingError, match="more than 2000000 bytes"):
            load_recording(bomb, max_bytes=2_000_000)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8_000_000  # the cap and the decompressor's buffers, not 50 MB


def test_a_plain_file_past_the_cap_is_refused(tmp_path: Path) -> None:
    path = write_cache(tmp_path / "s.json", SYNTHETIC_PARAMS, synthetic_time)
    size = path.stat().st_size
    with pytest.raises(NotARecordingError, match=f"more than {size - 1} bytes of JSON;"):
        load_recording(path, max_bytes=size - 1)
    assert len(load_recording(path, max_bytes=size).space) > 0


def test_a_malformed_cap_is_one_line(bomb: Path) -> None:
    proc = run("replay", "--space", str(bomb), env={"XE2TUNE_REPLAY_MAX_BYTES": "lots"})
    assert_one_line_error(proc, "XE2TUNE_REPLAY_MAX_BYTES must be a positive integer")


def test_replay_reports_progress_after_every_trial(tmp_path: Path) -> None:
    recording = load_recording(write_cache(tmp_path / "s.json", SYNTHETIC_PARAMS,
                                           synthetic_time))
    ticks: list[int] = []
    run_ = replay(recording, "random", budget=25, seed=1,
                  progress=lambda: ticks.append(len(ticks) + 1))
    assert ticks == list(range(1, 26)) and len(run_.indices) == 25
