"""What the CLI tells a person when something is off: one line that says what happened and
what to do, not the server's raw JSON or a socket's errno; and consoles whose tables are not
cut at 80 columns when the output goes to a file or a CI log."""

import difflib
import os
import re

import httpx
from rich.console import Console

from cli.server import DEFAULT_SERVER, server_record_path

# Where output is not a terminal (a pipe, a file, a CI log) rich assumes 80 columns and squeezes
# a wider table, cutting its cells to "…". A line there may be as long as it needs to be.
UNBOUNDED_WIDTH = 100_000
LIST_VARIANTS = "`gemmwatch variants` lists them"


def console(stderr: bool = False) -> Console:
    """A rich Console: the terminal's width on a terminal (or $COLUMNS where set), otherwise no limit."""
    found = Console(stderr=stderr)
    if found.is_terminal or os.environ.get("COLUMNS", "").isdigit():
        return found
    return Console(stderr=stderr, width=UNBOUNDED_WIDTH)


def unreachable(server: str, exc: httpx.HTTPError, start_hint: bool = True) -> str:
    """Why `server` could not be reached, and what to do about it (in CI, no `make up`)."""
    if isinstance(exc, httpx.ConnectError) and "refused" in str(exc).lower():
        why = "nothing is listening there (connection refused)"
    elif isinstance(exc, httpx.ConnectError):
        why = f"it cannot be connected to ({exc})"
    elif isinstance(exc, httpx.TimeoutException):
        why = "it did not answer in time"
    else:
        why = str(exc) or type(exc).__name__
    start = "Start gemmwatch with `make up` (or `gemmwatch up`), or point" if start_hint else "Point"
    return f"cannot reach {server}{_default_note(server)}: {why}. {start} at a running server with --server URL or $GEMMWATCH_SERVER."


def _default_note(server: str) -> str:
    """Where `server` is only the default: no `make up` here has recorded where it serves (a stack
    started with PORT=9000 and stopped since, say), which is what a person needs to know."""
    if server != DEFAULT_SERVER or os.environ.get("GEMMWATCH_SERVER") or server_record_path().exists():
        return ""
    return " (the default address: no running `make up` is recorded in this folder)"


_UNKNOWN = re.compile(r"unknown variant\(s\) \[(?P<unknown>[^\]]*)\]; known variants: (?P<known>[^;]*)"
                      r"(?:; the job's sources: (?P<own>.*))?")


def unknown_variants(message: str) -> list[str] | None:
    """One line per unknown variant named in the server's refusal, each with the closest names;
    None where the message is not about unknown variants."""
    found = _UNKNOWN.search(message)
    if not found:
        return None
    unknown = re.findall(r"'((?:[^'\\]|\\.)*)'", found["unknown"])
    known = [n.strip() for n in found["known"].split(",") if n.strip()]
    known += [n.strip() for n in (found["own"] or "").split(",") if n.strip()]
    lines = []
    for name in unknown:
        close = difflib.get_close_matches(name, known, n=3, cutoff=0.6)
        hint = f"did you mean {', '.join(close)}?" if close else "no known variant is close to it."
        lines.append(f"unknown variant {name!r}: {hint} {LIST_VARIANTS} ({len(known)} known).")
    return lines


def refusal(resp: httpx.Response) -> str:
    """A refused request as a person reads it: the server's reasons, not its JSON."""
    try:
        detail = resp.json().get("detail", resp.text)
    except ValueError:
        detail = resp.text
    if isinstance(detail, list):  # FastAPI's validation errors: the field and the reason of each, once
        reasons = []
        for item in detail:
            msg = str(item.get("msg", item)).removeprefix("Value error, ")
            found = unknown_variants(msg)
            if found:
                reasons += found
                continue
            where = ".".join(str(p) for p in item.get("loc", [])[1:])
            reasons.append(f"{where}: {msg}" if where else msg)
        return "\n".join(dict.fromkeys(reasons))
    return "\n".join(unknown_variants(str(detail)) or [f"{resp.status_code}: {detail}"])


def _without_password(url: str) -> str:
    return re.sub(r"//([^:/@]+):[^@/]*@", r"//\1:***@", url)


def startup_lines(cfg, plan: list[tuple[dict, list[str], str]], url: str) -> list[str]:
    """What `gemmwatch up` says once: where it serves, where its data lives, its workers, how to stop."""
    data = cfg.data_dir.resolve()
    lines = [f"gemmwatch at {url}/  (API docs at {url}/docs)"]
    if plan[0][2] == "nogpu":
        lines.append("  worker    no GPU visible: the API serves, and jobs fail with 'no CUDA device'")
    else:
        lines += [f"  worker    {name}: queues {', '.join(queues)}" for _env, queues, name in plan]
    kept = [what for what, embedded in (("SQLite database", not cfg.database_url), ("broker", cfg.embedded_broker))
            if embedded]
    lines.append(f"  data      {data}  ({', '.join([*kept, 'write token', 'server address'])})")
    if cfg.database_url:
        lines.append(f"  database  {_without_password(cfg.database_url)}")
    if not cfg.embedded_broker:
        lines.append(f"  broker    {_without_password(cfg.broker_url)}")
    lines.append("  stop      Ctrl-C here (the API and its workers stop together)")
    return lines


def read_or_exit(server: str, token: str | None, path: str, params: dict | None = None):
    """GET `path`'s JSON from the server, or exit as the read-only commands do: 3 where the server
    cannot be reached, 2 where it refuses (its own reason shown, as a person reads it)."""
    import typer  # here: this module is imported by commands that never read

    from cli.server import api_client

    say = console()
    try:
        with api_client(server, token) as client:
            resp = client.get(path, params=params)
    except httpx.HTTPError as exc:
        say.print(unreachable(server, exc), style="red", markup=False, highlight=False)
        raise typer.Exit(3)
    if resp.status_code != 200:
        try:
            detail = resp.json().get("detail")
        except ValueError:
            detail = None
        say.print(f"{server}{path}: {resp.status_code} {detail if isinstance(detail, str) else resp.text[:500]}",
                  style="red", markup=False, highlight=False)
        raise typer.Exit(2)
    return resp.json()
