"""``xe2tune worker --campaign N``: tune a campaign's studies of this device with other workers."""

from __future__ import annotations

import json
import os
import ssl
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from xe2tune.cli._app import app, console, err_console, fail
from xe2tune.cli._campaign import CampaignOption
from xe2tune.cli._devices import DbOption, DeviceOption, JsonOption
from xe2tune.cli._problem_text import head_words
from xe2tune.cli._stop import StopOnSignal
from xe2tune.cli._transport import InsecureOption, TlsCertOption, TlsKeyOption, is_loopback

if TYPE_CHECKING:
    from xe2tune.tuner import ClientTls


@app.command()
def worker(
    campaign: CampaignOption,
    db: DbOption = None,
    device: DeviceOption = None,
    follow: Annotated[bool, typer.Option(
        "--follow", help="keep polling for work when the budgets are spent (until Ctrl-C)")]
    = False,
    seed: Annotated[int | None, typer.Option(help="sampler seed")] = None,
    grpc: Annotated[str | None, typer.Option(
        "--grpc", help="HOST:PORT of an `xe2tune serve --grpc-port`: reach the studies through "
                       "optuna's gRPC storage proxy instead of the database (needs --api)")] = None,
    api: Annotated[str | None, typer.Option(
        "--api", help="with --grpc: https:// base URL of that `xe2tune serve`; measurements are "
                      "stored through its POST /v1/results; both channels present "
                      "XE2TUNE_WORKER_TOKEN (else XE2TUNE_API_TOKEN)")] = None,
    tls_ca: Annotated[Path | None, typer.Option(
        "--tls-ca", help="with --grpc: PEM CA certificates the server's certificate must chain "
                         "to (default: the system's CAs)")] = None,
    tls_cert: TlsCertOption = None,
    tls_key: TlsKeyOption = None,
    insecure: InsecureOption = False,
    stale_after: Annotated[float | None, typer.Option(
        "--stale-after", help="with --grpc: seconds without a heartbeat after which a running "
                              "trial's worker counts as dead and the trial is re-run (default "
                              "60; at least 15, heartbeats come every 5 s)")] = None,
    as_json: JsonOption = False,
    quiet: Annotated[bool, typer.Option("--quiet", help="no progress output")] = False,
) -> None:
    """Take the next trial of a campaign study of this device (name, driver, compute units;
    identical devices share studies), run it in the isolated trial runner, store it, and repeat
    until the campaign's budgets are spent. Ctrl-C or SIGTERM returns the trial in flight to the
    pool; a worker killed outright has its trial re-run by another."""
    if grpc is not None or api is not None:
        if grpc is None or api is None:
            raise fail("--grpc and --api go together: the studies through the proxy, the "
                       "measurements through the API")
        # grpcio turns its fork handlers on by default: they run in the child of every fork,
        # also the trial runner's fork-and-exec of a fresh interpreter, and abort that child
        # while a channel is polling ("epoll_wait error: Bad file descriptor", SIGABRT; seen
        # under load). Nothing here forks to keep using gRPC in the child, so they stay off.
        # Read when grpc starts, so set before grpc is imported.
        os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")
        stale = _stale_after(stale_after)
        channel = _channel(grpc, api, tls_ca, tls_cert, tls_key, insecure=insecure)
        _remote_worker(campaign, channel, device=device, follow=follow, seed=seed,
                       stale_after=stale, as_json=as_json, quiet=quiet)
        return
    if stale_after is not None:
        raise fail("--stale-after goes with --grpc: database workers hold leases instead")
    if insecure or tls_ca or tls_cert or tls_key:
        raise fail("--tls-ca, --tls-cert, --tls-key and --insecure go with --grpc: a database "
                   "worker talks to the database only")
    from xe2tune.cli._problem_options import CPU_BENCH_BUDGET_S, GPU_BENCH_BUDGET_S
    from xe2tune.cli._session import open_runner, open_session
    from xe2tune.db import CampaignStore, open_store
    from xe2tune.harness import BenchSettings
    from xe2tune.tuner import run_worker

    quiet = quiet or as_json
    store = open_store(db)
    campaigns = CampaignStore(store)
    try:
        record = campaigns.get(campaign)
        session = open_session(device, store, quiet=quiet)
    except BaseException:
        store.close()
        raise
    on_gpu = session.caps.device_type == "gpu"
    runner = open_runner(session, BenchSettings(
        time_budget_s=GPU_BENCH_BUDGET_S if on_gpu else CPU_BENCH_BUDGET_S))
    if not quiet:
        err_console.print(f"worker on campaign {record.id} ({record.name}): device "
                          f"{session.listing.filter_string} ({session.caps.name}, driver "
                          f"{session.listing.driver_version}, {session.caps.compute_units} "
                          f"compute units); database {store.url}", highlight=False)
    stop = StopOnSignal(runner)

    def observe(progress) -> None:  # noqa: ANN001  (StudyProgress; the tuner loads lazily)
        if not quiet and progress.phase == "measured" and progress.config is not None:
            p = progress.problem
            best = progress.best.median_s if progress.best else None
            console.print(f"{p.mode} {head_words(p)} kv={p.kv_len} causal={p.causal}: trial "
                          f"measured, best {'-' if best is None else f'{best * 1e3:.4g} ms'}",
                          highlight=False)

    try:
        with stop:
            tally = run_worker(record, store=store, campaigns=campaigns, runner=runner,
                               listing=session.listing, device_id=session.device_id,
                               observe=observe, should_stop=stop.requested, follow=follow,
                               seed=seed)
    finally:
        runner.close()
        store.close()
    summary = {
        "campaign": record.id, "owner": tally.owner,
        "measured": sum(tally.measured.values()), "reused": sum(tally.reused.values()),
        "failed": sum(tally.failed.values()), "confirmed": len(tally.confirmed),
        "skipped": {p.key(): reason for p, reason in tally.skipped.items()},
        "stopped": stop.requested(),
    }
    if as_json:
        print(json.dumps(summary, indent=2))
    elif not quiet:
        console.print(f"worker done: {summary['measured']} trials measured, "
                      f"{summary['reused']} reused, {summary['failed']} failed, "
                      f"{summary['confirmed']} studies confirmed", highlight=False)
    if stop.requested():
        raise typer.Exit(128 + stop.signum)


@dataclass(frozen=True)
class _Channel:
    """Where a remote worker connects and how: the proxy, the API, TLS (None: plain text to
    loopback), the credential both channels present."""

    grpc: str
    host: str
    port: int
    api: str
    tls: ClientTls | None
    context: ssl.SSLContext | None
    token: str


def _grpc_address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise fail(f"--grpc {text!r}: accepted: HOST:PORT, e.g. tuner.lab:13000")
    return host.strip("[]"), int(port)


def _channel(grpc: str, api: str, ca: Path | None, cert: Path | None, key: Path | None, *,
             insecure: bool) -> _Channel:
    """The remote channels checked: TLS unless --insecure, which loopback alone may use."""
    from xe2tune import config

    host, port = _grpc_address(grpc)
    parsed = urllib.parse.urlsplit(api)
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise fail(f"--api {api!r}: accepted: https://HOST:PORT of an `xe2tune serve`")
    token = config.worker_token()
    if not token:
        raise fail("no credential for the server: set XE2TUNE_WORKER_TOKEN (`xe2tune campaign "
                   "token create` on the database host) or XE2TUNE_API_TOKEN")
    if insecure:
        if ca or cert or key:
            raise fail("--insecure excludes --tls-ca, --tls-cert and --tls-key")
        if parsed.scheme != "http":
            raise fail(f"--insecure goes with an http:// --api, not {api!r}")
        for option, name in (("--grpc", host), ("--api", parsed.hostname)):
            if not is_loopback(name):
                raise fail(f"--insecure: plain text only to loopback, and {option} names "
                           f"{name}; accepted: TLS (https:// and --tls-ca) to another host")
        return _Channel(grpc, host, port, api, None, None, token)
    if parsed.scheme != "https":
        raise fail(f"--api {api!r} is plain HTTP: accepted: https://HOST:PORT (with --tls-ca), "
                   "or --insecure to a loopback server")
    from xe2tune.tuner import ClientTls  # with grpc and optuna: after the checks needing none

    tls = ClientTls(ca_file=ca, cert_file=cert, key_file=key)
    try:
        context = tls.ssl_context()
    except ValueError as exc:
        raise fail(str(exc)) from None
    return _Channel(grpc, host, port, api, tls, context, token)


def _stale_after(seconds: float | None) -> float | None:
    """--stale-after checked (None: the tuner's default, which loads with the tuner)."""
    if seconds is None:
        return None
    from xe2tune.tuner import MIN_STALE_S

    if not MIN_STALE_S <= seconds <= 86400:
        raise fail(f"--stale-after {seconds:g}: accepted: {MIN_STALE_S:g} to 86400 seconds")
    return seconds


def _api_peaks(channel: _Channel, name: str, driver: str, compute_units: int):  # noqa: ANN202
    """The device's peaks as the server's database knows them (measured, else catalog), or
    None."""
    import urllib.request

    from xe2tune.harness import DevicePeaks

    api = channel.api
    try:
        with urllib.request.urlopen(api.rstrip("/") + "/v1/devices", timeout=60,
                                    context=channel.context) as response:
            devices = json.loads(response.read())
    except (OSError, ValueError) as exc:
        raise fail(f"cannot read {api}/v1/devices: {exc}") from None
    for d in devices:
        if (d["name"], d["driver"], d["compute_units"]) == (name, driver, compute_units) \
                and d["peak_flops"] and d.get("peak_bandwidth"):
            return DevicePeaks(flops=d["peak_flops"], bandwidth=d["peak_bandwidth"],
                               source=d.get("peak_source") or "catalog")
    return None


def _remote_worker(campaign: int, channel: _Channel, *, device: str | None, follow: bool,
                   seed: int | None, stale_after: float | None, as_json: bool,
                   quiet: bool) -> None:
    """The worker on a host without database access (see tuner/_remote_worker.py); a refusal
    of the proxy (a revoked token, say) ends it with one line."""
    import grpc

    try:
        _run_remote_worker(campaign, channel, device=device, follow=follow, seed=seed,
                           stale_after=stale_after, as_json=as_json, quiet=quiet)
    except grpc.RpcError as exc:  # every RpcError of a call is also a grpc.Call
        raise fail(f"the gRPC proxy at {channel.grpc} refused: {exc.code().name}: "
                   f"{exc.details()}") from None


def _run_remote_worker(campaign: int, channel: _Channel, *, device: str | None, follow: bool,
                       seed: int | None, stale_after: float | None, as_json: bool,
                       quiet: bool) -> None:
    import socket
    import uuid

    from xe2tune.cli._problem_options import CPU_BENCH_BUDGET_S, GPU_BENCH_BUDGET_S
    from xe2tune.cli._session import DeviceSession, device_record, listing_for, open_runner
    from xe2tune.harness import (
        BenchSettings,
        catalog_peaks,
        measure_ceilings,
        open_queue,
    )
    from xe2tune.kernels import family_source_hash, search_family
    from xe2tune.tuner import (
        STALE_S,
        RemoteStudy,
        ResultPoster,
        TokenGrpcStorage,
        WorkerReport,
        load_campaign,
        run_remote_worker,
        unfit_reason,
    )

    grpc, api = channel.grpc, channel.api
    stale_after = STALE_S if stale_after is None else stale_after

    def make_storage() -> TokenGrpcStorage:
        return TokenGrpcStorage(host=channel.host, port=channel.port, token=channel.token,
                                tls=channel.tls)

    storage = make_storage()
    try:
        storage.wait_server_ready(timeout=30)
    except ConnectionError as exc:
        raise fail(f"no optuna gRPC storage proxy at {grpc} ({type(exc).__name__}); start one "
                   "with `xe2tune serve --grpc-port PORT` (over TLS: its certificate must "
                   "chain to --tls-ca and name the host, and with --tls-client-ca it needs "
                   "--tls-cert)") from None
    record = load_campaign(storage, campaign)
    queue = open_queue(device)
    listing = listing_for(queue)
    llc = listing.global_mem_cache_bytes
    peaks = (_api_peaks(channel, listing.caps.name, listing.driver_version,
                        listing.caps.compute_units)
             or catalog_peaks(listing.caps.name))
    if peaks is None:
        if not quiet:
            err_console.print(f"no peaks known for {listing.caps.name}: measuring its ceilings")
        peaks = measure_ceilings(queue, llc_bytes=llc).peaks(llc)
    # No store id: this worker stores nothing itself, the API does.
    session = DeviceSession(queue=queue, listing=listing, device_id=0, peaks=peaks)
    on_gpu = session.caps.device_type == "gpu"
    runner = open_runner(session, BenchSettings(
        time_budget_s=GPU_BENCH_BUDGET_S if on_gpu else CPU_BENCH_BUDGET_S))
    owner = f"{os.getpid()}-{uuid.uuid4().hex[:12]}@{socket.gethostname()}"[:64]
    this_device = device_record(listing, peaks)
    poster = ResultPoster(api, channel.token, channel.context)
    stop = StopOnSignal(runner)
    try:
        with stop:
            report = WorkerReport(storage, record.id, owner=owner, host=socket.gethostname(),
                                  pid=os.getpid(), device=this_device,
                                  stale_after_s=stale_after)
            studies, skipped = [], {}
            for problem in record.problems:
                reason = unfit_reason(problem, listing)
                if reason is not None:
                    skipped[problem.key()] = reason
                    continue
                family = search_family(problem, listing.caps)
                studies.append(RemoteStudy(
                    make_storage=make_storage, campaign=record, family=family, problem=problem,
                    caps=listing.caps, source_hash=family_source_hash(family),
                    device=this_device, runner=runner, poster=poster, report=report,
                    owner=owner, seed=seed, stale_after_s=stale_after))
            ran = run_remote_worker(studies, report, should_stop=stop.requested,
                                    follow=follow)
    finally:
        runner.close()
    summary = {"campaign": record.id, "owner": owner, "measured": ran, "skipped": skipped,
               "stopped": stop.requested()}
    if as_json:
        print(json.dumps(summary, indent=2))
    elif not quiet:
        console.print(f"worker done: {ran} trials measured through {grpc}, stored through {api}",
                      highlight=False)
    if stop.requested():
        raise typer.Exit(128 + stop.signum)
