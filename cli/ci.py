"""`gemmwatch ci`: benchmark a commit, compare it with its base, fail the build on a regression.

A result that looks changed against its history (or its base) is confirmed by a second job that
times the base commit's kernel and the head's interleaved on one GPU; that paired verdict decides
(`--no-confirm` keeps the history verdict alone). A commit with more kernels x sizes than one job
may hold on the server (GET /api/limits) is measured in several jobs, its kernels in order, and
reported as one.

Exit codes: 0 no regression, 1 regression, 2 a failed or unverified result (a confirmation that
could not re-measure a case too), 3 server unreachable or timed out. A case not run by design ("not
applicable": a kernel built for another GPU target, or one whose sizes are compiled in, at another size)
is listed and fails nothing.
"""

import json
import os
import re
import subprocess
from pathlib import Path

import httpx

from core.verdicts.baselines import result_anchor
from core.description import source_size
from core.results.toolchain import CHANGED
from core.wire_types import SHA_PATTERN
from core.description.kernel_folder import load_folder
from cli.messages import console as make_console, refusal, unreachable
from cli.progress import wait_for_job
from cli.markup import colored

OK, REGRESSION, FAILED, UNREACHABLE = 0, 1, 2, 3
console = make_console(stderr=True)


def build_job(commit: str, branch: str | None, repo: str, sizes: list[list[int]], gpu: str | None,
              variants: list[str], kernels_dir: Path | None, parents: list[str] | None = None,
              timing: str | None = None) -> dict:
    body: dict = {"sizes": sizes, "commit": {"sha": commit, "repo": repo, "branch": branch}}
    if timing:
        body["timing"] = timing
    if parents is not None:
        body["commit"]["parents"] = parents
    if kernels_dir is not None:
        # Checked here, kernel by kernel and field by field, before anything is posted
        # (core.description.kernel_folder.FolderError says which).
        body["sources"] = [d.model_dump(mode="json") for d in load_folder(kernels_dir, variants or None)]
    body["variants"] = variants or [s["name"] for s in body.get("sources", [])]
    if gpu:
        body["gpu"] = gpu
    return body


class BeyondServerLimits(ValueError):
    """The commit's job cannot be posted within the server's limits; says which, before anything is posted."""


def split_job(body: dict, limits: dict | None) -> list[dict]:
    """The commit's job as jobs within the server's limits (None: an older server that does not
    say them, one job): its variants in order, as many per job as its sizes allow and as the server's
    request-body bound holds (GEMMWATCH_MAX_JOB_BYTES: each kernel posts its own copy of the headers it
    shares, so six ThunderKittens kernels with their 1.5 MB of headers are a 9 MB body), each job with
    the sources of its own variants. BeyondServerLimits where no split fits: too many sizes for one
    job, or a kernel's files past the server's source limit or alone past its body bound."""
    variants, sizes = body["variants"], body["sizes"]
    if limits is None or not variants:
        return [body]
    per_job = min(limits["max_sources_per_job"], limits["max_cases_per_job"] // len(sizes))
    if per_job < 1:
        raise BeyondServerLimits(f"{len(sizes)} sizes are more cases than one job may hold on this server "
                                 f"({limits['max_cases_per_job']}, GEMMWATCH_MAX_CASES): give fewer sizes")
    body_most = limits.get("max_job_bytes")
    sources = {s["name"]: s for s in body.get("sources", [])}
    bare = posted_bytes({**body, "variants": [], **({"sources": []} if "sources" in body else {})})

    def grows_by(name: str) -> int:  # a variant's name and its source, each with a separator
        return posted_bytes(name) + 2 + (posted_bytes(sources[name]) + 2 if name in sources else 0)

    parts, names, used = [], [], bare
    for name in variants:
        grow = grows_by(name)
        if names and (len(names) == per_job or (body_most and used + grow > body_most)):
            parts.append(_part(body, names, limits))
            names, used = [], bare
        if body_most and bare + grow > body_most:
            raise BeyondServerLimits(f"{name}: its description and files are {bare + grow} bytes as posted, past the "
                                     f"{body_most} a job's body may hold on this server (GEMMWATCH_MAX_JOB_BYTES): "
                                     "nothing was posted")
        names.append(name)
        used += grow
    parts.append(_part(body, names, limits))
    return parts


def posted_bytes(value) -> int:
    """The bytes of a value as JSON, at least as many as httpx posts (ASCII escapes are the longer form)."""
    return len(json.dumps(value).encode())


def _part(body: dict, names: list[str], limits: dict) -> dict:
    """One job of the split: the variants named, with their own sources; BeyondServerLimits where those
    sources are past the server's source limit, measured as the server measures it (api/limits.py): a
    part past it would be refused only when it is posted, after the parts before it had run."""
    part = {**body, "variants": names}
    if "sources" in body:
        part["sources"] = [s for s in body["sources"] if s["name"] in names]
        most = limits.get("max_source_bytes")
        size = source_size.distinct_bytes(s.get("files", {}) for s in part["sources"])
        refused = source_size.refusal([s["name"] for s in part["sources"]], size, most) if most else None
        if refused:
            raise BeyondServerLimits(f"{refused} on this server: nothing was posted")
    return part


def server_limits(client: httpx.Client) -> dict | None:
    resp = client.get("/api/limits")
    return resp.json() if resp.status_code == 200 else None


def commit_sha(commit: str) -> str:
    """The commit's sha as the server takes it: a sha as given, or a name git knows here ("HEAD",
    a branch, a tag) as `git rev-parse` spells it; ValueError saying what to give otherwise."""
    if re.fullmatch(SHA_PATTERN, commit):
        return commit.lower()
    try:
        run = subprocess.run(["git", "rev-parse", "--verify", "--quiet", f"{commit}^{{commit}}"], capture_output=True,
                             text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        run = None
    if run is not None and run.returncode == 0 and re.fullmatch(SHA_PATTERN, run.stdout.strip()):
        return run.stdout.strip()
    raise ValueError(f"--commit {commit}: not a sha, and not a commit git knows in this folder; give its sha "
                     "(`git rev-parse HEAD` prints the current one)")


def git_parents(commit: str) -> list[str] | None:
    """`git rev-parse <commit>^@` in the working directory: the parents, first parent first;
    None where git, the commit or its parents are not at hand (the server then orders by commit time)."""
    try:
        run = subprocess.run(["git", "rev-parse", f"{commit}^@"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    # No parents printed: a root commit, or a shallow clone that cut them off; commit time then.
    return run.stdout.split() or None if run.returncode == 0 else None


def summary(job: dict, verdicts: list[dict], base_label: str, confirmation: list[dict] | None = None,
            page: str | None = None) -> str:
    """The Markdown table, one row per case with its final verdict: the history's, or where the
    same-job confirmation measured the case, the confirmation's (with the history's alarm named, so
    a row never shows a regression that the paired timing overturned). With `page` (the commit's
    page on the server, /commits/{sha}) each row links to its own row there."""
    link_head, link_rule = (" commit page |", " --- |") if page else ("", "")
    lines = [
        f"### gemmwatch: {job['commit']['sha'][:12]} on {job.get('ran_on') or job['queue']} (vs {base_label})",
        *(["", f"Every result of this commit, on every GPU: {page}"] if page else []),
        *(["", f"Measured in {job['jobs']} jobs (jobs {job['job_ids']}): more cases than one job may hold "
               "on this server"] if job.get("jobs", 1) > 1 else []),
    ]
    if verdicts:  # a job that failed before its first result has no table, only its error below
        lines += ["", "| variant | size | GFLOPS | % of cuBLAS | Δ vs base | verdict |" + link_head,
                  "| --- | --- | ---: | ---: | ---: | --- |" + link_rule]
    final = final_verdicts(verdicts, confirmation)
    for v, f in zip(verdicts, final):
        gf = f"{v['gflops']:,.0f}" if v["gflops"] is not None else "—"
        pct = f"{v['pct_of_cublas']:.1f} %" if v["pct_of_cublas"] is not None else "—"
        delta = f"{100 * v['delta']:+.1f} %" if v["delta"] is not None else "—"
        verdict = VERDICT_ICONS[f["status"]]
        if f["status"] != v["status"]:
            verdict += f" (same-job A/B; history said {v['status']})"
        link = ""
        if page:
            anchor = result_anchor(v.get("job_id", job["id"]), v["variant"], v["m"], v["n"], v["k"], _form(v))
            link = f" [{v['variant']} {size_of(v)}]({page}#{anchor}) |"
        lines.append(f"| {v['variant']} | {size_of(v)} | {gf} | {pct} | {delta} | {verdict} |" + link)
    if job["status"] != "succeeded" and job.get("error"):
        lines += ["", f"Job {job['status']}:", "", "```", job["error"][:4000], "```"]
    notes = [f"- {v['variant']} {size_of(v)}: {v['reason']}"
             for v, f in zip(verdicts, final) if f["status"] == "regression"]
    if notes:
        lines += ["", "Regressions:", *notes]
    # A new compiler, Triton, driver or cuBLAS under an unchanged verdict is still news to the reader.
    changed = [f"- {v['variant']} {size_of(v)}: {v['reason'].split(': the difference may be', 1)[0]}"
               for v, f in zip(verdicts, final) if f["status"] != "regression" and v.get("reason", "").startswith(CHANGED)]
    if changed:
        lines += ["", "Environment:", *changed]
    if confirmation is not None:
        lines += confirmation_lines(confirmation)
    else:
        lines += resource_lines(verdicts)
    return "\n".join(lines) + "\n"


VERDICT_ICONS = {"regression": "❌ regression", "unverified": "❌ unverified", "ok": "✅ ok", "faster": "🚀 faster",
                 "no baseline": "— no baseline", "undecided": "❔ undecided", "not applicable": "➖ not applicable",
                 "confirmation failed": "❌ confirmation failed"}
# A confirmation's word for the verdict it gives a case. "failed": the base or head kernel could
# not be re-measured (a compile error, a wrong result): the build cannot trust the history verdict.
CONFIRMED_AS = {"regression": "regression", "improvement": "faster", "no change": "ok", "undecided": "undecided",
                "failed": "confirmation failed"}


def _form(row: dict) -> str:
    return row.get("form") or "rrr"  # a server from before forms says none: the one form there was


def size_of(row: dict) -> str:
    """A case's size as the summary shows it, with its GEMM form where that is not the default
    (core/description/gemm_form.py): a TN row and an NN row of one kernel are two GEMMs."""
    form = _form(row)
    return f"{row['m']}×{row['n']}×{row['k']}" + (f" {form}" if form != "rrr" else "")


def final_verdicts(verdicts: list[dict], confirmation: list[dict] | None) -> list[dict]:
    """Each history verdict, with its status replaced by the confirmation's where the
    confirmation took that case; the one rule both the summary and the exit code follow."""
    confirmed = {(c["variant"], c["m"], c["n"], c["k"], _form(c)): c["status"] for c in confirmation or []}
    final = []
    for v in verdicts:
        word = CONFIRMED_AS.get(confirmed.get((v["variant"], v["m"], v["n"], v["k"], _form(v))))
        final.append({**v, "status": word} if word and v["status"] not in ("unverified", "not applicable") else v)
    return final


CONFIRM_ICONS = {"regression": "❌ regression", "improvement": "🚀 improvement", "no change": "✅ no change",
                 "undecided": "❔ undecided", "failed": "❌ failed"}


def confirmation_lines(confirmation: list[dict]) -> list[str]:
    """The same-job A/B verdicts: the head/base time ratio with its interval, and what changed in
    the kernels' resources."""
    lines = ["", "Confirmed in one job (base and head kernels interleaved on one GPU):", "",
             "| variant | size | head/base time | interval | pairs | confirmed |", "| --- | --- | ---: | ---: | ---: | --- |"]
    for c in confirmation:
        ratio = f"{c['ratio']:.4f}" if c["ratio"] is not None else "—"
        interval = f"[{c['low']:.4f}, {c['high']:.4f}]" if c["low"] is not None else "—"
        lines.append(f"| {c['variant']} | {size_of(c)} | {ratio} | {interval} | {c['pairs']} |"
                     f" {CONFIRM_ICONS[c['status']]} |")
    lines += ["", *(f"- {c['variant']} {size_of(c)}: {c['reason']}" for c in confirmation)]
    return lines + resource_lines(confirmation) + profile_lines(confirmation)


def profile_lines(rows: list[dict]) -> list[str]:
    """Why each profiled case changed: the profile's line per kernel (what moved most), with the
    link to the whole diff; where Nsight Compute could not run, its reason is in the line."""
    found = [c for c in rows if c.get("profile_status")]
    lines = []
    for c in found:
        said = (c.get("profile") or "").splitlines() or [f"no profile: {c.get('profile_reason')}"]
        lines += [f"- {c['variant']} {size_of(c)}: {line}" for line in said]
        lines.append(f"  (the whole diff: /api/results/{c['result_id']}/profile)")
    return ["", "Why it changed (profile, base vs head):", *lines] if lines else []


def resource_lines(rows: list[dict]) -> list[str]:
    changes = [f"- {c['variant']} {size_of(c)}: {', '.join(c['resource_changes'])}"
               for c in rows if c.get("resource_changes")]
    return ["", "Kernel resources vs base:", *changes] if changes else []


def looks_changed(verdicts: list[dict]) -> list[dict]:
    return [v for v in verdicts if v["status"] in ("regression", "faster")]


def confirm(client: httpx.Client, job: dict, base: str | None, changed: list[dict], timeout: float,
            profile: bool = False) -> list[dict] | None:
    """Ask the server to time the base and head kernels of the changed cases in one job (and, with
    `profile`, to profile each whatever its verdict); None (with the reason printed) when it
    cannot, and the history verdict stands."""
    body = {"base": base, "variants": sorted({v["variant"] for v in changed}),
            "sizes": [list(s) for s in sorted({(v["m"], v["n"], v["k"]) for v in changed})],
            **({"profile": True} if profile else {})}
    resp = client.post(f"/api/jobs/{job['id']}/confirm", json=body)
    if resp.status_code != 202:
        console.print(colored("yellow", f"no confirmation ({resp.status_code}): {resp.text}; the history verdict stands"))
        return None
    done = wait_for_job(client, resp.json(), timeout, console, "confirmation")
    return client.get(f"/api/jobs/{done['id']}/confirmation").json()


def exit_code(job: dict, verdicts: list[dict], confirmation: list[dict] | None = None) -> int:
    """With a confirmation, its verdict decides each case it measured (a regression it finds in a
    case the history called fine counts too); a case it failed to measure fails the build (2)."""
    if job["status"] != "succeeded" or any(v["status"] == "unverified" for v in verdicts):
        return FAILED
    if any(c["status"] == "failed" for c in confirmation or []):
        return FAILED
    final = final_verdicts(verdicts, confirmation)
    if any(v["status"] == "regression" for v in final) or any(c["status"] == "regression" for c in confirmation or []):
        return REGRESSION
    return OK


def one_as_reported(jobs: list[dict]) -> dict:
    """Several jobs of one commit as the summary and the exit code read one: failed if any failed
    (with each failure's error), run on the GPUs they ran on."""
    first = jobs[0]
    if len(jobs) == 1:
        return first
    bad = [j for j in jobs if j["status"] != "succeeded"]
    gpus = list(dict.fromkeys(j.get("ran_on") or j["queue"] for j in jobs))
    return {**first, "status": bad[0]["status"] if bad else "succeeded", "ran_on": ", ".join(gpus),
            "error": "\n".join(f"job {j['id']}: {j.get('error')}" for j in bad if j.get("error")) or None,
            "jobs": len(jobs), "job_ids": ", ".join(str(j["id"]) for j in jobs)}


def run_ci(client: httpx.Client, body: dict, base: str | None, base_branch: str | None, timeout: float,
           with_confirmation: bool = True, always_confirm: bool = False, profile: bool = False,
           start_hint: bool = False, summary_out: Path | None = None) -> int:
    """start_hint: the server is this machine's own (`--local`), so an unreachable one is told how to start it.
    summary_out: the Markdown summary is written there too (a pull request's comment reads it)."""
    jobs, verdicts, confirmations = [], [], []
    params = {k: v for k, v in (("base", base), ("base_branch", base_branch)) if v}
    try:
        try:
            parts = split_job(body, server_limits(client))
        except BeyondServerLimits as exc:
            console.print(str(exc), style="red", markup=False, highlight=False)  # a kernel's name is no markup
            return FAILED
        for part in parts:
            resp = client.post("/api/jobs", json=part)
            if resp.status_code != 202:
                console.print(f"the server refused the job: {refusal(resp)}", style="red",
                              markup=False, highlight=False)
                return FAILED if resp.status_code in (400, 401, 403, 422) else UNREACHABLE
            job = wait_for_job(client, resp.json(), timeout, console)
            these = [{**v, "job_id": job["id"]} for v in client.get(f"/api/jobs/{job['id']}/verdicts", params=params).json()]
            changed = []
            if job["status"] == "succeeded":
                changed = [v for v in these if v["delta"] is not None] if always_confirm else looks_changed(these)
            if with_confirmation and changed:
                confirmations.append(confirm(client, job, base, changed, timeout, profile))
            jobs.append(job)
            verdicts += these
    except (httpx.HTTPError, TimeoutError) as exc:
        server = str(client.base_url).rstrip("/")
        said = unreachable(server, exc, start_hint=start_hint) if isinstance(exc, httpx.HTTPError) else str(exc)
        console.print(said, style="red", markup=False, highlight=False)
        return UNREACHABLE
    job = one_as_reported(jobs)
    asked = [c for c in confirmations if c is not None]
    confirmation = [row for c in asked for row in c] if asked else None
    page = f"{str(client.base_url).rstrip('/')}/commits/{job['commit']['sha']}"
    text = summary(job, verdicts, base[:12] if base else f"branch {base_branch or body['commit']['branch']}", confirmation,
                   page)
    print(text)
    if os.environ.get("GITHUB_STEP_SUMMARY"):
        with open(os.environ["GITHUB_STEP_SUMMARY"], "a") as f:
            f.write(text)
    if summary_out is not None:
        summary_out.write_text(text)
    return exit_code(job, verdicts, confirmation)
