"""`gemmwatch import FILE`: results another tool measured (nvbench JSON, a CUTLASS profiler CSV, a plain
table) sent to a server (POST /api/imports), then each one's verdict against its history.

The file goes as the tool wrote it; the server reads it (core/exchange/imports/). What the file does
not say comes from the options or, written once, from a mapping file (--map) kept beside the
benchmark: {"axes": {"m": "Size", "n": "Size", "k": "Size", "dtype": "T"}, "form": "rrr+ab"}.
"""

import base64
import json
from pathlib import Path
from typing import Annotated, Any

import httpx
import typer

from cli.markup import colored
from cli.messages import console as make_console, refusal, unreachable
from cli.server import LOCAL_HELP, SERVER_HELP, api_client, trusted_server

MAP_KEYS = ("axes", "dtype", "device", "form", "timed", "gpu")
SAMPLE_FILES = "nv/json/bin:"  # nvbench's --jsonbin summaries that name a file of sample times


def import_file(
    file: Annotated[Path, typer.Argument(help="the tool's output: nvbench --json/--jsonbin, cutlass_profiler "
                                               "--output CSV, or a table (CSV or JSON)", exists=True, dir_okay=False)],
    commit: Annotated[str, typer.Option(help="the commit the numbers belong to: a sha, or a name git knows here (HEAD)")],
    format: Annotated[str, typer.Option(help="auto, nvbench, cutlass-profiler, csv or json")] = "auto",
    axis: Annotated[list[str] | None, typer.Option(help="nvbench: ROLE=AXIS, which axis says m, n, k or dtype "
                                                        "(repeatable; default the axes named M, N, K and T)")] = None,
    dtype: Annotated[str | None, typer.Option(help="the element type where no axis says it: fp32, tf32, fp16, "
                                                   "bf16, fp8")] = None,
    form: Annotated[str | None, typer.Option(help="the GEMM's form where the file does not say it (\"rrr+ab\": "
                                                  "A, B, C row-major, C = A·B)")] = None,
    device: Annotated[int | None, typer.Option(help="nvbench: the device to import, where the file holds several")] = None,
    timed: Annotated[str | None, typer.Option(help="a table: how its times were taken (\"do_bench, 100 reps\")")] = None,
    gpu: Annotated[str | None, typer.Option(help="the GPU's name as nvidia-smi prints it (a CUTLASS CSV or a table "
                                                 "does not say it)")] = None,
    gpu_uuid: Annotated[str | None, typer.Option(help="the GPU's uuid (nvidia-smi -L), to file the results under "
                                                      "that card")] = None,
    map_file: Annotated[Path | None, typer.Option("--map", help="a JSON mapping written once: axes, dtype, device, "
                                                                "form, timed, gpu; options override it")] = None,
    repo: str = "",
    branch: str | None = None,
    parents: Annotated[str | None, typer.Option(help="the commit's parent shas, first parent first, comma-separated "
                                                     "(default: git's)")] = None,
    base: Annotated[str | None, typer.Option(help="judge against this base commit (default: the commit's history)")] = None,
    server: Annotated[str | None, typer.Option(help=SERVER_HELP)] = None,
    token: Annotated[str | None, typer.Option(help="API token with the results scope (default: $GEMMWATCH_TOKEN)")] = None,
    local: Annotated[bool, typer.Option("--local", help=LOCAL_HELP)] = False,
):
    """Import another tool's results under a commit, and print each one's verdict. Imported results
    keep a mode of their own ("nvbench:cold"): charts and verdicts never mix them with gemmwatch's.
    Importing the same file again adds nothing. Exits 1 on a regression, 2 if the server refuses the
    file (its reason shown), 3 if it cannot be reached."""
    from cli.ci import commit_sha, git_parents

    say = make_console()
    server = trusted_server(server, local, "gemmwatch import")
    try:
        sha = commit_sha(commit)
        mapping = _mapping(map_file, axis, dtype, form, device, timed, gpu, gpu_uuid)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None
    body = _body(file, format, mapping)
    shas = [p.strip() for p in parents.split(",") if p.strip()] if parents is not None else git_parents(sha)
    body["commit"] = {"sha": sha, "repo": repo, "branch": branch} | ({"parents": shas} if shas else {})
    try:
        with api_client(server, token, from_data_dir=local) as client:
            resp = client.post("/api/imports", json=body)
            if resp.status_code not in (200, 201):
                say.print(colored("red", f"{file}: not imported ({resp.status_code}): ") + refusal(resp), highlight=False,
                          soft_wrap=True, markup=False)
                raise typer.Exit(2)
            done = resp.json()
            verdicts = client.get(f"/api/jobs/{done['job_id']}/verdicts", params={"base": base} if base else None)
    except httpx.HTTPError as exc:
        say.print(unreachable(server, exc), style="red", markup=False, highlight=False)
        raise typer.Exit(3) from None
    said = "imported" if done["created"] else "imported before (nothing added)"
    say.print(f"{file.name}: {done['results']} results {said} as job {done['job_id']} ({', '.join(done['modes'])}): "
              f"{server}/jobs/{done['job_id']}", markup=False, highlight=False)
    for reason in done["skipped"]:
        say.print(f"  skipped {reason}", markup=False, highlight=False)
    found = verdicts.json() if verdicts.status_code == 200 else []
    _print_verdicts(say, found)
    raise typer.Exit(1 if any(v["status"] == "regression" for v in found) else 0)


def _mapping(map_file: Path | None, axis: list[str] | None, dtype, form, device, timed, gpu, gpu_uuid) -> dict:
    mapping: dict[str, Any] = {}
    if map_file is not None:
        try:
            mapping = json.loads(map_file.read_text())
        except (OSError, ValueError) as exc:
            raise ValueError(f"--map {map_file}: {exc}") from None
        unknown = set(mapping) - set(MAP_KEYS) if isinstance(mapping, dict) else {"(not an object)"}
        if unknown:
            raise ValueError(f"--map {map_file}: unknown keys {', '.join(sorted(unknown))} (it takes {', '.join(MAP_KEYS)})")
    axes = dict(mapping.get("axes") or {})
    for item in axis or []:
        role, sep, name = item.partition("=")
        if not sep or role.strip() not in ("m", "n", "k", "dtype") or not name.strip():
            raise ValueError(f"--axis {item}: give ROLE=AXIS, ROLE one of m, n, k, dtype (--axis m=Size)")
        axes[role.strip()] = name.strip()
    given = {"dtype": dtype, "form": form, "device": device, "timed": timed}
    out = {key: value for key, value in mapping.items() if key in ("dtype", "form", "device", "timed", "gpu")}
    out |= {key: value for key, value in given.items() if value is not None}
    gpu_said = dict(out.get("gpu") or {}) | ({"name": gpu} if gpu else {}) | ({"uuid": gpu_uuid} if gpu_uuid else {})
    return out | ({"axes": axes} if axes else {}) | ({"gpu": gpu_said} if gpu_said else {})


def _body(file: Path, format: str, mapping: dict) -> dict:
    from core.exchange.imports import guess_format

    text = file.read_text(encoding="utf-8", errors="replace")
    chosen = guess_format(file.name, text[:4096]) if format == "auto" else format
    body = {"format": chosen, "content": text, "file_name": file.name, **mapping}
    if chosen == "nvbench":
        body["files"] = _sample_files(file, text)
    return body


def _sample_files(file: Path, text: str) -> dict[str, str]:
    """nvbench's sample files (--jsonbin) that sit beside the JSON, base64, by the name it gives them."""
    try:
        document = json.loads(text)
    except (ValueError, RecursionError):
        return {}  # the server says what is wrong with it
    found: dict[str, str] = {}
    benchmarks = document.get("benchmarks") if isinstance(document, dict) else None
    for bench in benchmarks if isinstance(benchmarks, list) else []:
        for state in _objects(bench, "states"):
            for summary in _objects(state, "summaries"):
                if not str(summary.get("tag", "")).startswith(SAMPLE_FILES + "nv/cold/sample_times"):
                    continue
                name = next((d.get("value") for d in _objects(summary, "data") if d.get("name") == "filename"), None)
                path = file.parent / str(name)
                if name and path.is_file() and path.resolve().is_relative_to(file.parent.resolve()):
                    found[str(name)] = base64.b64encode(path.read_bytes()).decode()
    return found


def _print_verdicts(say, verdicts: list[dict]) -> None:
    """One line a verdict, its word first (a table of eight columns wrapped every word at 80)."""
    for v in verdicts:
        delta = f" {100 * v['delta']:+.1f} %" if v.get("delta") is not None else ""
        speed = f" {v['gflops']:,.0f} GFLOPS" if v.get("gflops") else ""
        say.print(f"{v['status']:<11} {v['variant']} {v['m']}x{v['n']}x{v['k']} {v.get('form', '')} {v.get('mode', '')}"
                  f"{speed}{delta}: {v.get('reason', '')}", markup=False, highlight=False, soft_wrap=True)


def _objects(parent: object, key: str) -> list[dict]:
    """parent[key]'s objects, where parent is an object and that is a list (the server says what is
    wrong with a file of another shape)."""
    items = parent.get(key) if isinstance(parent, dict) else None
    return [item for item in items if isinstance(item, dict)] if isinstance(items, list) else []
