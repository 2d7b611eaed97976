"""``xe2tune devices`` and ``xe2tune roofline``: what the tool sees and the roofs it uses."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated

import typer

from xe2tune.cli._app import app, console
from xe2tune.cli._table import Column, print_table
from xe2tune.kernels import device_catalog

if TYPE_CHECKING:
    from xe2tune.harness import DevicePeaks

DeviceOption = Annotated[
    str | None,
    typer.Option("--device", help="SYCL filter string, e.g. level_zero:gpu:0 or opencl:cpu"),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]
DbOption = Annotated[str | None, typer.Option("--db", help="SQLAlchemy URL of the results DB")]
# The peaks stay at any width; the device limits go first, last column first. Names and
# architectures print below each row.
DEVICE_COLUMNS = (Column("filter"), Column("peak fp32 / fp16 TFLOP/s", right=True),
                  Column("peak GB/s", right=True), Column("peaks from", drop=1),
                  Column("CUs", right=True, drop=2), Column("max WG", right=True, drop=3),
                  Column("subgroups", drop=4), Column("local mem", right=True, drop=5),
                  Column("global mem", right=True, drop=6))
CATALOG_COLUMNS = (Column("key"), Column("XMX / fp32 TFLOP/s", right=True),
                   Column("GB/s", right=True), Column("EUs", right=True, drop=1),
                   Column("subgroups", drop=2), Column("max WG", right=True, drop=3),
                   Column("SLM", right=True, drop=4), Column("GRF x 64 B", drop=5),
                   Column("DPAS MxNxK", drop=6))


def _peaks_dict(peaks: DevicePeaks | None) -> dict | None:
    if peaks is None:
        return None
    return {
        "source": peaks.source,
        "tflops": {k: v / 1e12 for k, v in peaks.flops.items()},
        "bandwidth_gbs": peaks.bandwidth / 1e9,
    }


def _catalog_rows() -> list[dict]:
    rows = []
    for d in device_catalog():
        c, p = d.caps, d.peaks
        rows.append({
            "key": d.key, "aliases": list(d.aliases), "name": c.name,
            "architecture": d.architecture, "ocloc_device": d.ocloc_device,
            "compute_units": c.compute_units,
            "max_work_group": c.max_work_group_size, "subgroup_sizes": list(c.sub_group_sizes),
            "local_mem_bytes": c.local_mem_bytes, "global_mem_bytes": c.global_mem_bytes,
            "registers_per_thread": list(c.registers_per_thread),
            "register_bytes": c.register_bytes,
            "max_work_items_large_grf": c.max_work_items_large_grf,
            "matrix_shape": list(c.matrix_shape), "aspects": list(c.aspects),
            "peaks": {"source": "catalog", "tflops": {"fp16": p.xmx_tflops, "bf16": p.xmx_tflops,
                                                      "fp32": p.fp32_tflops},
                      "bandwidth_gbs": p.bandwidth_gbs, "l2_mb": p.l2_mb},
        })
    return rows


def _print_catalog(as_json: bool) -> None:
    rows = _catalog_rows()
    if as_json:
        print(json.dumps(rows, indent=2))
        return
    cells = []
    for r in rows:
        p = r["peaks"]
        cells.append((
            r["key"], f"{p['tflops']['fp16']:.4g} / {p['tflops']['fp32']:.3g}",
            f"{p['bandwidth_gbs']:.4g}", str(r["compute_units"]),
            ",".join(map(str, r["subgroup_sizes"])), str(r["max_work_group"]),
            f"{r['local_mem_bytes'] // 1024} KiB", "/".join(map(str, r["registers_per_thread"])),
            "x".join(map(str, r["matrix_shape"])),
        ))
    print_table(console, "Catalog device descriptions (use with --target KEY)", CATALOG_COLUMNS,
                cells, [f"{r['name']}, {r['architecture']}, ocloc device {r['ocloc_device']}"
                       for r in rows])


@app.command()
def devices(
    as_json: JsonOption = False,
    db: DbOption = None,
    catalog: Annotated[bool, typer.Option(
        "--catalog", help="List the catalog's device descriptions (for --target) instead.",
    )] = False,
) -> None:
    """List every SYCL device with its limits and the roofline peaks xe2tune will use."""
    if catalog:
        _print_catalog(as_json)
        return
    from xe2tune.cli._session import stored_peaks  # the device side loads only here
    from xe2tune.db import open_store
    from xe2tune.harness import list_devices, open_queue

    listings = list_devices()
    if not listings:
        open_queue()  # raises DeviceError with the install hint
    store = open_store(db)
    rows = []
    for d in listings:
        c = d.caps
        rows.append({
            "filter": d.filter_string, "name": c.name, "backend": c.backend,
            "type": c.device_type, "driver": d.driver_version, "compute_units": c.compute_units,
            "max_work_group": c.max_work_group_size, "subgroup_sizes": list(c.sub_group_sizes),
            "local_mem_bytes": c.local_mem_bytes, "global_mem_bytes": c.global_mem_bytes,
            "fp16": c.has_fp16, "matrix_engine": c.has_matrix_engine,
            "aspects": list(c.aspects),
            "peaks": _peaks_dict(stored_peaks(store, d)[1]),
        })
    store.close()
    if as_json:
        print(json.dumps(rows, indent=2))
        return
    cells = []
    for r in rows:
        p = r["peaks"]
        cells.append((
            r["filter"], f"{p['tflops']['fp32']:.3g} / {p['tflops']['fp16']:.3g}" if p else "-",
            f"{p['bandwidth_gbs']:.1f}" if p else "-",
            p["source"] if p else "none (run `xe2tune roofline`)", str(r["compute_units"]),
            str(r["max_work_group"]), ",".join(map(str, r["subgroup_sizes"])),
            f"{r['local_mem_bytes'] // 1024} KiB", f"{r['global_mem_bytes'] / 2**30:.1f} GiB",
        ))
    print_table(console, "SYCL devices", DEVICE_COLUMNS, cells, [r["name"] for r in rows])


@app.command()
def roofline(device: DeviceOption = None, as_json: JsonOption = False,
             db: DbOption = None) -> None:
    """Measure the device's FMA and copy ceilings and store them as its roofline peaks."""
    from xe2tune.cli._session import listing_for, save_measured, stored_peaks
    from xe2tune.db import open_store
    from xe2tune.harness import measure_ceilings, open_queue

    queue = open_queue(device)
    listing = listing_for(queue)
    store = open_store(db)
    device_id, _ = stored_peaks(store, listing)
    if not as_json:
        console.print(f"measuring ceilings of {listing.filter_string} ({listing.caps.name}) ...")
    ceilings = measure_ceilings(queue, llc_bytes=listing.global_mem_cache_bytes)
    peaks = save_measured(store, listing, device_id, ceilings)
    store.close()
    result = {
        "device": listing.filter_string, "name": listing.caps.name,
        "fma_fp32_gflops": ceilings.fma_fp32 / 1e9, "fma_fp16_gflops": ceilings.fma_fp16 / 1e9,
        "copy_gbs": ceilings.copy_bandwidth / 1e9, "peaks": _peaks_dict(peaks),
    }
    if as_json:
        print(json.dumps(result, indent=2))
        return
    console.print(
        f"FMA fp32 {result['fma_fp32_gflops']:.1f} GFLOP/s, FMA fp16 "
        f"{result['fma_fp16_gflops']:.1f} GFLOP/s, copy {result['copy_gbs']:.1f} GB/s "
        "(saved; these now override the catalog)"
    )
