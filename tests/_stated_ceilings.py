"""A results database that knows this device's ceilings without measuring them: every worker or
search started on it skips the minute the ceiling measurement takes. The figures are stated,
not measured: tests that use them assert nothing about roofline fractions."""

from __future__ import annotations

from xe2tune.cli._session import listing_for, save_measured, stored_peaks
from xe2tune.db import open_store
from xe2tune.harness import Ceilings

STATED = Ceilings(fma_fp32=60e9, fma_fp16=60e9, copy_bandwidth=20e9)


def store_stated_ceilings(url: str, queue) -> None:  # noqa: ANN001  (a dpctl.SyclQueue)
    """Register the device of ``queue`` in the database at ``url`` with the STATED ceilings."""
    store = open_store(url)
    try:
        listing = listing_for(queue)
        device_id, _ = stored_peaks(store, listing)
        save_measured(store, listing, device_id, STATED)
    finally:
        store.close()
