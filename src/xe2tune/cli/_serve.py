"""``xe2tune serve`` (REST API and live dashboard) and ``xe2tune report`` (one HTML file)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from xe2tune import config
from xe2tune.cli._app import app, console, fail

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
) -> None:
    """Serve the REST API (/v1, OpenAPI at /docs) and the dashboard (/) on uvicorn.

    Reads the same database the tuner writes, also while a search is running. POST /v1/results
    is enabled only when XE2TUNE_API_TOKEN is set.
    """
    import uvicorn

    from xe2tune.db import open_store

    store = open_store(db)  # fail with one line here, not with a traceback from the lifespan
    url = store.url
    store.close()
    if db is not None:
        config.set_database_url(db)  # worker processes read it from the environment
    console.print(f"xe2tune serving http://{host}:{port}/ (dashboard), /docs (API); "
                  f"database {url}; POST /v1/results "
                  + ("enabled" if config.api_token() else "disabled (no XE2TUNE_API_TOKEN)"),
                  highlight=False, soft_wrap=True)
    uvicorn.run("xe2tune.api.main:create_asgi_app", factory=True, host=host, port=port,
                workers=workers, access_log=access_log, log_level="info", proxy_headers=False,
                timeout_graceful_shutdown=5,
                # a worker imports the SYCL runtime and pandas first: give it time to answer
                timeout_worker_healthcheck=120)


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
    store = open_store(db)
    try:
        html = report_html(store)
    finally:
        store.close()
    out.write_text(html, encoding="utf-8")
    console.print(f"wrote {out} ({len(html) / 1e6:.1f} MB, self-contained)", highlight=False)
