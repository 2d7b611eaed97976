"""The config ``xe2tune.sdpa`` and the torch operator launch given none: the tuned best.

This is the tuning result reaching a user of the Python API (as Kernel Launcher's wisdom files
do): the results database's best config for the problem on the device, the exact problem or else
the nearest tuned one (what ``xe2tune best`` answers).
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Mapping
from contextlib import closing
from typing import Any, Literal

from xe2tune.db import BestQuery, default_database_url, open_store
from xe2tune.errors import InvalidConfig, NoDatabase, StoreError, Xe2TuneError
from xe2tune.kernels import DeviceCaps, LauncherConfig, ProblemSpec, family_for

# What a caller may pass as ``config``: a config, its JSON dict, "default", or None (tuned).
ConfigChoice = LauncherConfig | Mapping[str, Any] | Literal["default"] | None

_cache: dict[tuple[str, str, ProblemSpec], LauncherConfig | None] = {}
_lock = threading.Lock()


def tuned_config(problem: ProblemSpec, device_name: str) -> LauncherConfig | None:
    """The best stored config for ``problem`` on the device named ``device_name`` (exact
    problem, else the nearest tuned one), None when nothing is tuned for it.

    Read from the database once per (database URL, device, problem) per process; later calls
    answer from memory, so a search running meanwhile changes nothing until a restart. A
    missing database is "nothing tuned"; one that cannot be read warns once and is treated
    the same, so ``sdpa`` still runs (with the family default).
    """
    key = (default_database_url(), device_name, problem)
    with _lock:
        if key in _cache:
            return _cache[key]
        _cache[key] = found = _lookup(key[0], problem, device_name)
    return found


def choose_launcher(problem: ProblemSpec, caps: DeviceCaps,
                    config: ConfigChoice) -> LauncherConfig:
    """The config to launch for ``problem`` on the device of ``caps``.

    None: the tuned best (:func:`tuned_config`) if it can run this problem here, else the
    family default; ``"default"``: the family default; a LauncherConfig or its JSON dict as given
    (checked at plan time).

    Raises:
        InvalidProblem: if no family serves the problem on this device.
        InvalidConfig: if ``config`` is none of the above, or a malformed dict.
    """
    family = family_for(problem, caps)
    if config is None:
        tuned = tuned_config(problem, caps.name)
        if tuned is not None:
            try:  # a nearest problem's best may not fit this one (a tile longer than kv_len)
                runs_here = family_for(problem, caps, tuned.family).invalid_reason(
                    tuned, problem, caps) is None
            except Xe2TuneError:  # its family does not serve this problem here
                runs_here = False
            if runs_here:
                return tuned
        return family.default_config(problem, caps)
    if isinstance(config, str) and config == "default":
        return family.default_config(problem, caps)
    if isinstance(config, LauncherConfig):
        return config
    if isinstance(config, Mapping):
        return LauncherConfig.from_dict(dict(config), family=family.name)
    raise InvalidConfig(
        f"config must be a LauncherConfig, a dict, \"default\" or None, got {config!r:.80}"
    )


def forget_tuned_configs() -> None:
    """Drop the cached lookups (the next ``sdpa`` call reads the database again)."""
    with _lock:
        _cache.clear()


def _lookup(url: str, problem: ProblemSpec, device_name: str) -> LauncherConfig | None:
    query = BestQuery(head_dim=problem.head_dim, head_dim_v=problem.head_dim_v,
                      dtype=problem.dtype, kv_dtype=problem.kv_dtype, seq=problem.kv_len,
                      mode=problem.mode, causal=problem.causal, q_len=problem.q_len,
                      heads_q=problem.heads_q, heads_kv=problem.heads_kv, batch=problem.batch,
                      device=device_name)
    try:
        with closing(open_store(url, read_only=True)) as store:
            names = {d.name.lower() for d in store.devices()}
            best = store.best(query) if device_name.lower() in names else None
    except NoDatabase:
        return None
    except StoreError as exc:
        warnings.warn(f"xe2tune.sdpa: cannot read tuned configs ({exc}); using the kernel "
                      "family's default config", stacklevel=5)  # the caller of sdpa()
        return None
    return None if best is None else best.config
