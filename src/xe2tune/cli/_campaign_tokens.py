"""``xe2tune campaign token create|list|revoke``: credentials of a campaign's remote workers.

A worker token lets a worker behind ``xe2tune serve --grpc-port`` reach its campaign's studies
and store results of its campaign's problems, and nothing else; the server's own
``XE2TUNE_API_TOKEN`` never has to leave the database host. Only the token's hash is stored:
``create`` prints the token once (alone on stdout, so a shell can capture it).
"""

from __future__ import annotations

import json
from contextlib import closing
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from xe2tune.cli._app import console, err_console, fail
from xe2tune.cli._campaign import CampaignOption, campaign_app
from xe2tune.cli._devices import DbOption, JsonOption

if TYPE_CHECKING:
    from xe2tune.db import WorkerTokenRecord

token_app = typer.Typer(help="Worker tokens: what a campaign's remote workers present to the "
                             "gRPC proxy and POST /v1/results.", no_args_is_help=True)
campaign_app.add_typer(token_app, name="token")


def _token_json(t: WorkerTokenRecord) -> dict[str, Any]:
    return {"id": t.id, "campaign": t.campaign_id, "name": t.name,
            "created_at": t.created_at.isoformat(),
            "revoked_at": t.revoked_at.isoformat() if t.revoked_at else None}


@token_app.command("create")
def create(
    campaign: CampaignOption,
    name: Annotated[str, typer.Option(help="who holds it, e.g. the worker's host")] = "worker",
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Mint a worker token for the campaign; prints it once (store it on the worker host as
    XE2TUNE_WORKER_TOKEN)."""
    if not name.strip() or len(name) > 128:
        raise fail(f"--name {name!r}: accepted: 1 to 128 characters")
    from xe2tune.db import CampaignStore, WorkerTokenStore, open_store

    with closing(open_store(db)) as store:
        CampaignStore(store).get(campaign)  # one line naming the campaigns there are
        minted = WorkerTokenStore(store).create(campaign, name)
    if as_json:
        print(json.dumps({**_token_json(minted.record), "token": minted.secret}, indent=2))
        return
    print(minted.secret)
    err_console.print(f"worker token {minted.record.id} of campaign {campaign} ({name}); shown "
                      "only now: give it to the worker as XE2TUNE_WORKER_TOKEN, revoke it with "
                      f"`xe2tune campaign token revoke --campaign {campaign} --id "
                      f"{minted.record.id}`", highlight=False, soft_wrap=True)


@token_app.command("list")
def list_tokens(campaign: CampaignOption, db: DbOption = None,
                as_json: JsonOption = False) -> None:
    """The campaign's worker tokens (never the tokens themselves), revoked ones included."""
    from xe2tune.db import CampaignStore, WorkerTokenStore, open_store

    with closing(open_store(db, read_only=True)) as store:
        CampaignStore(store).get(campaign)
        found = WorkerTokenStore(store).list(campaign)
    if as_json:
        print(json.dumps([_token_json(t) for t in found], indent=2))
        return
    table = Table(title=f"worker tokens of campaign {campaign}")
    for column in ("id", "name", "created", "revoked"):
        table.add_column(column)
    for t in found:
        table.add_row(str(t.id), t.name, f"{t.created_at:%Y-%m-%d %H:%M}",
                      f"{t.revoked_at:%Y-%m-%d %H:%M}" if t.revoked_at else "-")
    console.print(table if found else f"campaign {campaign} has no worker tokens")


@token_app.command("revoke")
def revoke(
    campaign: CampaignOption,
    token_id: Annotated[int, typer.Option("--id", help="the token's id (`campaign token list`)")],
    db: DbOption = None,
) -> None:
    """Revoke a worker token: its next call on either channel is refused (PERMISSION_DENIED on
    gRPC, 403 on the API)."""
    from xe2tune.db import WorkerTokenStore, open_store

    with closing(open_store(db)) as store:
        record = WorkerTokenStore(store).revoke(campaign, token_id)
    console.print(f"worker token {record.id} of campaign {campaign} ({record.name}) revoked",
                  highlight=False)
