"""`gemmwatch export SHA`: a commit's results and verdicts as JSON, in gemmwatch's versioned schema
(docs/schemas/commit-export-1.json) or in the Bencher Metric Format, to send on
(`bencher run --adapter json --file ...`)."""

import json
from pathlib import Path
from typing import Annotated

import httpx
import typer

from cli.messages import console as make_console, unreachable
from cli.server import SERVER_HELP, api_client, find_server


def export(
    sha: Annotated[str, typer.Argument(help="the commit's sha (or a prefix of 7 digits or more)")],
    format: Annotated[str, typer.Option(help="gemmwatch (schema gemmwatch.commit-export, version 1) or bmf")] = "gemmwatch",
    out: Annotated[Path | None, typer.Option(help="write it to this file (default: standard output)")] = None,
    server: Annotated[str | None, typer.Option(help=SERVER_HELP)] = None,
    token: Annotated[str | None, typer.Option(help="API token, where reads need one (default: $GEMMWATCH_TOKEN"
                                                    " or the local one)")] = None,
):
    """Export a commit's results and verdicts. Exits 2 if the server refuses (an unknown commit,
    a format it does not write), 3 if it cannot be reached."""
    server = find_server(server)
    say = make_console()
    try:
        with api_client(server, token) as client:
            resp = client.get(f"/api/commits/{sha}/export", params={"format": format})
    except httpx.HTTPError as exc:
        say.print(unreachable(server, exc), style="red", markup=False, highlight=False)
        raise typer.Exit(3)
    if resp.status_code != 200:
        detail = resp.json().get("detail") if resp.headers.get("content-type", "").startswith("application/json") else None
        say.print(f"{server}/api/commits/{sha}/export: {resp.status_code} {detail or resp.text[:500]}", style="red",
                  markup=False, highlight=False)
        raise typer.Exit(2)
    text = json.dumps(resp.json(), indent=2) + "\n"
    if out is None:
        print(text, end="")
    else:
        out.write_text(text)
