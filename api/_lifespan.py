"""The app's lifetime: open the store, keep the ``/v1/best`` index fresh, close on shutdown."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress

from fastapi import FastAPI
from fastapi.concurrency import run_in_threadpool

from xe2tune.api._index import BestIndex
from xe2tune.dashboards import open_dashboard_views
from xe2tune.db import default_database_url, open_store
from xe2tune.errors import StoreError

log = logging.getLogger("xe2tune.api")


async def _poll(index: BestIndex, every_s: float) -> None:
    """Refresh the index whenever the store's data version moves; survive database hiccups."""
    while True:
        await asyncio.sleep(every_s)
        try:
            await run_in_threadpool(index.refresh)
        except StoreError as exc:
            log.warning("index refresh failed, keeping the previous answers: %s", exc)


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    """Open the database named by the app's settings for the app's lifetime.

    Raises:
        StoreError: the database cannot be opened; the server does not start.
    """
    settings = app.state.settings
    store = open_store(settings.db_url)
    index = BestIndex(store)
    try:
        index.refresh()
        app.state.store = store
        app.state.best_index = index
        # computed ahead (the page never waits for a recompute), in a process of its own
        dashboard = app.state.dashboard = await run_in_threadpool(
            open_dashboard_views, store, settings.db_url or default_database_url(),
            settings.index_poll_s)
        poller = asyncio.create_task(_poll(index, settings.index_poll_s))
        try:
            yield
        finally:
            poller.cancel()
            with suppress(asyncio.CancelledError):
                await poller
            await run_in_threadpool(dashboard.close)
    finally:
        store.close()
