"""The dashboard's views computed in a process of their own, beside the server's.

A lab's views cost seconds of Python per data version (every trial of a device read for its
roofline, the summary of thousands of studies, plotly building each figure), much of it in C
loops that hold the interpreter lock throughout (a cursor's ``fetchall`` of 300,000 rows).
While a campaign writes, the data version moves every few seconds: computed in the server's
process, those views stalled ``GET /v1/best`` behind the lock (measured at 2,000 req/s with a
write every 0.5 s on a database of 10^6 measurements: p99 2.0 s, 5.4 ms without them). Here a
child process holds its own :class:`DashboardCache` (and its ahead thread) and answers the
server's calls through a ``multiprocessing`` manager, one thread per calling thread: the server
only passes the views' bytes, and the views use the machine's other core.

The child opens the database read-only (the server's own store has migrated it) and exits when
the server goes away, however it went (``kill -9`` included): it watches its parent.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
import time
from multiprocessing.managers import BaseManager
from typing import TYPE_CHECKING, Any

from xe2tune.dashboards._service import DashboardCache
from xe2tune.db import open_store
from xe2tune.errors import StoreError

if TYPE_CHECKING:
    from xe2tune.dashboards._best_table import BestPageQuery

_PARENT_CHECK_S = 1.0
# What the server calls: DashboardCache's request methods.
_EXPOSED = ("page", "version", "views_ready", "summary_json", "roofline", "best_page", "study",
            "importance")


def _exit_with(parent: int) -> None:
    # The server went away without shutting the child down (kill -9, a crash): end at once,
    # nothing here writes.
    while os.getppid() == parent:
        time.sleep(_PARENT_CHECK_S)
    os._exit(0)


class _ViewsHost:
    """The child's object: opens the cache by a method call, so that a StoreError reaches the
    server as itself (the manager turns errors of a constructor into a traceback string)."""

    def __init__(self) -> None:
        self._cache: DashboardCache | None = None

    def open(self, db_url: str, ahead_every_s: float, parent: int) -> None:
        threading.Thread(target=_exit_with, args=(parent,), name="parent-watch",
                         daemon=True).start()
        self._cache = DashboardCache(open_store(db_url, read_only=True))
        self._cache.start_ahead(ahead_every_s)

    def __getattr__(self, name: str) -> Any:
        if name not in _EXPOSED or self._cache is None:
            raise AttributeError(name)
        return getattr(self._cache, name)


class _Manager(BaseManager):
    pass


_Manager.register("ViewsHost", _ViewsHost, exposed=("open", *_EXPOSED))


class DashboardProcess:
    """A :class:`DashboardCache` in a child process: the same request methods, by proxy.

    Thread-safe as the cache is: each calling thread has its own connection to the child,
    which serves each connection in a thread of its own.
    """

    def __init__(self, db_url: str, ahead_every_s: float) -> None:
        """Start the child and open the database there (blocking, about a second).

        Raises:
            StoreError: the child could not open the database (its message says why).
        """
        self._manager = _Manager(ctx=multiprocessing.get_context("spawn"))
        self._manager.start()
        try:
            self._cache = self._manager.ViewsHost()
            self._cache.open(db_url, ahead_every_s, os.getpid())
        except StoreError:
            self._manager.shutdown()
            raise

    # The request methods of DashboardCache (see there), answered by the child.

    def page(self, *, plotly_src: str, poll_s: float) -> str:
        return self._cache.page(plotly_src=plotly_src, poll_s=poll_s)

    def version(self) -> int:
        return self._cache.version()

    def views_ready(self) -> bool:
        return self._cache.views_ready()

    def summary_json(self) -> str:
        return self._cache.summary_json()

    def roofline(self, device_id: int, max_points: int) -> str | None:
        return self._cache.roofline(device_id, max_points)

    def best_page(self, query: BestPageQuery) -> str:
        return self._cache.best_page(query)

    def study(self, study_id: int) -> str | None:
        return self._cache.study(study_id)

    def importance(self, study_id: int) -> str | None:
        return self._cache.importance(study_id)

    def close(self) -> None:
        """Stop the child (its ahead thread's current view is dropped: it only reads)."""
        self._manager.shutdown()
