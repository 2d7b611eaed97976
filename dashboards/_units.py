"""Numbers in engineering units (GFLOP/s, TFLOP/s, GB/s) for axes, roof labels and hovers.

plotly's own log-axis labels use SI prefixes without a unit ("10B" for 10^10 FLOP/s reads as
ten billion bytes) and crowd minor digits between decades; the charts set their ticks from here.
"""

from __future__ import annotations

import math

PREFIXES = ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, ""))


def engineering(value: float, unit: str, digits: int = 3) -> str:
    """``value`` with the largest prefix that keeps it >= 1, e.g. ``456 GB/s``, ``117 TFLOP/s``."""
    if value == 0 or not math.isfinite(value):
        return f"{value:g} {unit}"
    for scale, prefix in PREFIXES:
        if abs(value) >= scale:
            return f"{value / scale:.{digits}g} {prefix}{unit}"
    return f"{value:.{digits}g} {unit}"


def decade_ticks(lo: float, hi: float, unit: str | None) -> dict[str, list]:
    """Tick values at every power of ten spanning [lo, hi] and their labels.

    ``unit`` None labels plain numbers (``0.1``, ``1``, ``1000``), for ratios such as FLOP/byte.
    """
    if not (lo > 0 and hi > 0):
        return {"tickvals": [], "ticktext": []}
    first, last = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    values = [10.0 ** e for e in range(first, last + 1)]
    text = [f"{v:g}" if unit is None else engineering(v, unit) for v in values]
    return {"tickvals": values, "ticktext": text}
