"""`gemmwatch export SHA`: a commit's results and verdicts as JSON, in gemmwatch's versioned schema
(docs/schemas/commit-export-1.json) or in the Bencher Metric Format, to send on
(`bencher run --adapter json --file ...`)."""

import json
from pathlib import Path
from typing import Annotated

import typer

from cli.messages import read_or_exit
from cli.server import SERVER_HELP, find_server


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
    body = read_or_exit(server, token, f"/api/commits/{sha}/export", {"format": format})
    text = json.dumps(body, indent=2) + "\n"
    if out is None:
        print(text, end="")
    else:
        out.write_text(text)
