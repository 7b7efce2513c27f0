"""`gemmwatch up | worker | submit | cancel`: run the whole thing, run one GPU worker, post or cancel a job
(what `up` and `worker` start is in cli/local_stack.py)."""

import enum
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Annotated

import httpx
import typer
from rich.table import Table

from cli.messages import console as make_console, refusal, startup_lines, unreachable
from cli.demo import demo
from cli.progress import wait_for_job
from cli.token_commands import token_app
from cli.variants import variants
from cli.check import check
from cli.export import export
from cli.import_file import import_file
from cli.pr_comment import pr_comment
from cli.server import (LOCAL_HELP, SERVER_HELP, api_client, find_server, forget_server, local_url,
                        port_taken, record_server, trusted_server)
from cli.markup import colored, escape
from core.description.problem_size import read_dims
from core.results.result_status import NOT_APPLICABLE
from cli.local_stack import die_with_parent, ensure_local_token, exit_on_sigterm, gpu_worker_plan, worker_command

# Plain click help (rich_markup_mode=None): it wraps to the terminal and never cuts an option name,
# where rich's panels squeezed `--no-always-confirm` into `--no-always-conf…` at 80 columns.
app = typer.Typer(help="gemmwatch: GEMM kernels (FP32, TF32, FP16, BF16, FP8) against cuBLAS, commit by commit, GPU by GPU.", no_args_is_help=True,
                  rich_markup_mode=None)
app.add_typer(token_app, name="token")
app.command()(demo)  # cli/demo.py: real figures for a machine without a GPU
app.command()(variants)
app.command()(check)  # cli/check.py: a kernels folder built here, no GPU
app.command()(export)
app.command("import")(import_file)
app.command("pr-comment")(pr_comment)
console = make_console()  # no 80-column limit where output is not a terminal (cli/messages.py)
errors = make_console(stderr=True)  # what a script or CI log must see apart from the results


class TimingChoice(str, enum.Enum):
    """The timing modes a job may ask for (README, "Which timing mode")."""

    cold = "cold"
    hot = "hot"
    burst = "burst"
    sustained = "sustained"


TIMING_HELP = ("timing mode of every case: cold (nvbench's), hot (do_bench's loop), burst (a few launches after a "
               "pause: a repository's quick runner), sustained; default: each kernel's own, else the worker's")


@app.command()
def serve(
    port: Annotated[int, typer.Option(help="port for the API and dashboard")] = 8000,
    host: Annotated[str, typer.Option(help="address to listen on")] = "127.0.0.1",
    processes: Annotated[int, typer.Option(min=1, max=64, envvar="WEB_CONCURRENCY",
                                           help="server processes, each on its own SO_REUSEPORT socket")] = 1,
):
    """Run the API and dashboard only (no worker), as docker compose's api service does."""
    # Imported here: `gemmwatch --help` and the HTTP-only commands start without it (start-up time).
    from api.serve import serve as run_server

    run_server(host, port, processes)


@app.command()
def up(
    port: Annotated[int, typer.Option(help="port for the API and dashboard")] = 8000,
    host: Annotated[str, typer.Option(help="address to listen on")] = "127.0.0.1",
):
    """Run the API, the dashboard and one Celery worker per visible GPU (SQLite and a
    server-less broker unless DATABASE_URL / BROKER_URL say otherwise)."""
    if port_taken(host, port):
        # Before anything starts or the record of where gemmwatch serves is touched: the stack that
        # holds the port (if it is one) keeps its record, and its users' commands still find it.
        console.print(f"port {port} on {host} is taken (a gemmwatch already running, or another program): nothing "
                      f"was started. Choose another port: `make up PORT=9000` or `gemmwatch up --port 9000`.",
                      style="red", markup=False, highlight=False)
        raise typer.Exit(1)
    # Imported here: `gemmwatch --help` and the HTTP-only commands start without it (start-up time).
    import uvicorn

    from api.app import create_app
    from core.records.db import upgrade_database
    from core.settings import settings

    upgrade_database(settings)
    ensure_local_token()
    plan = gpu_worker_plan()
    workers = []
    for extra_env, queues, name in plan:
        env = {**os.environ, **extra_env}
        # Warnings and errors only, without Celery's banner: the lines below say what a person needs.
        # A session of its own: Ctrl-C in this terminal reaches this process alone, which stops each
        # worker once (SIGTERM, a warm shutdown), instead of every worker hearing it too and
        # answering "Hitting Ctrl+C again will initiate cold shutdown".
        workers.append(subprocess.Popen(worker_command(queues, name, "WARNING", quiet=True), env=env,
                                        preexec_fn=die_with_parent, start_new_session=True))
    url = local_url(host, port)
    record_server(url)  # where `gemmwatch submit`, `cancel`, `ci` and `run` find this server
    for line in startup_lines(settings, plan, url):
        console.print(line, markup=False, highlight=False)
    # uvicorn re-raises the SIGTERM it handled once it has shut down; as SystemExit, not the
    # default death, it lets the clean-up below run (the record removed, the workers stopped).
    signal.signal(signal.SIGTERM, exit_on_sigterm)
    try:
        uvicorn.run(create_app(settings), host=host, port=port, log_level="warning")
    finally:
        forget_server(url)
        for w in workers:
            w.send_signal(signal.SIGTERM)
        for w in workers:
            try:
                w.wait(15)
            except subprocess.TimeoutExpired:
                w.kill()
        # The last word after Ctrl-C (each worker's "Warm shutdown" line comes before it).
        console.print(f"gemmwatch stopped: the API and {len(workers)} worker(s); the data stays in "
                      f"{settings.data_dir.resolve()}", markup=False, highlight=False)


@app.command()
def worker(
    gpu: Annotated[int, typer.Option(help="CUDA ordinal of the GPU this worker owns (after CUDA_VISIBLE_DEVICES)")] = 0,
    loglevel: str = "INFO",
):
    """Run one Celery worker for one GPU, listening on its model's queue and on gpu.any."""
    plan = gpu_worker_plan()
    if gpu >= len(plan) and plan[0][2] != "nogpu":
        raise typer.BadParameter(f"GPU {gpu} is not visible; {len(plan)} visible")
    extra_env, queues, name = plan[min(gpu, len(plan) - 1)]
    os.environ.update(extra_env)
    os.execv(sys.executable, worker_command(queues, name, loglevel))


def parse_size(text: str) -> list[int]:
    dims = read_dims(text, allow_batch=True)
    if dims is None:
        raise typer.BadParameter(f"{text!r}: give MxNxK (e.g. 4096x4096x4096), MxNxKxBATCH for a batch of "
                                 "matrices (1024x1024x1024x32), or one number for a cube")
    return list(dims)


def print_results(job: dict) -> None:
    table = Table(title=f"job {job['id']}: {job['status']}")
    for col in ("variant", "M×N×K", "verified", "GFLOPS", "cuBLAS GFLOPS", "% cuBLAS", "noise"):
        table.add_column(col, justify="right" if col not in ("variant", "verified") else "left")
    not_run: dict[str, str] = {}  # a not-applicable result's reason, said once under the table
    for r in job["results"]:
        fmt = lambda v, spec: "" if v is None else format(v, spec)  # noqa: E731
        if r.get("status") == NOT_APPLICABLE:  # not run by design: no failure, so not a red "no"
            verified = "[yellow]not applicable[/yellow]"
            not_run.setdefault(r.get("error") or "", f"{r['variant']} {r['m']}×{r['n']}×{r['k']}")
        else:
            verified = "yes" if r["verified"] else "[red]no[/red]"
        table.add_row(
            escape(r["variant"]), f"{r['m']}×{r['n']}×{r['k']}", verified,
            fmt(r["gflops"], ",.0f"), fmt(r["cublas_gflops"], ",.0f"), fmt(r["pct_of_cublas"], ".1f"),
            fmt(r["noise"] and 100 * r["noise"], ".2f") + ("%" if r["noise"] is not None else ""),
        )
    if job["results"]:  # a job that failed before its first result: its error alone, no empty table
        console.print(table)
    else:
        console.print(f"job {job['id']}: {job['status']}, no results", markup=False, highlight=False)
    for reason, first in not_run.items():
        console.print(f"{first}: {reason or 'not applicable'}", style="yellow", markup=False, highlight=False)
    if job.get("error"):
        console.print(job["error"], style="red", markup=False, highlight=False)


@app.command()
def submit(
    variants: Annotated[str, typer.Option(help="comma-separated variant names (GET /api/variants)")],
    size: Annotated[list[str], typer.Option(help="MxNxK, repeatable; one number means a cube")],
    server: Annotated[str | None, typer.Option(help=SERVER_HELP)] = None,
    gpu: Annotated[str | None, typer.Option(help="GPU model, e.g. H100")] = None,
    sha: Annotated[str | None, typer.Option(help="commit sha to file the results under")] = None,
    repo: str = "",
    branch: str | None = None,
    wait: Annotated[bool, typer.Option(help="wait for the job to end and print its results")] = True,
    timeout: Annotated[float, typer.Option(help="seconds to wait")] = 600.0,
    token: Annotated[str | None, typer.Option(help="API token (default: $GEMMWATCH_TOKEN or the local one)")] = None,
    timing: Annotated[TimingChoice | None, typer.Option(help=TIMING_HELP)] = None,
):
    """Post a job; wait for it and print its results. Exits 1 if it failed."""
    server = find_server(server)
    body: dict = {"variants": [v.strip() for v in variants.split(",") if v.strip()], "sizes": [parse_size(s) for s in size]}
    if timing:
        body["timing"] = timing.value
    if gpu:
        body["gpu"] = gpu
    if sha:
        body["commit"] = {"sha": sha, "repo": repo, "branch": branch}
    try:
        with api_client(server, token) as client:
            resp = client.post("/api/jobs", json=body)
            if resp.status_code != 202:
                console.print(refusal(resp), style="red", markup=False, highlight=False)
                raise typer.Exit(2)
            job = resp.json()
            console.print(f"job {job['id']} queued on {job['queue']}: {server}/jobs/{job['id']}")
            if not wait:
                if job.get("waiting"):  # no live worker serves its queue, say: told now, not never
                    console.print(colored("yellow", f"job {job['id']} {job['waiting']}"))
                return
            try:
                job = wait_for_job(client, job, timeout, console, poll_s=0.5)
            except TimeoutError as exc:
                console.print(colored("red", f"timed out: {exc}"))
                raise typer.Exit(3)
    except httpx.HTTPError as exc:
        console.print(unreachable(server, exc), style="red", markup=False, highlight=False)
        raise typer.Exit(3)
    print_results(job)
    if job["status"] != "succeeded":
        raise typer.Exit(1)


@app.command()
def ci(
    commit: Annotated[str, typer.Option(help="sha of the commit under test")],
    server: Annotated[str | None, typer.Option(help=SERVER_HELP)] = None,
    branch: Annotated[str | None, typer.Option(help="the commit's branch")] = None,
    repo: str = "",
    base: Annotated[str | None, typer.Option(help="base commit sha to compare with")] = None,
    base_branch: Annotated[str | None, typer.Option(help="compare with this branch's history")] = None,
    variants: Annotated[str | None, typer.Option(help="comma-separated built-in variants (or a subset of --kernels-dir)")] = None,
    kernels_dir: Annotated[Path | None, typer.Option(help="folder with the commit's kernels and their gemmwatch.json")] = None,
    size: Annotated[list[str] | None, typer.Option(help="MxNxK, repeatable (default 4096)")] = None,
    gpu: Annotated[str | None, typer.Option(help="GPU model, e.g. H100")] = None,
    timeout: Annotated[float, typer.Option(help="seconds to wait for the job")] = 1800.0,
    token: Annotated[str | None, typer.Option(help="API token (default: $GEMMWATCH_TOKEN)")] = None,
    parents: Annotated[str | None, typer.Option(help="the commit's parent shas, first parent first, comma-separated"
                                                " (default: `git rev-parse COMMIT^@` here)")] = None,
    confirm: Annotated[bool, typer.Option(help="confirm a change by timing base and head kernels in one job")] = True,
    always_confirm: Annotated[bool, typer.Option(help="confirm every compared result, changed or not")] = False,
    profile: Annotated[bool, typer.Option(help="profile every confirmed case, base and head (a confirmed change "
                                               "is profiled anyway)")] = False,
    local: Annotated[bool, typer.Option("--local", help=LOCAL_HELP)] = False,
    timing: Annotated[TimingChoice | None, typer.Option(help=TIMING_HELP)] = None,
    summary_out: Annotated[Path | None, typer.Option(help="write the Markdown summary to this file too (for a pull "
                                                           "request's comment: `gemmwatch pr-comment`)")] = None,
):
    """Benchmark a commit and compare with its base; a change is confirmed by an A/B job unless
    --no-confirm. Exit 0: no regression; 1: regression; 2: a failed or unverified result;
    3: server unreachable or timed out. Its server and token: flags and environment only, unless --local."""
    server = trusted_server(server, local)
    # Imported here: `gemmwatch --help` and the HTTP-only commands start without it (start-up time).
    from cli.ci import FAILED, build_job, commit_sha, git_parents, run_ci

    try:
        commit = commit_sha(commit)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None
    from core.description.kernel_folder import FolderError

    names = [v.strip() for v in (variants or "").split(",") if v.strip()]
    if not names and kernels_dir is None:
        raise typer.BadParameter("give --variants or --kernels-dir")
    shas = [p.strip() for p in parents.split(",") if p.strip()] if parents is not None else git_parents(commit)
    branch = branch or os.environ.get("GITHUB_HEAD_REF") or os.environ.get("GITHUB_REF_NAME") or None
    try:
        body = build_job(commit, branch, repo, [parse_size(s) for s in size or ["4096"]], gpu, names, kernels_dir, shas,
                         timing.value if timing else None)
    except FolderError as exc:
        errors.print(colored("red", f"{kernels_dir}: its kernels cannot be posted:") + "\n" + escape(str(exc)), highlight=False, soft_wrap=True)
        raise typer.Exit(FAILED)
    with api_client(server, token, from_data_dir=local) as client:
        raise typer.Exit(run_ci(client, body, base, base_branch, timeout, confirm, always_confirm, profile,
                                start_hint=local, summary_out=summary_out))


@app.command("run")
def run_local(
    variants: Annotated[str | None, typer.Option(help="comma-separated variants (or a subset of --kernels-dir)")] = None,
    kernels_dir: Annotated[Path | None, typer.Option(help="folder with kernels and their gemmwatch.json")] = None,
    size: Annotated[list[str] | None, typer.Option(help="MxNxK, repeatable (default 4096)")] = None,
    post: Annotated[bool, typer.Option(help="POST the results to --server")] = False,
    server: Annotated[str | None, typer.Option(help=SERVER_HELP)] = None,
    commit: Annotated[str | None, typer.Option(help="commit sha to file the results under")] = None,
    branch: str | None = None,
    repo: str = "",
    save: Annotated[Path | None, typer.Option(help="also write the batch (as posted) to this JSON file")] = None,
    token: Annotated[str | None, typer.Option(help="API token (default: $GEMMWATCH_TOKEN)")] = None,
    local: Annotated[bool, typer.Option("--local", help=LOCAL_HELP)] = False,
    timing: Annotated[TimingChoice | None, typer.Option(help=TIMING_HELP)] = None,
):
    """Measure on this machine's GPU with the same runner the workers use; --post sends the
    results to a server (idempotent: posting the same run twice adds nothing). Exit 2 if a
    case failed, 3 if the server could not be reached. Its server and token, as `ci`'s."""
    server = trusted_server(server, local, "gemmwatch run --post") if post else None
    # Imported here: `gemmwatch --help` and the HTTP-only commands start without it (start-up time).
    from cli.ci import commit_sha
    from cli.local_run import batch, measure
    from core.description.kernel_folder import FolderError, load_folder

    try:  # before anything is measured: a name git knows becomes its sha, anything else is refused now
        commit = commit_sha(commit) if commit else commit
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None

    names = [v.strip() for v in (variants or "").split(",") if v.strip()]
    try:
        sources = [d.model_dump(mode="json") for d in load_folder(kernels_dir, names or None)] if kernels_dir else []
    except FolderError as exc:
        errors.print(colored("red", f"{kernels_dir}: its kernels cannot be measured:") + "\n" + escape(str(exc)), highlight=False, soft_wrap=True)
        raise typer.Exit(2)
    names = names or [s["name"] for s in sources]
    if not names:
        raise typer.BadParameter("give --variants or --kernels-dir")
    identity, results, problems = measure(names, [parse_size(s) for s in size or ["4096"]], sources,
                                          timing.value if timing else None)
    if results:
        print_results({"id": "local", "status": "failed" if problems else "succeeded", "results": results,
                       "error": "\n".join(problems) or None})
    elif problems:
        console.print(colored("red", chr(10).join(problems)))
    body = batch(identity, results, {"sha": commit, "repo": repo, "branch": branch} if commit else None)
    if save:
        save.write_text(json.dumps(body))
    if post and results:
        try:
            with api_client(server, token, from_data_dir=local) as client:
                resp = client.post("/api/results", json=body)
        except httpx.HTTPError as exc:
            console.print(unreachable(server, exc), style="red", markup=False, highlight=False)
            raise typer.Exit(3)
        if resp.status_code not in (200, 201):
            console.print(colored("red", f"{resp.status_code}: {resp.text}"))
            raise typer.Exit(2)
        console.print(f"posted as job {resp.json()['job_id']}: {server}/jobs/{resp.json()['job_id']}")
    raise typer.Exit(2 if problems else 0)


@app.command()
def cancel(
    job_id: Annotated[int, typer.Argument(help="the job's id")],
    server: Annotated[str | None, typer.Option(help=SERVER_HELP)] = None,
    token: Annotated[str | None, typer.Option(help="API token (default: $GEMMWATCH_TOKEN or the local one)")] = None,
):
    """Cancel a queued or running job: a queued one never runs, a running one stops after its
    current case and keeps its results. Exits 1 if the job had already ended or does not exist."""
    server = find_server(server)
    try:
        with api_client(server, token) as client:
            resp = client.post(f"/api/jobs/{job_id}/cancel")
    except httpx.HTTPError as exc:
        console.print(unreachable(server, exc), style="red", markup=False, highlight=False)
        raise typer.Exit(3)
    if resp.status_code != 200:
        detail = resp.json().get("detail", resp.text) if resp.headers.get("content-type", "").startswith("application/json") else resp.text
        console.print(colored("red", f"{resp.status_code}: {detail}"))
        raise typer.Exit(1 if resp.status_code in (404, 409) else 2)
    job = resp.json()
    p = job["progress"]
    console.print(f"job {job_id} cancelled ({p['done']}/{p['total']} cases done; any running case stops the job "
                  f"after it): {server}/jobs/{job_id}")


@app.command()
def reap():
    """Queue again the jobs whose worker died or whose broker message was lost (workers do
    this every GEMMWATCH_REAPER_INTERVAL_S seconds by themselves)."""
    # Imported here: `gemmwatch --help` and the HTTP-only commands start without it (start-up time).
    from core.settings import settings
    from worker.reaper import reap as reap_once

    ids = reap_once(settings)
    console.print(f"queued again: {ids}" if ids else "nothing to queue again")


if __name__ == "__main__":
    app()
