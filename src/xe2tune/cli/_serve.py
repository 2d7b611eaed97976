"""``xe2tune serve`` (REST API and live dashboard) and ``xe2tune report`` (one HTML file)."""

from __future__ import annotations

import re
from contextlib import closing
from pathlib import Path
from typing import Annotated

import typer

from xe2tune import config
from xe2tune.cli._app import app, console, fail
from xe2tune.cli._transport import InsecureOption, TlsCertOption, TlsKeyOption, is_loopback

# Binding to every interface names no host a client would use: those need --allowed-host.
WILDCARD_HOSTS = ("0.0.0.0", "::", "")
HOST_NAME = re.compile(r"[A-Za-z0-9._-]+|\[?[0-9A-Fa-f:.]+\]?")

DbOption = Annotated[str | None, typer.Option(
    "--db", help="SQLAlchemy URL of the results database (default: XE2TUNE_DB, else "
                 "xe2tune.db in the user data dir).")]


@app.command()
def serve(
    host: Annotated[str, typer.Option(help="Address to bind; loopback unless you mean it.")]
    = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535, help="TCP port (0 = any free one).")]
    = 8000,
    db: DbOption = None,
    workers: Annotated[int, typer.Option(min=1, max=64, help="Server processes.")] = 1,
    access_log: Annotated[bool, typer.Option(help="Log every request (costs throughput).")]
    = False,
    allowed_host: Annotated[list[str] | None, typer.Option(
        "--allowed-host", help="A host name clients reach the server by, besides loopback and "
                               "--host (repeatable; also XE2TUNE_ALLOWED_HOSTS).")] = None,
    grpc_port: Annotated[int | None, typer.Option(
        "--grpc-port", min=1, max=65535,
        help="Also serve the database's optuna studies through optuna's gRPC storage proxy on "
             "--host:PORT, for campaign workers without database access: every call needs "
             "XE2TUNE_API_TOKEN or a worker token; TLS with --tls-cert (needs the grpc "
             "extra).")] = None,
    tls_cert: TlsCertOption = None,
    tls_key: TlsKeyOption = None,
    tls_client_ca: Annotated[Path | None, typer.Option(
        "--tls-client-ca", help="PEM CA certificates: clients of both channels must present a "
                                "certificate it signed")] = None,
    insecure: InsecureOption = False,
) -> None:
    """Serve the REST API (/v1, OpenAPI at /docs) and the dashboard (/) on uvicorn.

    Reads the same database the tuner writes, also while a search is running. POST /v1/results
    takes XE2TUNE_API_TOKEN (when set) or a campaign's worker token. The server opens the
    database like a writer (it may store POSTed results, and switches a SQLite file to WAL so
    that it never blocks a running search): another program's database is refused, an older
    schema is migrated. Requests whose Host header is not loopback, --host or an --allowed-host
    get 400. With --tls-cert and --tls-key both channels use TLS; without them the server is
    plain text, which only a loopback --host may be (and the gRPC proxy only with --insecure).
    """
    tls = _server_tls(host, tls_cert, tls_key, tls_client_ca, insecure=insecure,
                      grpc=grpc_port is not None)
    from xe2tune.db import open_store

    # fail with one line here, not with a traceback from the lifespan
    with closing(open_store(db)) as store:
        url = store.url
    # held until uvicorn returns: a grpc.Server that is collected stops serving
    proxy = None if grpc_port is None else _start_grpc_proxy(db, host, grpc_port, tls)
    if db is not None:
        config.set_database_url(db)  # worker processes read it from the environment
    names = [*config.allowed_hosts(), *(allowed_host or [])]
    if host not in WILDCARD_HOSTS:
        names.append(host)
    for name in names:
        if not HOST_NAME.fullmatch(name):
            raise fail(f"allowed host {name!r} (--allowed-host, XE2TUNE_ALLOWED_HOSTS) is not a "
                       "host name; accepted: a DNS name or an IP address, without scheme or port")
    config.set_allowed_hosts(tuple(dict.fromkeys(names)))  # worker processes read it too
    scheme = "http" if tls is None else "https"
    console.print(f"xe2tune serving {scheme}://{host}:{port}/ (dashboard), /docs (API); "
                  f"database {url}; POST /v1/results "
                  + ("enabled" if config.api_token() else "for worker tokens only (no "
                                                         "XE2TUNE_API_TOKEN)"),
                  highlight=False, soft_wrap=True)
    import uvicorn

    uvicorn.run("xe2tune.api.main:create_asgi_app", factory=True, host=host, port=port,
                workers=workers, access_log=access_log, log_level="info", proxy_headers=False,
                timeout_graceful_shutdown=5, **(tls.uvicorn_options() if tls else {}),
                # a worker imports FastAPI, SQLAlchemy and pandas (no device runtime) and opens
                # the database before it answers: on a loaded host that can take a while
                timeout_worker_healthcheck=120)
    if proxy is not None:
        proxy.stop(grace=None)


def _server_tls(host: str, cert: Path | None, key: Path | None, client_ca: Path | None, *,
                insecure: bool, grpc: bool):  # noqa: ANN202  (ServerTls; the api loads lazily)
    """The TLS files checked, or None for plain text where that is allowed."""
    if (cert is None) != (key is None):
        raise fail("--tls-cert and --tls-key go together: the server's certificate and its key")
    if cert is None or key is None:
        if client_ca is not None:
            raise fail("--tls-client-ca goes with --tls-cert and --tls-key")
        if not is_loopback(host):
            raise fail(f"--host {host} without TLS: plain text is served on loopback only; "
                       "accepted: --tls-cert FILE --tls-key FILE, or a loopback --host")
        if grpc and not insecure:
            raise fail("--grpc-port without TLS carries tokens and studies in plain text: "
                       "accepted: --tls-cert FILE --tls-key FILE, or --insecure (loopback only)")
        return None
    if insecure:
        raise fail("--insecure and --tls-cert exclude each other")
    from xe2tune.api import ServerTls  # the API with it: after the checks that need neither

    tls = ServerTls(cert_file=cert, key_file=key, client_ca_file=client_ca)
    try:
        tls.check()
    except ValueError as exc:
        raise fail(str(exc)) from None
    return tls


def _start_grpc_proxy(db: str | None, host: str, port: int, tls):  # noqa: ANN001, ANN202
    """optuna's gRPC storage proxy for the database, behind the token gate, on threads of this
    process (its store stays open while the process runs)."""
    from xe2tune.api import start_grpc_proxy
    from xe2tune.db import open_store

    store = open_store(db)
    try:
        server = start_grpc_proxy(store, host=host, port=port, tls=tls,
                                  api_token=config.api_token())
    except ImportError as exc:
        store.close()
        raise fail(f"--grpc-port needs grpcio and protobuf ({exc.name} is missing); install "
                   "them with pip install 'xe2tune[grpc]'") from None
    except RuntimeError as exc:
        store.close()
        raise fail(f"--grpc-port {port}: {exc}") from None
    console.print(f"optuna gRPC storage proxy on {host}:{port} "
                  f"({'TLS' if tls else 'plain text, loopback'}; every call needs a token)",
                  highlight=False)
    return server


@app.command()
def report(
    out: Annotated[Path, typer.Option("--out", help="HTML file to write.")],
    db: DbOption = None,
) -> None:
    """Write the dashboard's views (roofline, best configs, studies) as one offline HTML file."""
    from xe2tune.dashboards import report_html
    from xe2tune.db import open_store

    if out.is_dir():
        raise fail(f"--out {out} is a directory; accepted: a file path such as report.html")
    if not out.parent.is_dir():
        raise fail(f"--out {out}: directory {out.parent} does not exist")
    with closing(open_store(db, read_only=True)) as store:
        html = report_html(store)
    out.write_text(html, encoding="utf-8")
    console.print(f"wrote {out} ({len(html) / 1e6:.1f} MB, self-contained)", highlight=False)
