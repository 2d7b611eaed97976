"""The results table as a pandas DataFrame: one flat row per trial, config split into columns."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from sqlalchemy import Integer

from xe2tune.db._reads import FRAME_COLUMNS

if TYPE_CHECKING:
    from collections.abc import Sequence

    import pandas as pd

# rows per frame of ResultStore.results_frames: bounds the memory of a streamed export
FRAME_CHUNK_ROWS = 5_000
# integers in the database; pandas makes a column float when one row lacks it (no measurement)
INTEGER_COLUMNS = tuple(name for name, column in FRAME_COLUMNS.items()
                        if isinstance(column.type, Integer))
CONFIG_COLUMNS = ("shape_qk", "shape_pv", "shape_out", "subgroup_layout", "stages", "vtiles",
                  "subgroup_size", "knobs")


def _config_cells(config: dict[str, Any]) -> list[Any]:
    cells: list[Any] = []
    for name in CONFIG_COLUMNS:
        value = config.get(name)
        if isinstance(value, list):
            value = "x".join(map(str, value))
        elif isinstance(value, dict):
            value = ",".join(f"{k}={v}" for k, v in sorted(value.items()))
        cells.append(value)
    return cells


def results_frame(rows: Sequence[Any]) -> pd.DataFrame:
    """Rows of ``FRAME_COLUMNS`` as a DataFrame, with TFLOP/s, GB/s and the config spelled out.

    Shapes read ``256x64x32`` (the seed's Shape<256, 64, 32>); ``config`` holds the config as a
    dict, shared between rows with the same config (treat it as read-only). Each distinct config
    is parsed once: a search measures the same configs on many problems.
    """
    import pandas as pd  # only the commands that build frames pay for pandas

    frame = pd.DataFrame.from_records(rows, columns=list(FRAME_COLUMNS), coerce_float=True)
    frame["created_at"] = pd.to_datetime(frame["created_at"], utc=True)
    codes, uniques = pd.factorize(frame["config"])
    parsed = [json.loads(text) for text in uniques]
    cells = pd.DataFrame([_config_cells(c) for c in parsed], columns=list(CONFIG_COLUMNS),
                         dtype=object)
    frame["config"] = pd.Series(parsed, dtype=object).take(codes).to_numpy()
    for name in CONFIG_COLUMNS:
        frame[name] = cells[name].take(codes).to_numpy()
    frame["tflops"] = frame["achieved_flops"] / 1e12
    frame["gbps"] = frame["achieved_bandwidth"] / 1e9
    return frame


def results_csv(frame: pd.DataFrame, *, header: bool = True) -> str:
    """A results frame as CSV, its config dict left out (its fields are columns already).

    Integer columns print as integers (blank where a trial has no measurement), never ``3.0``:
    so every chunk of :meth:`ResultStore.results_frames` prints as the whole frame would.
    """
    columns = frame.drop(columns=["config"]).astype(dict.fromkeys(INTEGER_COLUMNS, "Int64"))
    return columns.to_csv(index=False, header=header)
