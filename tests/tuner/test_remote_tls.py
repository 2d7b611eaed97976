"""The remote path over TLS with tokens, on real processes: the README's own commands.

One ``xe2tune serve`` (HTTPS and the gRPC proxy, client certificates required) runs for the
module on a PostgreSQL database holding two one-problem campaigns. Its certificates come from the
README's openssl block, run as written; a second run of that block in another directory makes a
foreign CA with certificates of its own. The README's command block is run line by line through
bash (``TUNER=localhost``, free ports in place of 8443 and 13000): mint a token, serve, run a
worker that completes campaign 1 over TLS, list and revoke the token, and see the same worker
line refused. The refusals of both channels are then asserted on the database: no trial, study
attribute or result created or changed.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import shutil
import signal
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import optuna
import pytest
from optuna.study import StudyDirection
from sqlalchemy import create_engine, text

from tests._api_fixtures import free_port, launcher_config, submission_payload, xe2tune_command
from tests._stated_ceilings import store_stated_ceilings
from xe2tune.db import CampaignStore, WorkerTokenStore, open_store
from xe2tune.tuner._grpc_client import ClientTls, TokenGrpcStorage

ROOT = Path(__file__).resolve().parents[2]
PROBLEM = ["--head-dim", "64", "--mode", "decode", "--dtype", "fp16", "--heads-q", "4",
           "--heads-kv", "2"]
BUDGET = 2
UNREACHABLE_DB = "postgresql+psycopg://nobody@127.0.0.1:1/unreachable"

pytestmark = pytest.mark.requires_xpu  # the worker measures on opencl:cpu


def readme_blocks() -> tuple[str, list[str]]:
    """The remote section's certificate block, and its command lines (comments dropped)."""
    section = (ROOT / "README.md").read_text().split("## Tuning on many hosts", 1)[1]
    blocks = re.findall(r"```bash\n(.*?)```", section, re.S)
    (certs,) = [b for b in blocks if "openssl req -x509" in b]
    (commands,) = [b for b in blocks if "campaign token create" in b]
    return certs, [line for line in commands.splitlines()
                   if line.strip() and not line.startswith("#")]


def line_with(lines: list[str], words: str) -> str:
    (found,) = [line for line in lines if words in line]
    return found


@dataclass
class Remote:
    """The running server and what the tests need to reach it."""

    url: str
    home: Path  # where the README's commands run: tls/, worker-1.token
    foreign: Path  # the same certificate block run again: another CA
    env: dict[str, str]
    lines: list[str]
    api: str
    grpc_port: int
    campaign_study: str  # the optuna study holding campaign 1's definition

    def tls(self, ca: Path | None = None, cert: Path | None = None,
            key: Path | None = None) -> ClientTls:
        return ClientTls(ca_file=ca, cert_file=cert, key_file=key)

    def worker_tls(self) -> ClientTls:
        tls = self.home / "tls"
        return self.tls(tls / "ca.pem", tls / "worker.pem", tls / "worker.key")

    def bash(self, line: str, *, env: dict[str, str] | None = None,
             timeout: float = 120) -> subprocess.CompletedProcess:
        return subprocess.run(["bash", "-c", line], cwd=self.home, env=env or self.env,
                              capture_output=True, text=True, timeout=timeout)


def with_ports(line: str, api_port: int, grpc_port: int) -> str:
    return line.replace("8443", str(api_port)).replace("13000", str(grpc_port))


def make_certificates(certs: str, where: Path, env: dict[str, str]) -> None:
    if shutil.which("openssl") is None:
        pytest.skip("the README makes its test CA with the openssl command, not found here")
    where.mkdir()
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", certs], cwd=where, env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def wait_for_https(api: str, context: ssl.SSLContext, server: subprocess.Popen,
                   log: Path) -> None:
    deadline = time.monotonic() + 120
    while True:
        try:
            with urllib.request.urlopen(f"{api}/healthz", timeout=2, context=context):
                return
        except OSError:
            assert server.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.3)


@pytest.fixture(scope="module")
def remote(module_postgres_url: str, cpu_queue,
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[Remote]:
    url = module_postgres_url
    store_stated_ceilings(url, cpu_queue)
    for name, seq in (("near", "64"), ("far", "128")):  # campaign 1, then 2
        created = subprocess.run(
            [xe2tune_command(), "campaign", "create", *PROBLEM, "--seq", seq, "--trials",
             str(BUDGET), "--confirm-rounds", "1", "--sampler", "random", "--name", name,
             "--db", url], capture_output=True, text=True, timeout=120)
        assert created.returncode == 0, created.stderr
    base = tmp_path_factory.mktemp("remote")
    api_port, grpc_port = free_port(), free_port()
    env = {k: v for k, v in os.environ.items()
           if k not in ("XE2TUNE_API_TOKEN", "XE2TUNE_WORKER_TOKEN")}
    env.update(TUNER="localhost", XE2TUNE_DB=url, XE2TUNE_DEVICE="opencl:cpu",
               PATH=f"{Path(xe2tune_command()).parent}:{env.get('PATH', '')}")
    certs, lines = readme_blocks()
    make_certificates(certs, base / "home", env)
    make_certificates(certs, base / "foreign", env)
    remote = Remote(url=url, home=base / "home", foreign=base / "foreign", env=env,
                    lines=[with_ports(line, api_port, grpc_port) for line in lines],
                    api=f"https://localhost:{api_port}", grpc_port=grpc_port,
                    campaign_study="xe2tune campaign 1")
    minted = remote.bash(line_with(remote.lines, "token create"))
    assert minted.returncode == 0, minted.stderr
    log = base / "serve.log"
    with log.open("w") as out:
        server = subprocess.Popen(["bash", "-c", "exec " + line_with(remote.lines, "serve")],
                                  cwd=remote.home, env=env, stdout=out,
                                  stderr=subprocess.STDOUT)
    try:
        wait_for_https(remote.api, remote.worker_tls().ssl_context(), server, log)
        yield remote
    finally:
        server.send_signal(signal.SIGINT)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


# -- what the database holds ---------------------------------------------------------------


def snapshot(url: str) -> dict[str, list]:
    """Every optuna study, trial and attribute and every stored result (ids and states)."""
    engine = create_engine(url)
    queries = {
        "studies": "SELECT study_id, study_name FROM studies ORDER BY study_id",
        "study attrs": "SELECT study_id, key, value_json FROM study_user_attributes "
                       "ORDER BY study_id, key",
        "trials": "SELECT trial_id, study_id, state FROM trials ORDER BY trial_id",
        "trial attrs": "SELECT trial_id, key, value_json FROM trial_user_attributes "
                       "ORDER BY trial_id, key",
        "results": "SELECT id, study_id, config_hash FROM xe2t_trials ORDER BY id",
    }
    try:
        with engine.connect() as connection:
            return {name: [tuple(r) for r in connection.execute(text(sql))]
                    for name, sql in queries.items()}
    finally:
        engine.dispose()


def tokens(url: str) -> tuple[str, str, str]:
    """A live token of campaign 1, a revoked one of campaign 1, and a live one of campaign 2."""
    store = open_store(url)
    try:
        minted = WorkerTokenStore(store)
        live = minted.create(1, "live").secret
        revoked = minted.create(1, "revoked")
        minted.revoke(1, revoked.record.id)
        return live, revoked.secret, minted.create(2, "other campaign").secret
    finally:
        store.close()


def study_id(url: str, name: str) -> int:
    return optuna.storages.RDBStorage(url, skip_table_creation=True).get_study_id_from_name(name)


# -- the README's commands -----------------------------------------------------------------


def test_readme_commands_run_a_campaign_over_tls_and_a_revoked_worker_is_refused(
        remote: Remote) -> None:
    worker_line = line_with(remote.lines, "xe2tune worker")
    # The worker host has no database: its own setting points nowhere.
    worker_env = {**remote.env, "XE2TUNE_DB": UNREACHABLE_DB}
    done = remote.bash(worker_line, env=worker_env, timeout=600)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr

    studies = {s.study_name: s for s in optuna.get_all_study_summaries(remote.url)}
    (device_study,) = [name for name in studies if name.startswith("xe2tune|")]
    trials = optuna.load_study(study_name=device_study, storage=remote.url).get_trials()
    assert len(trials) == BUDGET
    assert all(t.state is optuna.trial.TrialState.COMPLETE for t in trials), trials
    assert len(snapshot(remote.url)["results"]) == BUDGET  # stored through POST /v1/results

    listed = remote.bash(line_with(remote.lines, "token list"))
    assert listed.returncode == 0 and "worker-1" in listed.stdout, listed.stderr
    revoked = remote.bash(line_with(remote.lines, "token revoke"))
    assert revoked.returncode == 0 and "revoked" in revoked.stdout, revoked.stderr

    before = snapshot(remote.url)
    again = remote.bash(worker_line, env=worker_env, timeout=300)
    assert again.returncode == 2 and "PERMISSION_DENIED" in again.stderr, again.stderr
    assert len(again.stderr.strip().splitlines()) == 1, again.stderr
    assert snapshot(remote.url) == before


# -- refusals on the gRPC channel ----------------------------------------------------------


def grpc_writes(storage: TokenGrpcStorage, target: int) -> list[Callable[[], object]]:
    """Calls that would change the database: a trial, a study attribute, a study."""
    return [lambda: storage.create_new_trial(target),
            lambda: storage.set_study_user_attr(target, "intruder", True),
            lambda: storage.create_new_study([StudyDirection.MINIMIZE], "intruder")]


def refused_code(call: Callable[[], object]) -> grpc.StatusCode:
    with pytest.raises(grpc.RpcError) as refused:
        call()
    return refused.value.code()


def test_grpc_refuses_calls_without_a_live_token_or_tls_and_changes_nothing(
        remote: Remote) -> None:
    live, revoked, _ = tokens(remote.url)
    target = study_id(remote.url, remote.campaign_study)
    home, foreign = remote.home / "tls", remote.foreign / "tls"
    good = remote.worker_tls()

    def storage(token: str | None, tls: ClientTls | None) -> TokenGrpcStorage:
        return TokenGrpcStorage(host="localhost", port=remote.grpc_port, token=token, tls=tls)

    # the control: a live token over TLS reaches its campaign's study
    assert storage(live, good).get_study_name_from_id(target) == remote.campaign_study
    before = snapshot(remote.url)
    cases = {
        "no token": (None, good, grpc.StatusCode.UNAUTHENTICATED),
        "a wrong token": ("xe2t_not-a-token", good, grpc.StatusCode.UNAUTHENTICATED),
        "a revoked token": (revoked, good, grpc.StatusCode.PERMISSION_DENIED),
        "no TLS": (live, None, grpc.StatusCode.UNAVAILABLE),
        "no client certificate": (live, remote.tls(home / "ca.pem"),
                                  grpc.StatusCode.UNAVAILABLE),
        "a client certificate of another CA": (
            live, remote.tls(home / "ca.pem", foreign / "worker.pem", foreign / "worker.key"),
            grpc.StatusCode.UNAVAILABLE),
        "the server checked against another CA": (
            live, remote.tls(foreign / "ca.pem", home / "worker.pem", home / "worker.key"),
            grpc.StatusCode.UNAVAILABLE),
    }
    for case, (token, tls, expected) in cases.items():
        client = storage(token, tls)
        for call in grpc_writes(client, target):
            assert refused_code(call) == expected, case
        client.close()
    assert snapshot(remote.url) == before


def test_a_worker_token_reaches_only_its_campaigns_studies(remote: Remote) -> None:
    live, _, other = tokens(remote.url)
    far = study_id(remote.url, "xe2tune campaign 2")
    # a trial of campaign 2's study, made on the database side
    trial_id = optuna.storages.RDBStorage(remote.url, skip_table_creation=True) \
        .create_new_trial(far)
    client = TokenGrpcStorage(host="localhost", port=remote.grpc_port, token=live,
                              tls=remote.worker_tls())
    before = snapshot(remote.url)
    denied = [*grpc_writes(client, far),
              lambda: client.set_trial_user_attr(trial_id, "intruder", True),
              lambda: client.set_trial_state_values(trial_id, optuna.trial.TrialState.FAIL),
              lambda: client.get_study_user_attrs(far),
              lambda: client.get_all_studies(),
              lambda: client.delete_study(study_id(remote.url, remote.campaign_study))]
    for call in denied:
        assert refused_code(call) == grpc.StatusCode.PERMISSION_DENIED
    assert snapshot(remote.url) == before
    # campaign 2's own token reaches that trial
    TokenGrpcStorage(host="localhost", port=remote.grpc_port, token=other,
                     tls=remote.worker_tls()).set_trial_user_attr(trial_id, "owner", "far")


# -- refusals on the HTTPS channel ---------------------------------------------------------


def post(remote: Remote, body: dict, token: str | None,
         context: ssl.SSLContext | None, scheme: str = "https") -> int:
    headers = {"Content-Type": "application/json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(
        remote.api.replace("https", scheme) + "/v1/results", method="POST", headers=headers,
        data=json.dumps(body).encode())
    try:
        with urllib.request.urlopen(request, timeout=30, context=context) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


def test_post_results_refuses_without_a_live_token_or_tls_and_stores_nothing(
        remote: Remote) -> None:
    live, revoked, _ = tokens(remote.url)
    store = open_store(remote.url)
    try:
        near, far = (CampaignStore(store).get(i).problems[0] for i in (1, 2))
    finally:
        store.close()
    config = launcher_config(near.head_dim, 64, 64, 1, 4)
    body, elsewhere = (submission_payload(p, config, 0.3) for p in (near, far))
    home, foreign = remote.home / "tls", remote.foreign / "tls"
    good = remote.worker_tls().ssl_context()
    before = snapshot(remote.url)
    assert post(remote, body, None, good) == 401
    assert post(remote, body, "xe2t_not-a-token", good) == 403
    assert post(remote, body, revoked, good) == 403
    assert post(remote, elsewhere, live, good) == 403  # a problem of another campaign
    failing_contexts = {
        "no client certificate": remote.tls(home / "ca.pem"),
        "a client certificate of another CA": remote.tls(home / "ca.pem", foreign / "worker.pem",
                                                         foreign / "worker.key"),
        "the server checked against another CA": remote.tls(
            foreign / "ca.pem", home / "worker.pem", home / "worker.key"),
    }
    for case, tls in failing_contexts.items():
        with pytest.raises((OSError, http.client.HTTPException)):
            post(remote, body, live, tls.ssl_context())
            pytest.fail(case)
    with pytest.raises((OSError, http.client.HTTPException)):
        post(remote, body, live, None, scheme="http")  # plain HTTP to the TLS port
    assert snapshot(remote.url) == before


# -- plain text only on loopback, bad files: one line before anything listens --------------


def test_plain_text_and_bad_tls_files_are_refused_with_one_line(remote: Remote) -> None:
    tls = remote.home / "tls"
    grpc_at, api_at = f"localhost:{free_port()}", f"localhost:{free_port()}"
    token_env = {**remote.env, "XE2TUNE_WORKER_TOKEN": "xe2t_any"}
    cases = [
        (["serve", "--host", "0.0.0.0", "--port", "0"], remote.env,
         "plain text is served on loopback only"),
        (["serve", "--port", "0", "--grpc-port", str(free_port())], remote.env,
         "--grpc-port without TLS"),
        (["serve", "--port", "0", "--tls-cert", str(tls / "server.pem"), "--tls-key",
          str(tls / "worker.key")], remote.env, "--tls-key"),
        (["serve", "--port", "0", "--tls-cert", str(tls / "missing.pem"), "--tls-key",
          str(tls / "server.key")], remote.env, "no such file"),
        (["worker", "--campaign", "1", "--grpc", grpc_at, "--api", f"http://{api_at}"],
         token_env, "is plain HTTP"),
        (["worker", "--campaign", "1", "--grpc", "tuner.lab:13000", "--api",
          "http://tuner.lab:8443", "--insecure"], token_env, "plain text only to loopback"),
        (["worker", "--campaign", "1", "--grpc", grpc_at, "--api", f"https://{api_at}",
          "--tls-ca", str(tls / "ca.pem")], remote.env, "no credential"),
        (["worker", "--campaign", "1", "--grpc", grpc_at, "--api", f"https://{api_at}",
          "--tls-ca", str(tls / "missing.pem")], token_env, "no such file"),
    ]
    for args, env, expected in cases:
        done = subprocess.run([xe2tune_command(), *args], capture_output=True, text=True,
                              env=env, timeout=120)
        assert done.returncode == 2 and expected in done.stderr, (args, done.stderr)
        assert len(done.stderr.strip().splitlines()) == 1, (args, done.stderr)
