"""Kernel folders through the whole stack on a GPU machine (issue 19's must-shows, for
docs/BENCHMARKS.md): a server on SQLite, a Redis broker, one real GPU worker, and the `gemmwatch`
CLI as a CI runner would call it.

  builtins   every built-in kernel measured by name (its built-in figure, commit b0b0...), then
             `gemmwatch ci --kernels-dir kernels --always-confirm` for a commit whose parent that is:
             the summary's delta is the folder's figure against the built-in's, and each kernel is
             confirmed head against base in one A/B job
  repo DIR   `gemmwatch ci --kernels-dir DIR` for a kernel repository with a gemmwatch.json

Usage (GPU machine, project root, Redis on 127.0.0.1:6379):
  python3 scripts/studies/gpu_kernel_folders.py OUT_DIR --size 4096 builtins repo PATH [repo PATH ...]
Each step's summary (Markdown), exit code and jobs (JSON) are written to OUT_DIR.
GEMMWATCH_TIMING_MODE=hot in the environment times hot, as most repositories' own runners do;
--timing MODE asks each repo step's jobs for that mode (over the manifest's own "timing").
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]  # scripts/studies/ -> the project root
PORT = 8871


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--size", action="append", default=None)
    ap.add_argument("--timing", default=None, help="a repo step's `gemmwatch ci --timing` (default: the manifest's)")
    ap.add_argument("steps", nargs="+", help="builtins | repo PATH")
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(124))  # `timeout`'s signal still saves the jobs (below)
    args.out.mkdir(parents=True, exist_ok=True)
    sizes = args.size or ["4096"]
    data = Path(tempfile.mkdtemp(prefix="gemmwatch-gpu-"))
    env = {**os.environ, "GEMMWATCH_DATA_DIR": str(data), "BROKER_URL": "redis://127.0.0.1:6379/5",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    cli = [sys.executable, "-m", "cli.main"]
    token = subprocess.run([*cli, "token", "create", "gpu-run"], env=env, capture_output=True, text=True,
                           check=True).stdout.strip()
    env["GEMMWATCH_TOKEN"] = token
    log = open(args.out / "stack.log", "w")
    procs = [subprocess.Popen([*cli, "serve", "--port", str(PORT)], env=env, stdout=log, stderr=log, cwd=ROOT),
             subprocess.Popen([*cli, "worker"], env=env, stdout=log, stderr=log, cwd=ROOT)]
    server = f"http://127.0.0.1:{PORT}"
    try:
        _wait_up(server)
        steps, i = [], 0
        while i < len(args.steps):
            if args.steps[i] == "repo":
                steps.append(("repo", Path(args.steps[i + 1])))
                i += 2
            else:
                steps.append((args.steps[i], None))
                i += 1
        size_args = [a for s in sizes for a in ("--size", s)]
        for kind, path in steps:
            started = time.monotonic()
            if kind == "builtins":
                names = [v["name"] for v in httpx.get(f"{server}/api/variants").json() if v["name"] != "cublas"]
                run(args.out, "builtins_by_name", [*cli, "submit", "--server", server, "--variants", ",".join(names),
                                                   *size_args, "--sha", "b0b0b0b0", "--branch", "main",
                                                   "--timeout", "1800"], env)
                run(args.out, "builtins_ci", [*cli, "ci", "--server", server, "--commit", "c1c1c1c1", "--branch", "pr",
                                              "--parents", "b0b0b0b0", "--base", "b0b0b0b0", "--kernels-dir",
                                              str(ROOT / "kernels"), *size_args, "--always-confirm",
                                              "--timeout", "1800"], env)
            elif kind == "repo":
                timing = ["--timing", args.timing] if args.timing else []
                run(args.out, f"repo_{path.name}", [*cli, "ci", "--server", server, "--commit",
                                                    "cc00cc00" if args.timing else "aa00aa00", "--branch", path.name,
                                                    "--parents", "", "--kernels-dir", str(path), *size_args, *timing,
                                                    "--timeout", "1800"], env)
            print(f"{kind} {path or ''}: {time.monotonic() - started:.0f} s", flush=True)
    finally:
        _save_jobs(server, args.out)  # a study stopped by its time limit keeps the cases its jobs finished
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait(30)


def _save_jobs(server: str, out: Path) -> None:
    try:
        jobs = httpx.get(f"{server}/api/jobs", params={"limit": 50}).json()
        full = [httpx.get(f"{server}/api/jobs/{j['id']}").json() for j in jobs]
    except (httpx.HTTPError, ValueError) as exc:
        print(f"the jobs could not be read: {exc}", flush=True)
        return
    (out / "jobs.json").write_text(json.dumps(full, default=str))


def run(out: Path, name: str, cmd: list[str], env: dict) -> None:
    """The command's output goes into its file as it comes: a study stopped by a time limit keeps
    what the CLI had said (a job's error among it), where a captured output was lost with the process."""
    with open(out / f"{name}.md", "w") as log:
        log.write(f"$ {' '.join(cmd[2:])}\n\n")
        log.flush()
        done = subprocess.run(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)
        log.write(f"\n# exit code {done.returncode}\n")
    print(f"{name}: exit {done.returncode}", flush=True)


def _wait_up(server: str) -> None:
    for _ in range(120):
        try:
            if httpx.get(f"{server}/api/workers").json():
                return
        except (httpx.HTTPError, ValueError):
            pass
        time.sleep(0.5)
    raise SystemExit("the server or its worker did not come up")


if __name__ == "__main__":
    main()
