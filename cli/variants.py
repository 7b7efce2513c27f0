"""`gemmwatch variants`: the variant names a job may ask for, as the server knows them."""

from typing import Annotated

import httpx
import typer
from rich.table import Table

from cli.messages import console as make_console, unreachable
from cli.server import SERVER_HELP, api_client, find_server


def variants(
    server: Annotated[str | None, typer.Option(help=SERVER_HELP)] = None,
    names_only: Annotated[bool, typer.Option("--names", help="one name a line, nothing else")] = False,
    token: Annotated[str | None, typer.Option(help="API token, where reads need one (default: $GEMMWATCH_TOKEN"
                                                    " or the local one)")] = None,
):
    """List the variants (built-in kernels and cuBLAS) a job may name, with each one's precision
    and technique. Exits 3 if the server cannot be reached."""
    server = find_server(server)
    out = make_console()
    try:
        with api_client(server, token) as client:
            resp = client.get("/api/variants")
    except httpx.HTTPError as exc:
        out.print(unreachable(server, exc), style="red", markup=False, highlight=False)
        raise typer.Exit(3)
    if resp.status_code != 200:
        out.print(f"{server}/api/variants: {resp.status_code} {resp.text[:500]}", style="red", markup=False,
                  highlight=False)
        raise typer.Exit(2)
    found = resp.json()
    if names_only:
        for v in found:
            print(v["name"])
        return
    table = Table(title=f"{len(found)} variants at {server}")
    for col in ("name", "precision", "form"):
        table.add_column(col, no_wrap=True)  # never cut: a name is what one types
    table.add_column("technique", no_wrap=True)  # its first words: one line a variant (GET /api/kernels/NAME has all)
    for v in found:
        table.add_row(v["name"], v["precision"], v.get("form", "rrr"), gist(v["technique"]))
    out.print(table, markup=False, highlight=False)


def gist(technique: str, most: int = 60) -> str:
    """A technique's first clause, at most `most` characters cut at a word ("..." where cut): the
    list is one line a variant (fifty variants once made 210 lines of wrapped prose)."""
    first = technique.split(";")[0].split(": ")[0].strip()
    if len(first) <= most:
        return first
    return first[:most].rsplit(" ", 1)[0].rstrip(",") + " ..."
