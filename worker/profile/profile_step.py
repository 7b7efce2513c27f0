"""A confirmation's profile (issue 39): after all of a confirm job's timed samples, its confirmed
changes (and every case, where the confirmation was asked with "profile": true) are profiled, base
and head, on the GPU that timed them, and the diff stored (core.records.models.Profile).

The order is the guarantee that no timed sample sees a profiler: this step runs once the GPU
process has answered the job's last case (worker/execute.py), in a process of its own that
Nsight Compute starts (worker/profile/profile_launch.py, worker/profile/profiler.py). Where Nsight Compute cannot
run, the SASS and resource diff of the two cubins still comes, and the profile says why.
"""

from __future__ import annotations

import json
import logging
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from sqlalchemy import select

from core.verdicts.confirm import KIND, confirmation
from core.records.models import Job, Profile, utcnow
from core.profile.ncu_metrics import KernelProfile, NcuParseError, parse_ncu_csv
from core.profile.profile_diff import ProfileDiff, diff_launch
from core.verdicts.regression import PairedThresholds
from core.profile.sass_stats import FunctionSass, ResUsage, SassParseError, parse_res_usage, parse_sass
from worker.profile import profiler
from worker.profile.profile_launch import SIDES

log = logging.getLogger(__name__)
CHANGED = ("regression", "improvement")


def cases_to_profile(job: Job, cfg) -> list[tuple[int, int]]:
    """(result id, case index) of each case this confirm job profiles: its confirmed changes, or
    every measured case where the confirmation asked for profiles."""
    if job.kind != KIND:
        return []
    asked = bool((job.confirm or {}).get("profile"))
    if not asked and not cfg.profile_confirmed:
        return []
    verdicts = {v.result_id: v.status for v in confirmation(job, PairedThresholds.from_settings(cfg))}
    return sorted((r.id, r.case_index) for r in job.results
                  if verdicts.get(r.id) not in (None, "failed") and (asked or verdicts[r.id] in CHANGED))


def profile_job(job_id: int, cfg, Session) -> int:
    """Profile what `cases_to_profile` picks and store each result's Profile; the number stored."""
    with Session() as db:
        job = db.get(Job, job_id)
        chosen = cases_to_profile(job, cfg)
        if not chosen:
            return 0
        entries = [job.plan[index] for _, index in chosen]
    started = utcnow()
    profiles = measure(cfg, job_id, [index for _, index in chosen], entries)
    with Session() as db:
        for (result_id, index), made in zip(chosen, profiles):
            row = db.scalar(select(Profile).where(Profile.result_id == result_id))
            if row is None:
                row = Profile(result_id=result_id, job_id=job_id)
                db.add(row)
            row.status, row.reason, row.summary, row.data = made["status"], made["reason"], made["summary"], made["data"]
            row.started_at, row.finished_at = started, utcnow()
        db.commit()
    return len(profiles)


def measure(cfg, job_id: int, indexes: list[int], entries: list[dict]) -> list[dict]:
    """Each chosen case's profile, as stored: status, reason, summary and data."""
    with tempfile.TemporaryDirectory(prefix="gemmwatch-profile-") as tmp:
        spec, report_path = Path(tmp) / "spec.json", Path(tmp) / "report.json"
        spec.write_text(json.dumps({"job_id": job_id, "indexes": indexes, "entries": entries, "launch": True}))
        ncu = profiler.run_ncu(cfg, spec, report_path, cfg.profile_timeout_s)
        if not report_path.exists():  # no profiler, or it stopped before the process wrote: compile only
            spec.write_text(json.dumps({"job_id": job_id, "indexes": indexes, "entries": entries, "launch": False}))
            failed = profiler.run_program(spec, report_path, cfg.profile_timeout_s)
            if failed is not None:
                why = f"the kernels could not be compiled for their SASS: {failed}"
                return [_made("failed", ncu.reason or why, [], {"sass_reason": why}) for _ in indexes]
        report = json.loads(report_path.read_text())
        kernels, ncu_reason = _ncu_kernels(ncu, report)
        # The cubins disassembled side by side: each cuobjdump is a process of its own.
        with ThreadPoolExecutor(max_workers=4) as pool:
            sass = dict(zip(report["cubins"], pool.map(_sass_of, (c["path"] for c in report["cubins"].values()))))
        out = []
        for index in indexes:
            base, head = (sass[f"{index}:{side}"] for side in SIDES)
            diffs = diff_launch(kernels.get((index, "base")), kernels.get((index, "head")),
                                base[0], head[0], base[1], head[1], ncu_reason)
            data = {"kernels": [d.to_json() for d in diffs], "ncu_version": ncu.version,
                    "ncu_wall_s": round(ncu.wall_s, 2), "sass_reason": base[2] or head[2],
                    "profiled_after_timing": True}
            status = ("profiled" if ncu_reason is None and any(d.effect for d in diffs)
                      else "sass only" if diffs else "failed")
            reason = ncu_reason if status != "profiled" else None
            if not diffs:
                reason = "; ".join(filter(None, (ncu_reason, base[2] or head[2] or "no kernel in common"))) or None
            out.append(_made(status, reason, diffs, data))
        return out


def _made(status: str, reason: str | None, diffs: list[ProfileDiff], data: dict) -> dict:
    summary = "\n".join(d.summary_line() for d in diffs)
    return {"status": status, "reason": reason, "summary": summary, "data": data}


def _ncu_kernels(ncu: profiler.NcuRun, report: dict) -> tuple[dict[tuple[int, str], list[KernelProfile]], str | None]:
    """ncu's rows by (case index, side): one row per profiled launch, in launch order."""
    if ncu.text is None:
        return {}, ncu.reason
    try:
        rows = parse_ncu_csv(ncu.text)
    except NcuParseError as exc:
        return {}, f"Nsight Compute's output could not be read: {exc}"
    launches = report["launches"]
    if len(rows) != len(launches):
        return {}, f"Nsight Compute profiled {len(rows)} kernels for {len(launches)} launches"
    out: dict[tuple[int, str], list[KernelProfile]] = {}
    for row, launch in zip(rows, launches):
        out.setdefault((launch["case"], launch["side"]), []).append(row)
    return out, None


def _sass_of(cubin: str) -> tuple[dict[str, FunctionSass] | None, dict[str, ResUsage] | None, str | None]:
    """A cubin's functions and resource usage, or why there are none."""
    with ThreadPoolExecutor(max_workers=2) as pool:
        (text, why), (res_text, res_why) = pool.map(lambda what: profiler.cuobjdump(cubin, what), ("sass", "res-usage"))
    try:
        functions = parse_sass(text) if text is not None else None
        res = parse_res_usage(res_text) if res_text is not None else None
    except SassParseError as exc:
        return None, None, f"cuobjdump's output could not be read: {exc}"
    return functions, res, why or res_why
