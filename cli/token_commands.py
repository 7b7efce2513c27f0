"""`gemmwatch token create | revoke | list`: the API's write tokens, stored hashed in the database."""

from typing import Annotated

import typer
from cli.messages import console as make_console
from rich.table import Table
from cli.markup import colored

token_app = typer.Typer(help="API tokens for writes (stored hashed in the database).", no_args_is_help=True,
                        rich_markup_mode=None)
console = make_console()


@token_app.command("create")
def token_create(
    name: str,
    scope: Annotated[list[str] | None, typer.Option(
        help="what the token may do, repeatable: results (post measured results), jobs (submit jobs and"
             " confirmations, cancel its own jobs), admin (all, cancel any job, change any GPU record);"
             " default: jobs and results")] = None,
    repo: Annotated[list[str] | None, typer.Option(
        help="a repository (as `gemmwatch ci` names it) whose commits this token may correct though another"
             " token recorded them first, repeatable")] = None,
):
    """Create a token and print it (the only time it is shown). Any token may read."""
    # Imported here: `gemmwatch --help` and the HTTP-only commands start without it (start-up time).
    from core.records.tokens import DEFAULT_SCOPES, create_token
    from core.records.db import session_factory, upgrade_database
    from core.settings import settings

    upgrade_database(settings)
    with session_factory(settings)() as db:
        try:
            token = create_token(db, name, scopes=tuple(scope or DEFAULT_SCOPES), repos=tuple(repo or ()))
        except ValueError as exc:
            console.print(colored("red", str(exc)))
            raise typer.Exit(2)
    print(token)


@token_app.command("revoke")
def token_revoke(name: str):
    """Revoke a token by name: it stops working at once."""
    # Imported here: `gemmwatch --help` and the HTTP-only commands start without it (start-up time).
    from core.records.tokens import revoke_token
    from core.records.db import session_factory
    from core.settings import settings

    with session_factory(settings)() as db:
        if not revoke_token(db, name):
            console.print(colored("red", f"no active token named {name!r}"))
            raise typer.Exit(2)
    console.print(f"revoked {name}")


@token_app.command("list")
def token_list():
    """Names, creation times and states of all tokens (never the tokens themselves)."""
    # Imported here: `gemmwatch --help` and the HTTP-only commands start without it (start-up time).
    from sqlalchemy import select

    from core.records.db import session_factory
    from core.records.models import ApiToken
    from core.settings import settings

    table = Table("name", "scopes", "repositories", "created", "last used", "state")
    with session_factory(settings)() as db:
        for t in db.scalars(select(ApiToken).order_by(ApiToken.id)):
            table.add_row(t.name, t.scopes, " ".join(t.repos or []), f"{t.created_at:%Y-%m-%d %H:%M}",
                          f"{t.last_used_at:%Y-%m-%d %H:%M}" if t.last_used_at else "",
                          "revoked" if t.revoked_at else "active")
    console.print(table)
