"""`gemmwatch run`: measure on this machine's GPU with the worker's own runner, optionally
posting the results to a server (for CI runners that have a GPU of their own)."""

import uuid
import zlib

from cli.messages import console as make_console

from core.settings import settings
from worker import gpu_process
from core.records.kernel_store import kernels_of_job
from worker.measure.cases import Case, CaseOutcome, cases_from_plan, plan

console = make_console(stderr=True)


def measure(variants: list[str], sizes: list[list[int]], sources: list[dict],
            timing: str | None = None) -> tuple[dict, list[dict], list[str]]:
    """Returns the GPU identity, one result per case (ResultIn fields) and the problems met. timing: every
    case's mode, over a kernel's own (`"timing"` in its gemmwatch.json), as a job's `timing` is."""
    run_seed = zlib.crc32(uuid.uuid4().bytes)
    identity: dict = {}
    results: list[dict] = []

    def on_identity(ident: dict) -> list[Case]:
        identity.update(ident)
        own = {s["name"] for s in sources}
        kernels = kernels_of_job(sources)
        return cases_from_plan(plan("bench", variants, sizes, {}, {}, kernels, timing), run_seed, kernels, own)

    def on_result(case: Case, outcome: CaseOutcome) -> None:
        row = outcome.as_row()
        row["env"] = {**row["env"], "gpu": identity}
        results.append({"variant": case.variant, "m": case.m, "n": case.n, "k": case.k, "tunables": case.tunables, **row})

    problems = gpu_process.converse(
        settings, on_identity=on_identity, on_started=lambda c: console.print(f"running {c.label}"), on_result=on_result
    )
    gpu_process.discard()
    return identity, results, problems


def batch(identity: dict, results: list[dict], commit: dict | None) -> dict:
    gpu_fields = ("uuid", "name", "model", "sm_count", "compute_capability", "memory_mib", "driver")
    body = {"run_id": uuid.uuid4().hex, "gpu": {f: identity.get(f) for f in gpu_fields}, "results": results}
    if commit:
        body["commit"] = commit
    return body
