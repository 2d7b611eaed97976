"""``xe2tune campaign create|status|list``: problems with budgets, tuned by many workers.

Only ``create`` needs the problem catalog (tuner side, imported in the command); ``status`` and
``list`` read the database alone.
"""

from __future__ import annotations

import json
from contextlib import closing
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from xe2tune.cli._app import app, console, fail
from xe2tune.cli._devices import DbOption, JsonOption
from xe2tune.cli._problem_options import (
    BatchOption,
    CausalOption,
    DtypeOption,
    HeadDimOption,
    HeadDimVOption,
    HeadsKvOption,
    HeadsQOption,
    KvDtypeOption,
    ModeOption,
    SeqOption,
)
from xe2tune.cli._problem_text import head_words

if TYPE_CHECKING:
    from xe2tune.db import CampaignRecord, CampaignStatus

campaign_app = typer.Typer(help="Campaigns: problems with budgets that workers on many hosts "
                                "tune together (`xe2tune worker`).", no_args_is_help=True)
app.add_typer(campaign_app, name="campaign")

CampaignOption = Annotated[int, typer.Option("--campaign", help="campaign id "
                                             "(`xe2tune campaign list`)")]


def _campaign_json(c: CampaignRecord) -> dict[str, Any]:
    return {"id": c.id, "name": c.name, "sampler": c.sampler, "trials": c.trials,
            "patience": c.patience, "confirm_rounds": c.confirm_rounds,
            "created_at": c.created_at.isoformat(),
            "problems": [p.to_dict() for p in c.problems]}


@campaign_app.command("create")
def create(
    head_dim: HeadDimOption,
    head_dim_v: HeadDimVOption = None,
    kv_dtype: KvDtypeOption = None,
    seq: SeqOption = None,
    mode: ModeOption = None,
    causal: CausalOption = None,
    dtype: DtypeOption = None,
    heads_q: HeadsQOption = None,
    heads_kv: HeadsKvOption = None,
    batch: BatchOption = None,
    trials: Annotated[int | None, typer.Option(
        help="trials per study, i.e. per problem on each kind of device (default: search's "
             "GPU budget)")] = None,
    patience: Annotated[int | None, typer.Option(
        min=1, help="end a study after K trials without improvement")] = None,
    sampler: Annotated[str | None, typer.Option(help="search strategy (default: search's)")]
    = None,
    confirm_rounds: Annotated[int | None, typer.Option(
        "--confirm-rounds", min=1, help="rounds of each study's confirmation")] = None,
    cpu_problems: Annotated[bool, typer.Option(
        "--cpu-problems", help="the CPU device's default problem sizes instead of the GPU's "
                               "(where --seq and friends are not given)")] = False,
    name: Annotated[str | None, typer.Option(help="a unique name (default: hd<D>-<time>)")]
    = None,
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Register a campaign's problems and budgets; runs nothing (start `xe2tune worker`s)."""
    from xe2tune.cli._problem_options import CONFIRM_ROUNDS, GPU_TRIALS, problem_overrides
    from xe2tune.errors import InvalidProblem
    from xe2tune.tuner import DEFAULT_SAMPLER, SAMPLER_NAMES, TuneBudget, default_problems

    # Checked from the arguments alone, before the database and optuna load.
    sampler = sampler or DEFAULT_SAMPLER
    if sampler not in SAMPLER_NAMES:
        raise fail(f"unknown sampler {sampler!r}; choose one of {', '.join(SAMPLER_NAMES)}")
    try:
        budget = TuneBudget(trials=GPU_TRIALS if trials is None else trials, patience=patience)
    except ValueError as exc:
        raise InvalidProblem(str(exc)) from None
    overrides = problem_overrides(
        seq=seq, mode=mode, causal=causal, dtype=dtype, heads_q=heads_q, heads_kv=heads_kv,
        batch=batch, head_dim_v=head_dim_v, kv_dtype=kv_dtype)
    problems = default_problems(head_dim, on_gpu=not cpu_problems, overrides=overrides)
    name = name or f"hd{head_dim}-{datetime.now(timezone.utc):%Y%m%dT%H%M%S}"
    if not name.strip() or len(name) > 128:
        raise fail(f"campaign name {name!r}: accepted: 1 to 128 characters")
    from xe2tune.db import CampaignStore, open_optuna_storage, open_store
    from xe2tune.tuner import publish_campaign

    with closing(open_store(db)) as store:
        campaign = CampaignStore(store).create(
            name=name, sampler=sampler, trials=budget.trials, patience=budget.patience,
            confirm_rounds=CONFIRM_ROUNDS if confirm_rounds is None else confirm_rounds,
            problems=problems)
        url = store.url
        # Workers behind the gRPC proxy read the definition from the optuna storage.
        publish_campaign(open_optuna_storage(store), campaign)
    if as_json:
        print(json.dumps(_campaign_json(campaign), indent=2))
        return
    console.print(f"campaign {campaign.id} ({campaign.name}): {len(campaign.problems)} problems, "
                  f"{campaign.trials} trials per study, sampler {campaign.sampler}; run workers "
                  f"with `xe2tune worker --campaign {campaign.id} --db {url}`",
                  highlight=False, soft_wrap=True)


@campaign_app.command("list")
def list_campaigns(db: DbOption = None, as_json: JsonOption = False) -> None:
    """Every campaign of the database."""
    from xe2tune.db import CampaignStore, open_store

    with closing(open_store(db, read_only=True)) as store:
        found = CampaignStore(store).list()
    if as_json:
        print(json.dumps([_campaign_json(c) for c in found], indent=2))
        return
    table = Table(title="campaigns")
    for column in ("id", "name", "problems", "trials per study", "sampler", "created"):
        table.add_column(column)
    for c in found:
        table.add_row(str(c.id), c.name, str(len(c.problems)), str(c.trials), c.sampler,
                      f"{c.created_at:%Y-%m-%d %H:%M}")
    console.print(table)


def _ago(moment: datetime | None) -> str:
    if moment is None:
        return "-"
    return f"{(datetime.now(timezone.utc) - moment).total_seconds():.0f} s ago"


def _study_rows(status: CampaignStatus) -> list[dict[str, Any]]:
    """Every study of the campaign, database workers' and gRPC workers' alike (``workers``
    says which; gRPC studies have no store id here and no confirmation round)."""
    return [{
        "workers": "database", "study_id": s.study.id, "device": s.study.device_name,
        "family": s.study.family, "problem": s.study.problem.to_dict(), "done": s.done,
        "running": s.running, "budget": s.budget, "closed": s.closed, "confirmed": s.confirmed,
        "finished": s.finished, "best_median_s": s.study.best_median_s,
    } for s in status.studies] + [{
        "workers": "grpc", "study_id": None, "device": s.device, "family": s.family,
        "problem": s.problem.to_dict(), "done": s.done, "running": s.running,
        "budget": s.budget, "closed": s.closed, "confirmed": False, "finished": s.finished,
        "best_median_s": s.best_median_s,
    } for s in status.remote_studies]


def _status_json(status: CampaignStatus) -> dict[str, Any]:
    studies = _study_rows(status)
    return {
        "campaign": _campaign_json(status.campaign),
        "finished": bool(studies) and all(s["finished"] for s in studies),
        "studies": studies,
        "workers": [{
            "owner": w.owner, "host": w.host, "pid": w.pid, "device": w.device,
            "driver": w.driver, "compute_units": w.compute_units, "alive": w.alive,
            "last_heartbeat": w.last_heartbeat.isoformat() if w.last_heartbeat else None,
            "finished_at": w.finished_at.isoformat() if w.finished_at else None,
            "trials_done": w.trials_done,
        } for w in status.workers],
    }


@campaign_app.command("status")
def status(campaign: CampaignOption, db: DbOption = None, as_json: JsonOption = False) -> None:
    """Progress per study (trials done / budget, best so far) and per worker (alive, device,
    last heartbeat)."""
    from xe2tune.db import CampaignStore, open_store

    with closing(open_store(db, read_only=True)) as store:
        found = CampaignStore(store).status(campaign)
    if as_json:
        print(json.dumps(_status_json(found), indent=2))
        return
    c = found.campaign
    console.print(f"campaign {c.id} ({c.name}): {len(c.problems)} problems, {c.trials} trials "
                  "per study", highlight=False)
    studies = Table(title="studies")
    for column in ("device", "workers", "problem", "done / budget", "running", "best",
                   "state"):
        studies.add_column(column)
    rows = _study_rows(found)
    for s in rows:
        p = s["problem"]
        best = s["best_median_s"]
        state = ("finished" if s["finished"] else s["closed"] or "tuning") + (
            ", confirmed" if s["confirmed"] else "")
        studies.add_row(s["device"], s["workers"], f"{p['mode']} {head_words(p)} "
                        f"kv={p['kv_len']} causal={p['causal']}",
                        f"{s['done']} / {s['budget']}", str(s["running"]),
                        "-" if best is None else f"{best * 1e3:.4g} ms", state)
    console.print(studies if rows else "no worker has started yet")
    workers = Table(title="workers")
    for column in ("host", "pid", "device", "driver", "CUs", "alive", "heartbeat", "trials"):
        workers.add_column(column)
    for w in found.workers:
        workers.add_row(w.host, str(w.pid), w.device, w.driver, str(w.compute_units),
                        "yes" if w.alive else ("finished" if w.finished_at else "no"),
                        _ago(w.last_heartbeat), str(w.trials_done))
    if found.workers:
        console.print(workers)
