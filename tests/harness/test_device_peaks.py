"""Measured ceilings stay the device's peaks: ``xe2tune devices`` keeps them, the API shows them.

Before, listing devices rewrote the device row without peaks, and ``GET /v1/devices`` then
answered ``"peak_flops": {}`` although the measured ceilings were in the database.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from _api_fixtures import api_settings
from fastapi.testclient import TestClient

from xe2tune.api import create_asgi_app
from xe2tune.cli._session import device_record
from xe2tune.db import MeasuredCeilings, open_store
from xe2tune.harness import DevicePeaks, list_devices
from xe2tune.testing import DEVICE

FLOPS = {"fp32": 2.5e11, "fp16": 2.5e11, "bf16": 2.5e11}
BANDWIDTH = 3.0e10


def _devices_api(url: str) -> list[dict]:
    with TestClient(create_asgi_app(api_settings(db_url=url))) as client:
        return client.get("/v1/devices").json()


@pytest.mark.requires_xpu
def test_listing_devices_keeps_the_measured_peaks(cpu_caps, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'peaks.db'}"
    listing = next(d for d in list_devices() if d.caps == cpu_caps)
    peaks = DevicePeaks(flops=FLOPS, bandwidth=BANDWIDTH, source="measured", llc_bytes=0)
    store = open_store(url)
    device_id = store.upsert_device(device_record(listing, peaks))
    store.save_ceilings(device_id, MeasuredCeilings(flops=FLOPS, bandwidth=BANDWIDTH))
    store.close()
    run = subprocess.run(["xe2tune", "devices", "--json", "--db", url], capture_output=True,
                         text=True, timeout=120, env=os.environ.copy())
    assert run.returncode == 0, run.stderr
    listed = next(d for d in json.loads(run.stdout) if d["name"] == cpu_caps.name)
    assert listed["peaks"]["source"] == "measured"
    store = open_store(url, read_only=True)
    [row] = [d for d in store.devices() if d.id == device_id]
    store.close()
    assert (row.peak_flops, row.peak_bandwidth, row.peak_source) == (FLOPS, BANDWIDTH,
                                                                      "measured")
    [device] = [d for d in _devices_api(url) if d["id"] == device_id]
    assert device["peak_flops"] == FLOPS and device["peak_bandwidth"] == BANDWIDTH
    assert device["peak_source"] == "measured"


def test_the_api_reports_measured_ceilings_of_a_row_without_peaks(tmp_path: Path) -> None:
    # a database written by an older xe2tune: the row's peaks were erased, the ceilings remain
    url = f"sqlite:///{tmp_path / 'older.db'}"
    store = open_store(url)
    device_id = store.upsert_device(DEVICE.model_copy(update={
        "peak_flops": {}, "peak_bandwidth": None, "peak_source": None}))
    store.save_ceilings(device_id, MeasuredCeilings(flops=FLOPS, bandwidth=BANDWIDTH))
    store.close()
    [device] = _devices_api(url)
    assert device["peak_flops"] == FLOPS and device["peak_bandwidth"] == BANDWIDTH
    assert device["peak_source"] == "measured"
