"""Compile the C++ export with g++ beside a main that asks it queries, and say what
``ResultStore.best`` answers for the same queries, line for line."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path

from xe2tune.db import BestQuery, BestResult, ResultStore, export_cpp
from xe2tune.db._cpp import c_string
from xe2tune.errors import StoreError

MAIN = r"""
#include "best_configs.hpp"
#include <cstdio>
#include <cstring>
using namespace xe2tune::tuned;
static const Query kQueries[] = {%s};
static const char* kMatch[] = {"none", "exact", "nearest", "ambiguous_device"};
static const char* kKvDType[] = {"same", "e4m3", "e5m2"};
int main() {
  for (const Query& q : kQueries) {
    Match match = Match::none;
    const LauncherConfig* c = select_config(q, &match);
    if (c == nullptr) { std::printf("%%s\n", kMatch[int(match)]); continue; }
    const Entry* e = nullptr;
    for (const Entry& x : kEntries) if (&x.config == c) e = &x;
    if (c->vtiles.value * c->shape_pv.bv != c->shape_out.dv) return 3;
    if (std::strcmp(kFamilyNames[int(c->family_id)], c->family) != 0) return 5;
    std::printf("%%s %%s %%d %%d %%s %%d %%s\n", kMatch[int(match)], c->config_hash,
                e->problem.kv_len, e->problem.q_len, c->family, e->problem.head_dim_v,
                kKvDType[int(e->problem.kv_dtype)]);
  }
  return kNumEntries > 0 ? 0 : 4;
}
"""


def cpp_query(query: BestQuery) -> str:
    """The query as a C++ ``Query`` initializer; Dv and the K/V dtype only when the query names
    them, so the launchers' initializers from before they existed are what is compiled."""
    device = c_string(query.device) if query.device is not None else "nullptr"
    newer = (f", {query.head_dim_v or 0}, KvDType::{query.kv_dtype or 'same'}"
             if query.head_dim_v is not None or query.kv_dtype is not None else "")
    return (f"{{Mode::{query.mode}, {query.head_dim}, DType::{query.dtype}, "
            f"{'true' if query.causal else 'false'}, {query.seq}, {query.q_len or 0}, "
            f"{query.heads_q or 0}, {query.heads_kv or 0}, {query.batch or 0}, {device}{newer}}}")


def dispatch(best: Sequence[BestResult], queries: Sequence[BestQuery], workdir: Path
             ) -> list[str]:
    """What the exported header's ``select_config`` answers, one line per query."""
    (workdir / "best_configs.hpp").write_text(export_cpp(best))
    (workdir / "main.cpp").write_text(MAIN % ",\n".join(map(cpp_query, queries)))
    subprocess.run(["g++", "-std=c++17", "-Wall", "-Wextra", "-Werror", "-pedantic", "-O1",
                    "-o", str(workdir / "dispatch"), str(workdir / "main.cpp")],
                   check=True, capture_output=True, text=True)
    run = subprocess.run([str(workdir / "dispatch")], check=True, capture_output=True,
                         text=True)
    return run.stdout.splitlines()


def expected_line(store: ResultStore, query: BestQuery) -> str:
    """The line ``dispatch`` prints for a query when it agrees with ``store.best``."""
    try:
        best = store.best(query)
    except StoreError:
        return "ambiguous_device"
    if best is None:
        return "none"
    p = best.problem
    return (f"{best.match} {best.config_hash} {p.kv_len} {p.q_len} {best.family} "
            f"{p.head_dim_v} {p.kv_dtype or 'same'}")
