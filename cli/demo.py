"""`gemmwatch demo`: real figures into a running gemmwatch, so a machine without a GPU sees charts.

The figures are in cli/demo_figures/ (its PROVENANCE.md says how they were made): this project's
own kernels at four of its commits, measured by `gemmwatch ci` on an H100 and on an H200, each job
saved as `GET /api/jobs/{id}` returned it. Each bench job is posted as one run through
`POST /api/results`, the route a GPU machine of its own posts to (`gemmwatch run --post`):

- its run_id is `job-<GPU uuid>-<job id>`, so posting it again (with the same token) adds nothing;
- its commit keeps the sha, repo, branch and parents `gemmwatch ci` sent, so history and baselines
  follow the ancestry; cli/demo_figures/commits.json adds each commit's date and subject line from
  this project's git log (the saved jobs do not carry them);
- each result keeps its `env` as the worker recorded it, the GPU's identity (name, uuid, driver,
  clocks) included, and `env.extra.demo_source` names the file it came from.

A confirmation job (kind "confirm", its results in mode "ab": base and head kernels interleaved in
one job) is skipped: it belongs to the job it confirms, which a posted run cannot name, and its
verdicts are in the `ci-<sha>.log` beside it.

`as_batch` is also what scripts/import_job_results.py posts for any saved job file.
"""

import json
from datetime import datetime
from pathlib import Path
from typing import Annotated

import httpx
import typer

from cli.messages import unreachable
from cli.server import SERVER_HELP, api_client, find_server

FIGURES = Path(__file__).resolve().parent / "demo_figures"
PROVENANCE = "cli/demo_figures/PROVENANCE.md"
COMMITS_FILE = "commits.json"  # in the figures folder: each commit's date and subject line (git log)

# Views of these figures worth opening first: the command prints them, and tests/test_demo.py opens
# and photographs each (docs/DASHBOARD.md, "The demo"). BF16 at 4096³: every commit measured it on
# both GPUs, and 4e40129 is where bf16_wgmma and fp16_wgmma began to spill and lost 2-4 %.
REGRESSION_COMMIT = "4e4012905a2e"
VIEWS = {
    "overview": "/?size=4096x4096x4096&mode=cold&precision=bf16",
    "history": "/history?gpu=H100&size=4096x4096x4096&mode=cold&precision=bf16",
    "sweep": "/sweep?mode=cold&precision=bf16",
    "compare-gpus": "/compare?by=gpu&a=H100&b=H200&mode=cold&precision=bf16",
    "compare-commits": f"/compare?by=commit&gpu=H100&a=433b9efd85a5&b={REGRESSION_COMMIT}&mode=cold&precision=bf16",
    "roofline": "/roofline?gpu=H100&mode=cold",
    "commit": f"/commits/{REGRESSION_COMMIT}",
}

# Exit codes, as the other commands use them.
REFUSED, UNREACHABLE = 2, 3


def as_batch(job: dict, commit_extra: dict | None = None, source: str | None = None) -> dict:
    """The body of POST /api/results for a finished job as `GET /api/jobs/{id}` returned it.

    commit_extra: identity fields the job's commit lacks (message, committed_at), filled in where
    the job has none; source: noted in each result's env.extra.demo_source."""
    # Imported here: `gemmwatch --help` and the HTTP-only commands start without it (start-up time).
    from api.posted_schemas import CommitIn, GpuIn, ResultIn

    if not job.get("results"):
        raise ValueError(f"job {job.get('id')} has no results")
    ident = job["results"][0]["env"]["gpu"]
    gpu = {k: ident.get(k) for k in GpuIn.model_fields}
    results = []
    for r in job["results"]:
        out = {k: v for k, v in r.items() if k in ResultIn.model_fields}
        if source:
            env = dict(out.get("env") or {})
            env["extra"] = {**(env.get("extra") or {}), "demo_source": source}
            out["env"] = env
        results.append(out)
    body = {"run_id": f"job-{gpu['uuid']}-{job['id']}", "gpu": gpu, "results": results}
    if job.get("commit"):
        commit = {k: v for k, v in job["commit"].items() if k in CommitIn.model_fields}
        for key, value in (commit_extra or {}).items():
            if key in CommitIn.model_fields and commit.get(key) is None:
                commit[key] = value
        body["commit"] = commit
    return body


def skip_reason(job: dict) -> str | None:
    """Why a saved job is not posted as a run, or None."""
    if job.get("kind") == "confirm" or any(r.get("mode") == "ab" for r in job.get("results") or ()):
        return ("a confirmation job (base and head kernels interleaved, mode \"ab\"), which a posted run"
                " cannot attach to the job it confirms; its verdicts are in the ci-<sha>.log beside it")
    if not job.get("results"):
        return f"no results (status {job.get('status')})"
    return None


def load_figures(folder: Path = FIGURES) -> tuple[list[tuple[Path, dict]], dict[str, dict]]:
    """The saved jobs (one folder per GPU), in the order to post them: by commit date, oldest first,
    then by when each job ran; and the commits' extra identity by sha."""
    extra_path = folder / COMMITS_FILE
    extra = json.loads(extra_path.read_text())["commits"] if extra_path.exists() else {}
    jobs = [(path, json.loads(path.read_text())) for path in sorted(folder.glob("*/*.json"))]
    if not jobs:
        raise FileNotFoundError(f"no saved jobs (*/N.json) in {folder}")

    def when(item: tuple[Path, dict]) -> tuple[str, str]:
        job = item[1]
        sha = (job.get("commit") or {}).get("sha")
        dated = extra.get(sha, {}).get("committed_at") or (job.get("commit") or {}).get("committed_at")
        ran = job.get("created_at") or ""
        return (datetime.fromisoformat(dated).isoformat() if dated else ran, ran)

    return sorted(jobs, key=when), extra


def _relative(path: Path, folder: Path) -> str:
    return str(path.relative_to(folder.parent.parent)) if folder == FIGURES else str(path)


def demo(
    server: Annotated[str | None, typer.Option(help=SERVER_HELP)] = None,
    token: Annotated[str | None, typer.Option(help="API token with the results scope (default: $GEMMWATCH_TOKEN or"
                                                    " the one `make up` left in .gemmwatch/token)")] = None,
    figures: Annotated[Path, typer.Option(help="folder of saved jobs, one subfolder per GPU",
                                              show_default="cli/demo_figures")] = FIGURES,
):
    """Load real figures (this project's kernels at four commits, measured on an H100 and an H200;
    cli/demo_figures/PROVENANCE.md) into a running gemmwatch through POST /api/results, so the
    dashboard has charts without a GPU. Run it again: it adds nothing. Exit 2 if the server refused
    a run, 3 if it cannot be reached."""
    server = find_server(server)
    jobs, extra = load_figures(figures)
    shown = "cli/demo_figures" if figures == FIGURES else str(figures)
    typer.echo(f"gemmwatch demo: real measurements from {shown}, made as {shown}/PROVENANCE.md says")
    posted = added = already = 0
    skipped: dict[str, list[str]] = {}  # reason -> files
    gpus: dict[str, str] = {}
    try:
        with api_client(server, token) as client:
            for path, job in jobs:
                name = _relative(path, figures)
                why = skip_reason(job)
                if why:
                    skipped.setdefault(why, []).append(name)
                    continue
                commit = job.get("commit") or {}
                body = as_batch(job, extra.get(commit.get("sha")), source=f"{name} ({PROVENANCE})")
                resp = client.post("/api/results", json=body)
                if resp.status_code not in (200, 201):
                    typer.echo(f"  {name}: refused, {resp.status_code} {resp.text[:1000]}", err=True)
                    if resp.status_code in (401, 403):
                        typer.echo("  posting results needs a token with the results scope: --token, "
                                   "$GEMMWATCH_TOKEN, or run where `make up` runs (it leaves .gemmwatch/token)",
                                   err=True)
                    raise typer.Exit(REFUSED)
                out = resp.json()
                gpu = body["gpu"]
                gpus[gpu["name"]] = f"{gpu['name']} (uuid {gpu['uuid']}, driver {gpu.get('driver') or '?'})"
                posted += 1
                added += out["results"] if out["created"] else 0
                already += 0 if out["created"] else 1
                where = f"{commit.get('sha', '')[:7]} on {commit.get('branch') or '(no branch)'}" if commit else "no commit"
                state = "new" if out["created"] else "there already, nothing added"
                typer.echo(f"  {name}: {gpu['name']}, {where}, {len(body['results'])} results -> "
                           f"{server}/jobs/{out['job_id']} ({state})")
    except httpx.HTTPError as exc:
        typer.echo(unreachable(server, exc), err=True)
        raise typer.Exit(UNREACHABLE)
    typer.echo(f"{posted} runs loaded ({added} results added, {already} runs there already)")
    for why, names in skipped.items():
        typer.echo(f"  skipped {len(names)} ({', '.join(names)}): {why}")
    for line in gpus.values():
        typer.echo(f"  measured on {line}")
    typer.echo(f"open {server}/")
    if figures == FIGURES:
        for name, path in VIEWS.items():
            typer.echo(f"  {name}: {server}{path}")
