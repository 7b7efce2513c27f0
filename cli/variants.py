"""`gemmwatch variants`: the variant names a job may ask for, as the server knows them."""

from typing import Annotated

import typer
from rich.table import Table

from cli.messages import console as make_console, read_or_exit
from cli.server import SERVER_HELP, find_server


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
    found = read_or_exit(server, token, "/api/variants")
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
