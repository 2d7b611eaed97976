"""What the server and the report command ask of the dashboards package."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from xe2tune.dashboards._collect import ImportanceSource, collect_dashboard_info
from xe2tune.dashboards._page import dashboard_payload_json, importance_json, render_page

if TYPE_CHECKING:
    from xe2tune.db import ResultStore


class DashboardCache:
    """The served dashboard's payload, rebuilt at most once per data version of the store.

    Thread-safe: requests run on the server's thread pool and one rebuild happens at a time.
    """

    def __init__(self, store: ResultStore) -> None:
        self._store = store
        self._importance = ImportanceSource(store)
        self._payload: tuple[int, str] | None = None
        self._lock = threading.Lock()

    def version(self) -> int:
        """The store's current data version (what the page polls).

        Raises:
            StoreError: the database could not be read.
        """
        return self._store.data_version()

    def payload_json(self) -> str:
        """The page payload at the current data version, as JSON text.

        A rebuild of a large database takes seconds: while one runs, other callers get the
        previous payload (the page shows its data version) instead of waiting for it.

        Raises:
            StoreError: the database could not be read.
        """
        if not self._lock.acquire(blocking=self._payload is None):
            assert self._payload is not None
            return self._payload[1]
        try:
            version = self._store.data_version()
            if self._payload is None or self._payload[0] != version:
                info = collect_dashboard_info(self._store)
                self._payload = (info.version, dashboard_payload_json(info))
            return self._payload[1]
        finally:
            self._lock.release()

    def page(self, *, plotly_src: str, poll_s: float) -> str:
        """The live page: plotly.js from ``plotly_src``, asking for new data every ``poll_s``.

        Raises:
            StoreError: the database could not be read.
        """
        return render_page(self.payload_json(), plotly_src=plotly_src, poll_s=poll_s)

    def importance(self, study_id: int) -> str | None:
        """One study's importance view as JSON, None when the study does not exist.

        Raises:
            StoreError: the database could not be read.
        """
        study = self._store.study(study_id)
        return None if study is None else importance_json(self._importance.info(study))


def report_html(store: ResultStore) -> str:
    """Every view in one self-contained HTML file: plotly.js and all data inlined, no polling.

    Raises:
        StoreError: the database could not be read.
    """
    info = collect_dashboard_info(store)
    source = ImportanceSource(store)
    importances = {study.id: source.info(study) for study in info.studies}
    return render_page(dashboard_payload_json(info, importances), plotly_src=None, poll_s=None)
