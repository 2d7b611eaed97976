"""What the server and the report command ask of the dashboards package."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from xe2tune.dashboards._best_table import BestPage, BestPageQuery, best_page
from xe2tune.dashboards._collect import (
    DashboardSummary,
    ImportanceSource,
    collect_convergence,
    collect_summary,
)
from xe2tune.dashboards._page import (
    best_page_view,
    importance_view,
    render_page,
    roofline_view,
    study_view,
    summary_view,
    view_json,
)
from xe2tune.dashboards._roofline import MAX_POINTS, get_roofline_info
from xe2tune.db import in_memory
from xe2tune.errors import StoreError

if TYPE_CHECKING:
    from xe2tune.db import BestResult, ResultStore

T = TypeVar("T")
log = logging.getLogger("xe2tune.dashboards")
REPORT_ROWS = 2000  # table rows a report embeds (sorted by problem); the rest are counted
REPORT_STUDIES = 40  # studies a report embeds, those with the most trials first
AHEAD_KEYS = frozenset({"summary", "summary_json", "best_results"})  # and default rooflines
# The ahead thread rests once no page has asked anything for this long (an open page asks for
# the data version every few seconds): a server nobody is looking at recomputes nothing on
# every write of a campaign.
WATCHED_S = 60.0


class DashboardViews(Protocol):
    """What the server asks of the dashboards: each view as JSON (or the page as HTML), at the
    store's current data version. :class:`DashboardCache` computes them in this process,
    ``DashboardProcess`` in a child process (see :func:`open_dashboard_views`).

    Every method may raise ``StoreError`` (the database could not be read); ``roofline``,
    ``study`` and ``importance`` answer None for an unknown id.
    """

    def page(self, *, plotly_src: str, poll_s: float) -> str: ...
    def version(self) -> int: ...
    def views_ready(self) -> bool: ...
    def summary_json(self) -> str: ...
    def roofline(self, device_id: int, max_points: int = MAX_POINTS) -> str | None: ...
    def best_page(self, query: BestPageQuery) -> str: ...
    def study(self, study_id: int) -> str | None: ...
    def importance(self, study_id: int) -> str | None: ...
    def close(self) -> None: ...


class DashboardCache:
    """Each view's JSON, computed once per data version of the store and then reused.

    The views the page needs first (the summary, every device's roofline) are computed ahead,
    in a background thread, whenever the data version moves while a page is open
    (:meth:`start_ahead`); until the new ones are ready, requests get the last complete ones,
    so the page never waits for a recompute. A view never computed (a server just started) is
    computed on request.

    Thread-safe: requests run on the server's thread pool; two requests for the same view at
    the same version compute it once, different views compute in parallel.
    """

    def __init__(self, store: ResultStore) -> None:
        self._store = store
        self._importance = ImportanceSource(store)
        self._lock = threading.Lock()
        self._version: int | None = None
        self._entries: dict[Any, Any] = {}
        # the last complete views the ahead thread computes (AHEAD_KEYS, rooflines), of older
        # versions: bounded by the number of devices
        self._previous: dict[Any, Any] = {}
        self._building: dict[Any, threading.Lock] = {}
        self._fresh_only = threading.local()  # set in the ahead thread: never serve old views
        self._stop = threading.Event()
        self._ahead: threading.Thread | None = None
        self._ahead_done: int | None = None  # the data version of the last ahead round
        self._asked_at = time.monotonic()  # the last request (the first views: at start)

    def _asked(self) -> None:
        if not getattr(self._fresh_only, "set", False):  # the ahead thread's own reads do not
            self._asked_at = time.monotonic()

    def _cached(self, key: Any, build: Callable[[], T]) -> T:
        self._asked()
        version = self._store.data_version()
        with self._lock:
            if version != self._version:
                self._previous.update((k, v) for k, v in self._entries.items()
                                      if k in AHEAD_KEYS or k[0] == "roofline"
                                      and k[2] == MAX_POINTS)
                self._version, self._entries, self._building = version, {}, {}
            entries = self._entries
            if key in entries:
                return entries[key]
            if (self._ahead is not None and key in self._previous
                    and not getattr(self._fresh_only, "set", False)):
                return self._previous[key]  # the ahead thread is computing the new one
            building = self._building.setdefault(key, threading.Lock())
        with building:
            if key not in entries:
                value = build()
                with self._lock:
                    entries[key] = value
                    if entries is not self._entries:  # the version moved meanwhile
                        self._previous[key] = value
            return entries[key]

    def start_ahead(self, every_s: float) -> None:
        """Compute the first views in a background thread now and after every data change
        while a page asks (``WATCHED_S``), checking every ``every_s`` seconds and resting at
        least as long as a round took (at most half of one core while the data keeps
        changing). :meth:`close` stops it."""
        self._ahead = threading.Thread(target=self._compute_ahead, args=(every_s,),
                                       name="dashboard-ahead", daemon=True)
        self._ahead.start()

    def close(self) -> None:
        """Stop the ahead thread (waiting for its current view)."""
        self._stop.set()
        if self._ahead is not None:
            self._ahead.join()

    def _compute_ahead(self, every_s: float) -> None:
        self._fresh_only.set = True
        done: int | None = None
        rest = 0.0
        while not self._stop.wait(rest):
            started = time.monotonic()
            try:
                version = self._store.data_version()
                if version != done and time.monotonic() - self._asked_at < WATCHED_S:
                    self.summary_json()
                    for device in self.summary().devices:
                        if self._stop.is_set():
                            return
                        assert device.id is not None, "devices read from a store have ids"
                        self.roofline(device.id)
                    done = self._ahead_done = version
            except StoreError as exc:
                log.warning("dashboard views not computed ahead, trying again: %s", exc)
            rest = max(every_s, time.monotonic() - started)

    def views_ready(self) -> bool:
        """Whether the ahead thread has computed the first views of the current data version."""
        self._asked()
        return self._ahead_done == self._store.data_version()

    def version(self) -> int:
        """The store's current data version (what the page polls).

        Raises:
            StoreError: the database could not be read.
        """
        self._asked()
        return self._store.data_version()

    def summary(self) -> DashboardSummary:
        """Counts, devices, studies and every tuned problem's best, at the current version.

        Raises:
            StoreError: the database could not be read.
        """
        return self._cached("summary", lambda: collect_summary(self._store, self._best()))

    def summary_json(self) -> str:
        """The page's first payload.

        Raises:
            StoreError: the database could not be read.
        """
        return self._cached("summary_json", lambda: view_json(summary_view(self.summary())))

    def page(self, *, plotly_src: str, poll_s: float) -> str:
        """The live page: plotly.js from ``plotly_src``, asking for new data every ``poll_s``.

        Raises:
            StoreError: the database could not be read.
        """
        return render_page(self.summary_json(), embedded_json=None, plotly_src=plotly_src,
                           poll_s=poll_s)

    def roofline(self, device_id: int, max_points: int = MAX_POINTS) -> str | None:
        """One device's downsampled roofline as JSON, None for an unknown device.

        Raises:
            StoreError: the database could not be read.
        """
        device = next((d for d in self.summary().devices if d.id == device_id), None)
        if device is None:
            return None
        return self._cached(("roofline", device_id, max_points), lambda: view_json(
            roofline_view(get_roofline_info(self._store, device, self._best(),
                                              max_points))))

    def best_page(self, query: BestPageQuery) -> str:
        """One page of the best-configs table as JSON.

        Raises:
            StoreError: the database could not be read.
        """
        return self._cached(("best", query), lambda: view_json(
            best_page_view(best_page(self.summary().table.rows, query))))

    def study(self, study_id: int) -> str | None:
        """One study's convergence as JSON, None when the study does not exist.

        Raises:
            StoreError: the database could not be read.
        """
        study = self._store.study(study_id)
        if study is None:
            return None
        return self._cached(("study", study_id), lambda: view_json(
            study_view(collect_convergence(self._store, study))))

    def importance(self, study_id: int) -> str | None:
        """One study's importance view as JSON, None when the study does not exist.

        Raises:
            StoreError: the database could not be read.
        """
        study = self._store.study(study_id)
        return None if study is None else view_json(importance_view(self._importance.info(study)))

    def _best(self) -> list[BestResult]:
        return self._cached("best_results", self._store.best_per_problem)


def open_dashboard_views(store: ResultStore, db_url: str, ahead_every_s: float
                         ) -> DashboardViews:
    """The server's dashboard views, computed ahead every ``ahead_every_s`` when the data
    changed: in a child process (``DashboardProcess``: the views' work never holds the
    server's interpreter lock), or on ``store`` in this process when the database is in memory
    (no other process can see it).

    Raises:
        StoreError: the child could not open the database.
    """
    if in_memory(db_url):
        cache = DashboardCache(store)
        cache.start_ahead(ahead_every_s)
        return cache
    from xe2tune.dashboards._process import DashboardProcess

    return DashboardProcess(db_url, ahead_every_s)


def report_html(store: ResultStore) -> str:
    """Every view in one self-contained HTML file: plotly.js and bounded data inlined.

    Every device's roofline (downsampled as on the live page), the first ``REPORT_ROWS`` table
    rows and the ``REPORT_STUDIES`` studies with the most trials; the page says what was left
    out.

    Raises:
        StoreError: the database could not be read.
    """
    best = store.best_per_problem()
    summary = collect_summary(store, best)
    studies = sorted(summary.studies, key=lambda s: (-s.n_trials, s.id))[:REPORT_STUDIES]
    importance = ImportanceSource(store)
    embedded = {
        "rooflines": {str(d.id): roofline_view(get_roofline_info(store, d, best))
                      for d in summary.devices},
        "rows": best_page_view(BestPage(total=len(summary.table.rows),
                                        rows=summary.table.rows[:REPORT_ROWS]))["rows"],
        "studies": {str(s.id): {"study": study_view(collect_convergence(store, s)),
                                "importance": importance_view(importance.info(s))}
                    for s in studies},
    }
    return render_page(view_json(summary_view(summary, study_ids={s.id for s in studies})),
                       embedded_json=view_json(embedded), plotly_src=None, poll_s=None)
