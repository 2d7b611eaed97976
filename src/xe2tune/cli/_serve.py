"""``xe2tune serve`` (REST API and live dashboard) and ``xe2tune report`` (one HTML file)."""

from __future__ import annotations

import re
from contextlib import closing
from pathlib import Path
from typing import Annotated

import typer

from xe2tune import config
from xe2tune.cli._app import app, console, fail

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
             "--host:PORT, for campaign workers without database access (no authentication: "
             "a trusted network only; needs the grpc extra).")] = None,
) -> None:
    """Serve the REST API (/v1, OpenAPI at /docs) and the dashboard (/) on uvicorn.

    Reads the same database the tuner writes, also while a search is running. POST /v1/results
    is enabled only when XE2TUNE_API_TOKEN is set. The server opens the database like a writer
    (it may store POSTed results, and switches a SQLite file to WAL so that it never blocks a
    running search): another program's database is refused, an older schema is migrated.
    Requests whose Host header is not loopback, --host or an --allowed-host get 400.
    """
    import uvicorn

    from xe2tune.db import open_store

    # fail with one line here, not with a traceback from the lifespan
    with closing(open_store(db)) as store:
        url = store.url
        if grpc_port is not None:
            _start_grpc_proxy(store.optuna_storage_url(), host, grpc_port)
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
    console.print(f"xe2tune serving http://{host}:{port}/ (dashboard), /docs (API); "
                  f"database {url}; POST /v1/results "
                  + ("enabled" if config.api_token() else "disabled (no XE2TUNE_API_TOKEN)"),
                  highlight=False, soft_wrap=True)
    uvicorn.run("xe2tune.api.main:create_asgi_app", factory=True, host=host, port=port,
                workers=workers, access_log=access_log, log_level="info", proxy_headers=False,
                timeout_graceful_shutdown=5,
                # a worker imports FastAPI, SQLAlchemy and pandas (no device runtime) and opens
                # the database before it answers: on a loaded host that can take a while
                timeout_worker_healthcheck=120)


def _start_grpc_proxy(storage_url: str, host: str, port: int) -> None:
    """optuna's gRPC storage proxy for the database, on a thread of this process."""
    import threading

    import optuna

    try:
        from optuna.storages import run_grpc_proxy_server
        storage = optuna.storages.get_storage(storage_url)
        import grpc  # noqa: F401  (optuna imports it only when the server starts)
    except ImportError as exc:
        raise fail(f"--grpc-port needs grpcio and protobuf ({exc.name} is missing); install "
                   "them with pip install 'xe2tune[grpc]'") from None
    threading.Thread(target=run_grpc_proxy_server, args=(storage,),
                     kwargs={"host": host, "port": port}, name="xe2tune-grpc-proxy",
                     daemon=True).start()
    console.print(f"optuna gRPC storage proxy on {host}:{port}", highlight=False)


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
