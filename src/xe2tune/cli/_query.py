"""``xe2tune best``, ``results`` and ``export`` read the results database; ``migrate`` upgrades it.

The readers open it read-only: they never create, migrate or otherwise change the file (not even
its journal mode), and refuse an older schema with a one-line pointer to ``xe2tune migrate``.
"""

from __future__ import annotations

import sys
from contextlib import closing
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from xe2tune.cli._app import app, console, fail
from xe2tune.cli._problem_options import MAX_EXTENT, HeadDimVOption, KvDtypeOption
from xe2tune.cli._problem_text import head_words
from xe2tune.cli._table import Column, print_table
from xe2tune.cli._vocabulary import seed_vocabulary
from xe2tune.kernels import DTYPES, KV_DTYPES, MODES, ProblemSpec
from xe2tune.measurement import TrialStatus

if TYPE_CHECKING:
    from pydantic import ValidationError

    from xe2tune.db import BestResult

DbOption = Annotated[str | None, typer.Option(
    "--db", help="SQLAlchemy URL of the results database (default: XE2TUNE_DB, else "
                 "xe2tune.db in the user data dir).")]
DeviceOption = Annotated[str | None, typer.Option(
    "--device", help="Device name (case-insensitive) or id in the database.")]
RESULT_FORMATS = ("table", "csv", "json")
EXPORT_FORMATS = ("json", "cpp")
STATUSES = tuple(s.value for s in TrialStatus)
RESULT_COLUMNS = (Column("trial", right=True), Column("problem"), Column("status"),
                  Column("median ms", right=True), Column("TFLOP/s", right=True, drop=2),
                  Column("roofline", right=True, drop=1))


def _choice(name: str, value: str | None, accepted: tuple[str, ...]) -> None:
    if value is not None and value not in accepted:
        raise fail(f"{name} {value!r} is not supported; accepted: {', '.join(accepted)}")


def _validation_message(exc: ValidationError) -> str:
    error = exc.errors()[0]
    message = error["msg"].removeprefix("Value error, ")
    where = ".".join(str(part) for part in error["loc"])
    return f"{where}: {message}" if where else message


def _print_best(best: BestResult) -> None:
    p = best.problem
    source = "exact match" if best.match == "exact" else "NEAREST tuned problem"
    console.print(f"[bold]{best.device}[/] · {best.family} · {source}: {p.mode} "
                  f"{head_words(p)} q_len={p.q_len} kv_len={p.kv_len} "
                  f"heads={p.heads_q}/{p.heads_kv} batch={p.batch} "
                  f"{'causal' if p.causal else 'non-causal'}", highlight=False)
    console.print(seed_vocabulary(best.config), highlight=False)
    figures = [f"median {best.median_s * 1e3:.4g} ms"]
    if best.tflops is not None:
        figures.append(f"{best.tflops:.4g} TFLOP/s")
    if best.roofline_fraction is not None:
        figures.append(f"{best.roofline_fraction * 100:.3g}% of roofline ({best.peak_source})")
    if best.speedup is not None:
        figures.append(f"{best.speedup:.3g}x over the default config")
    if best.baseline is not None:
        figures.append(f"the seeded baseline {escape(repr(best.baseline))}")
    figures.append(f"confirmed side by side in {best.confirmed_rounds} rounds"
                   if best.confirmed_rounds else "not confirmed (trials timed apart)")
    console.print(" · ".join(figures), highlight=False)
    for seeded in best.baselines:  # a tuned result is always shown against the baselines
        outcome = (f"{seeded.median_s * 1e3:.4g} ms, best is {seeded.speedup:.3g}x faster"
                   if seeded.median_s is not None and seeded.speedup is not None
                   else seeded.status.value)
        console.print(f"  vs {escape(seeded.label)} ({escape(seeded.family)}): {outcome}; "
                      f"{seed_vocabulary(seeded.config)}", highlight=False)


@app.command()
def best(
    head_dim: Annotated[int, typer.Option("--head-dim", help="Head dimension D.")],
    dtype: Annotated[str, typer.Option("--dtype", help="fp16, bf16 or fp32.")],
    seq: Annotated[int, typer.Option("--seq", min=1, max=MAX_EXTENT,
                                     help="Key length (and query length for prefill).")],
    head_dim_v: HeadDimVOption = None,
    kv_dtype: KvDtypeOption = None,
    mode: Annotated[str, typer.Option("--mode", help="prefill or decode.")] = "prefill",
    causal: Annotated[bool, typer.Option("--causal/--no-causal")] = False,
    q_len: Annotated[int | None, typer.Option("--q-len", min=1, max=MAX_EXTENT,
                                              help="Query length if not seq.")] = None,
    heads_q: Annotated[int | None, typer.Option("--heads-q", min=1, max=MAX_EXTENT,
                                                help="Query heads (default: any).")] = None,
    heads_kv: Annotated[int | None, typer.Option("--heads-kv", min=1, max=MAX_EXTENT,
                                                 help="KV heads (default: any).")] = None,
    batch: Annotated[int | None, typer.Option("--batch", min=1, max=MAX_EXTENT,
                                              help="Batch (default: any).")] = None,
    device: DeviceOption = None,
    db: DbOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """The best launcher config for a problem, or for the nearest tuned one (flagged)."""
    _choice("dtype", dtype, DTYPES)
    _choice("mode", mode, MODES)
    _choice("kv dtype", kv_dtype, KV_DTYPES)
    from pydantic import ValidationError

    from xe2tune.db import BestQuery, open_store

    try:
        query = BestQuery(head_dim=head_dim, head_dim_v=head_dim_v, dtype=dtype,
                          kv_dtype=kv_dtype, seq=seq, mode=mode, causal=causal,
                          q_len=q_len, heads_q=heads_q, heads_kv=heads_kv, batch=batch,
                          device=device)
    except ValidationError as exc:
        raise fail(_validation_message(exc)) from exc
    with closing(open_store(db, read_only=True)) as store:
        found = store.best(query)
    if found is None:
        group = ProblemSpec(mode=mode, head_dim=head_dim, head_dim_v=head_dim_v, dtype=dtype,
                            kv_dtype=kv_dtype, q_len=1, kv_len=seq)
        raise fail(f"nothing tuned for {mode} {head_words(group)} "
                   f"{'causal' if causal else 'non-causal'} in {store.url}; run xe2tune search")
    if as_json:
        print(found.model_dump_json(indent=2))
    else:
        _print_best(found)


@app.command()
def results(
    fmt: Annotated[str, typer.Option("--format", help="table, csv or json.")] = "table",
    device: DeviceOption = None,
    mode: Annotated[str | None, typer.Option("--mode")] = None,
    head_dim: Annotated[int | None, typer.Option("--head-dim")] = None,
    head_dim_v: Annotated[int | None, typer.Option("--head-dim-v")] = None,
    dtype: Annotated[str | None, typer.Option("--dtype")] = None,
    kv_dtype: Annotated[str | None, typer.Option("--kv-dtype", help="FP8 K/V problems only: "
                                                 + ", ".join(KV_DTYPES))] = None,
    causal: Annotated[bool | None, typer.Option("--causal/--no-causal",
                                                show_default="any")] = None,
    seq_min: Annotated[int | None, typer.Option("--seq-min", min=1, max=MAX_EXTENT,
                                                help="Smallest kv_len.")] = None,
    seq_max: Annotated[int | None, typer.Option("--seq-max", min=1, max=MAX_EXTENT,
                                                help="Largest kv_len.")] = None,
    status: Annotated[str | None, typer.Option("--status", help=", ".join(STATUSES))] = None,
    study: Annotated[int | None, typer.Option("--study", min=1, max=2**63 - 1,
                                              help="Study id.")] = None,
    limit: Annotated[int | None, typer.Option("--limit", help="Newest N rows only.")] = None,
    db: DbOption = None,
) -> None:
    """Every stored trial (newest first) with its problem, config and measurement."""
    _choice("format", fmt, RESULT_FORMATS)
    _choice("dtype", dtype, DTYPES)
    _choice("mode", mode, MODES)
    _choice("status", status, STATUSES)
    _choice("kv dtype", kv_dtype, KV_DTYPES)
    if limit is not None and limit < 1:
        raise fail(f"--limit must be >= 1, got {limit}")
    from pydantic import ValidationError

    from xe2tune.db import ResultFilters, open_store, results_csv

    try:
        filters = ResultFilters(device=device, mode=mode, head_dim=head_dim,
                                head_dim_v=head_dim_v, dtype=dtype, kv_dtype=kv_dtype,
                                causal=causal, seq_min=seq_min, seq_max=seq_max,
                                status=status, study_id=study)
    except ValidationError as exc:
        raise fail(_validation_message(exc)) from exc
    with closing(open_store(db, read_only=True)) as store:
        if fmt == "csv":  # streamed: bounded memory whatever the database size
            for index, chunk in enumerate(store.results_frames(filters, limit=limit)):
                sys.stdout.write(results_csv(chunk, header=index == 0))
            return
        frame = store.results_frame(filters)
    if limit is not None:
        frame = frame.head(limit)
    if fmt == "json":
        print(frame.to_json(orient="records", date_format="iso", indent=2))
    else:
        rows, configs = [], []
        for row in frame.itertuples(index=False):
            rows.append((
                str(row.trial_id),
                f"{row.mode} D{row.head_dim}"
                + (f" Dv{row.head_dim_v}" if row.head_dim_v != row.head_dim else "")
                + f" {row.dtype}" + (f" K/V={row.kv_dtype}" if isinstance(row.kv_dtype, str)
                                     else "")
                + f" {row.q_len}/{row.kv_len} "
                f"h{row.heads_q}/{row.heads_kv} b{row.batch}{' causal' if row.causal else ''}",
                row.status, _number(row.median_s, 1e3), _number(row.tflops, 1.0),
                _number(row.roofline_fraction, 100.0, "%"),
            ))
            configs.append(seed_vocabulary(row.config)
                           + (f" (baseline {row.baseline})" if isinstance(row.baseline, str)
                              else ""))
        print_table(console, f"{len(frame)} results", RESULT_COLUMNS, rows, configs,
                    more="--format json")


def _number(value: float | None, scale: float, unit: str = "") -> str:
    """A measured figure to 4 significant digits; blank when it was not measured (None/NaN)."""
    if value is None or value != value:
        return ""
    return f"{value * scale:.4g}{unit}"


@app.command()
def export(
    fmt: Annotated[str, typer.Option("--format", help="json or cpp.")] = "json",
    out: Annotated[Path | None, typer.Option("--out", help="Write to this file.")] = None,
    device: DeviceOption = None,
    db: DbOption = None,
) -> None:
    """The best config of every tuned problem, as JSON or a C++17 dispatch header."""
    _choice("format", fmt, EXPORT_FORMATS)
    from xe2tune.db import export_cpp, export_json, open_store

    with closing(open_store(db, read_only=True)) as store:
        found = store.best_per_problem(device)
    if not found:
        raise fail(f"nothing tuned in {store.url}; run xe2tune search first")
    text = export_json(found) if fmt == "json" else export_cpp(found)
    if out is None:
        print(text, end="")
        return
    try:
        out.write_text(text)
    except OSError as exc:
        raise fail(f"cannot write {out}: {exc.strerror}") from exc
    console.print(f"wrote {len(found)} configs to {out}", highlight=False)


@app.command()
def migrate(db: DbOption = None) -> None:
    """Create the results database, or upgrade its schema to this xe2tune's (readers never do)."""
    from xe2tune.db import open_store

    with closing(open_store(db)) as store:
        url = store.url
    console.print(f"{url} is ready for this xe2tune", highlight=False)
