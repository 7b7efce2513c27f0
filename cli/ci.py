"""`gemmwatch ci`: benchmark a commit, compare it with its base, fail the build on a regression.

Exit codes: 0 no regression, 1 regression, 2 a failed or unverified result, 3 server
unreachable or timed out.
"""

import os
import time
from pathlib import Path

import httpx
from rich.console import Console

from cli.kernel_sources import load_sources

OK, REGRESSION, FAILED, UNREACHABLE = 0, 1, 2, 3
console = Console(stderr=True)


def build_job(commit: str, branch: str | None, repo: str, sizes: list[list[int]], gpu: str | None,
              variants: list[str], kernels_dir: Path | None) -> dict:
    body: dict = {"sizes": sizes, "commit": {"sha": commit, "repo": repo, "branch": branch}}
    if kernels_dir is not None:
        sources = load_sources(kernels_dir)
        if variants:
            sources = [s for s in sources if s["name"] in variants]
        body["sources"] = sources
    body["variants"] = variants or [s["name"] for s in body.get("sources", [])]
    if gpu:
        body["gpu"] = gpu
    return body


def wait(client: httpx.Client, job: dict, timeout: float) -> dict:
    deadline = time.monotonic() + timeout
    with console.status(f"job {job['id']} queued") as status:
        while job["status"] in ("queued", "running"):
            if time.monotonic() > deadline:
                raise TimeoutError(f"job {job['id']} still {job['status']} after {timeout:g} s")
            time.sleep(1.0)
            job = client.get(f"/api/jobs/{job['id']}").json()
            p = job["progress"]
            status.update(f"job {job['id']} {job['status']} {p['done']}/{p['total']} {job.get('current_case') or ''}")
    return job


def summary(job: dict, verdicts: list[dict], base_label: str) -> str:
    lines = [
        f"### gemmwatch: {job['commit']['sha'][:12]} on {job.get('ran_on') or job['queue']} (vs {base_label})",
        "",
        "| variant | size | GFLOPS | % of cuBLAS | Δ vs base | verdict |",
        "| --- | --- | ---: | ---: | ---: | --- |",
    ]
    icons = {"regression": "❌ regression", "unverified": "❌ unverified", "ok": "✅ ok", "faster": "🚀 faster",
             "no baseline": "— no baseline"}
    for v in verdicts:
        gf = f"{v['gflops']:,.0f}" if v["gflops"] is not None else "—"
        pct = f"{v['pct_of_cublas']:.1f} %" if v["pct_of_cublas"] is not None else "—"
        delta = f"{100 * v['delta']:+.1f} %" if v["delta"] is not None else "—"
        lines.append(f"| {v['variant']} | {v['m']}×{v['n']}×{v['k']} | {gf} | {pct} | {delta} | {icons[v['status']]} |")
    if job["status"] != "succeeded" and job.get("error"):
        lines += ["", f"Job {job['status']}:", "", "```", job["error"][:4000], "```"]
    notes = [f"- {v['variant']} {v['m']}×{v['n']}×{v['k']}: {v['reason']}" for v in verdicts if v["status"] == "regression"]
    if notes:
        lines += ["", "Regressions:", *notes]
    return "\n".join(lines) + "\n"


def exit_code(job: dict, verdicts: list[dict]) -> int:
    if job["status"] != "succeeded" or any(v["status"] == "unverified" for v in verdicts):
        return FAILED
    if any(v["status"] == "regression" for v in verdicts):
        return REGRESSION
    return OK


def run_ci(client: httpx.Client, body: dict, base: str | None, base_branch: str | None, timeout: float) -> int:
    try:
        resp = client.post("/api/jobs", json=body)
        if resp.status_code != 202:
            console.print(f"[red]the server refused the job ({resp.status_code}): {resp.text}[/red]")
            return FAILED if resp.status_code in (400, 401, 403, 422) else UNREACHABLE
        job = wait(client, resp.json(), timeout)
        params = {k: v for k, v in (("base", base), ("base_branch", base_branch)) if v}
        verdicts = client.get(f"/api/jobs/{job['id']}/verdicts", params=params).json()
    except (httpx.HTTPError, TimeoutError) as exc:
        console.print(f"[red]{exc}[/red]")
        return UNREACHABLE
    text = summary(job, verdicts, base[:12] if base else f"branch {base_branch or body['commit']['branch']}")
    print(text)
    if os.environ.get("GITHUB_STEP_SUMMARY"):
        with open(os.environ["GITHUB_STEP_SUMMARY"], "a") as f:
            f.write(text)
    return exit_code(job, verdicts)
