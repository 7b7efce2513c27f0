"""A case whose description names a host launcher (`"launcher": "launch_gemm<float>"`): the
repository's own launcher, called with its argument order and our stream, every kernel it launches
timed as one GEMM (docs/KERNELS.md, "A repository's own launcher").

The GPU child never loads a job's library. For each such case it builds the library (the confined
compile process, worker/compile/launcher_library.py), reads the entry kernel's resources from its cubin,
and starts a confined process of the case's own (worker/launch/launcher_call.run_confined_call) whose
set-up hook is a `LauncherCase` (worker/measure/launcher_hook.py): the product's own runner (worker/measure/runner.py: verify against
cuBLAS, then the paired timing) over a device whose kernel call is the launcher. What that process
reports is the job's own word (its code shares the process, and could write any figure), and the
result says so in `env.launcher`. Whatever the launcher does (crash, exit(), hang, reset the device,
fork) ends that process only; the case's result names it and the next case starts a fresh one.

No compile process can run in the confined process (no exec; nothing of the worker's cache is
readable there), so the stream hold, whose spin kernel is compiled by NVRTC, is not used, and a cold
sample's L2 is flushed with the memset flush (cudaMemset: no kernel of ours to build): the result's
env.stream_hold and env.l2_flush say so. Every lazy step of the run (CuPy's own kernels, the cuBLAS
handle, NVML's library) happens in the set-up, under its Landlock layer, through a rehearsal: the
same runner over the same case with cuBLAS standing in for the launcher, so that after confinement
nothing is left to open but the device files. The CuPy kernels that set-up compiles are made once per
worker and kind of case, by a set-up-only call, and each call starts with a copy of them
(worker/launch/setup_kernels.py).
"""

import dataclasses
import json
import shutil
import tempfile
import types
import typing
from pathlib import Path

from pydantic import ValidationError

from core.results.result_env import LauncherRecord
from worker.measure.cases import Case, CaseOutcome, TimingPolicy
from worker.measure.stage_clock import STAGES, StageClock, in_order
from worker.launch.launcher_call import SET_UP, run_confined_call
from worker.measure.cublas_best import key_digest

SETUP_LIMIT_S = 180.0  # CUDA's and CuPy's initialisation and the rehearsal
CALL_SLACK_S = 120.0  # beyond the timing's own cap: verification, warm-up, a large case's cuBLAS reference
JOBS_WORD = ("made in the confined process that ran the job's own host code, which could have written any figure "
             "there: the job's own word, not the worker's")


def run_in_own_process(device, case: Case, launch, policy: TimingPolicy) -> CaseOutcome:
    """The case, run by its launcher in a confined process of its own; what happened becomes its result."""
    clock = StageClock()
    with clock.stage("compile"):
        library = device.build_launcher(launch)
        # The kernel the launcher launches, where the description names one: its resources, read here.
        entry = device.compile(launch) if launch.entry is not None else None
    inner = confined_policy(policy)
    request = {"case": encode_case(case), "policy": dataclasses.asdict(inner),
               "plan": {"passing": [list(p) for p in library.plan.passing], "spelled": list(library.plan.spelled)},
               "compiler": library.compiler, "compute_capability": device.compute_capability}
    device.release_memory()  # this process's pooled GPU memory is the case's process's to use now
    # The library alone in a folder of its own: the confined process may read that folder, nothing of the cache.
    with tempfile.TemporaryDirectory(prefix="gemmwatch-launcher-case-") as folder:
        copy = Path(folder) / "launcher.so"
        shutil.copyfile(library.path, copy)
        with clock.stage("launcher_setup"):  # the whole call: what its process reports is taken out below
            kernels = setup_kernels_made(device, copy, library.symbol, request)
            called = run_confined_call(copy, library.symbol, hook=device.launcher_hook, hook_args=request,
                                       timeout_s=4 * policy.time_cap_s + policy.settle_s + CALL_SLACK_S,
                                       setup_timeout_s=SETUP_LIMIT_S, through_address=True, kernels=kernels)
    about = {"launcher": launch.launcher, "symbol": library.symbol, "what_happened": called.message,
             "confinement": called.confinement, "results": JOBS_WORD,
             "output": called.output[-4000:].replace("\x00", "\ufffd")}  # no NUL: no database stores one
    if not called.ok or called.result is None:
        return CaseOutcome(mode=policy.mode, error=f"launcher {launch.launcher}: {called.message}{_said(called.output)}",
                           env={"launcher": about, "stages_s": clock.record()})
    out = checked_outcome(called.result, policy.mode)
    # The process's own record: how long a call held its host (the job's word, as its every figure).
    held = reported_host_time(out.env)
    out.env["launcher"] = about | held
    if held.get("waits") and held.get("host_call_ms") is not None and out.median_ms is not None:
        out.env.setdefault("notes", []).append(
            f"the launcher returns only once its kernel is done (each call held the host {held['host_call_ms']:.4g} ms, "
            f"the kernel's median sample {out.median_ms:.4g} ms): each sample holds that wait, which cuBLAS's "
            "calls do not, as a runner timing its calls back to back holds it")
    out.env["stages_s"] = with_process_stages(clock.record(), out.env.get("stages_s"))
    if out.error:
        out.error += _said(called.output)
    if "launch" in out.env:
        out.env["launch"]["launcher"] = launch.launcher
        out.env["resources"] = (device.resources(entry, launch, case.m, case.n, case.k) if entry is not None else
                                {"why_none": "the description names no entry kernel of the launcher's",
                                 "compiler": library.compiler})
    return out


# What decides which CuPy kernels a case's set-up compiles: its matrices' types and layouts, how they
# are drawn and checked, and how it is timed. Its size, kernel and launcher do not.
SETUP_FIELDS = ("compute_mode", "accumulate", "output", "layout", "inputs", "epilogue", "scales", "c_starts_zero",
                "tensor_maps", "build")


def setup_kernels_made(device, library: Path, symbol: str, request: dict) -> Path:
    """The worker's folder of the kernels a launcher case's set-up compiles, made for this kind of
    case first where it was not yet (a set-up-only call: nothing of the job's is loaded there, so
    what it compiled can be trusted by every later call). Where that set-up fails, the case goes on
    (its own call meets the failure and reports it) and the next case of the kind tries again."""
    folder = device.cfg.data_dir / "launcher-set-up"
    description = request["case"]["description"]
    kind = {"setup": {f: description.get(f) for f in SETUP_FIELDS}, "policy": request["policy"],
            "compute_capability": request["compute_capability"]}
    made = folder / "made-for" / key_digest(kind)  # named as cuBLAS's choices are
    if not made.exists():
        outcome = run_confined_call(library, symbol, hook=device.launcher_hook, hook_args=request,
                                    setup_timeout_s=SETUP_LIMIT_S, through_address=True, kernels=folder,
                                    setup_only=True)
        if outcome.kind == SET_UP:
            made.parent.mkdir(parents=True, exist_ok=True)
            made.write_text(json.dumps(kind))
    return folder


def reported_host_time(env: dict) -> dict:
    """What the confined process recorded of how long a call held its host (launcher_hook.host_time):
    its two keys, typed as the stored record types them, or nothing (the process ran the job's code)."""
    held = env.get("launcher")
    if not isinstance(held, dict):
        return {}
    try:
        record = LauncherRecord.model_validate({k: held[k] for k in ("host_call_ms", "waits") if k in held})
    except ValidationError:
        return {}
    return record.model_dump(exclude_none=True)


def with_process_stages(outside: dict[str, float], reported) -> dict[str, float]:
    """A launcher case's stages: the library's build and the confined call timed here, the stages its
    process reported (the job's word, like every figure of that process) added in, and the call's own
    start and rehearsal as what is left of its wall time, so the stages still add up to the case's
    time and a CI run's breakdown shows where a repository's cases spend it."""
    reported = reported if isinstance(reported, dict) else {}
    inside = {name: float(secs) for name, secs in reported.items()
              if name in STAGES and name != "launcher_setup" and type(secs) in (int, float) and 0 <= secs < 1e6}
    stages = dict(outside)
    stages["launcher_setup"] = max(0.0, outside.get("launcher_setup", 0.0) - sum(inside.values()))
    for name, secs in inside.items():
        stages[name] = stages.get(name, 0.0) + secs
    return in_order(stages)


def _said(output: str) -> str:
    """The last line the launcher printed, for a failed case's error: a launcher that declines a
    shape usually says why there ("cannot run 1000x1003x997: misaligned operand")."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    return f" (the launcher's last line of output: {lines[-1][:300]})" if lines else ""


def checked_outcome(result: dict, mode: str) -> CaseOutcome:
    """The confined process's result as a CaseOutcome, each field of the type the result row holds:
    that process ran the job's code, which can write anything on its report pipe, and a string
    where a number belongs must fail this case, not the job's row."""
    fields = {f.name: f.type for f in dataclasses.fields(CaseOutcome)}
    wrong = [name for name, value in result.items() if name not in fields or not _fits(value, fields[name])]
    if wrong:
        return CaseOutcome(mode=mode, error="the launcher's process reported a result that is not a case's (fields "
                                            f"{', '.join(sorted(wrong))}): its figures are not used")
    return CaseOutcome(**result)


def _fits(value, annotation) -> bool:
    """Whether a value read from JSON is of a CaseOutcome field's type (a bool is no number here)."""
    options = typing.get_args(annotation) if isinstance(annotation, types.UnionType) else (annotation,)
    for option in options:
        kind = typing.get_origin(option) or option
        if (value is None and option is type(None)) or (kind is bool and type(value) is bool) \
                or (kind is int and type(value) is int) or (kind is float and type(value) in (int, float)) \
                or (kind is str and type(value) is str) or (kind is dict and type(value) is dict) \
                or (kind is list and type(value) is list and all(type(x) in (int, float) for x in value)):
            return True
    return False


def confined_policy(policy: TimingPolicy) -> TimingPolicy:
    """The timing as the confined process can take it: no stream hold, the memset flush (module docstring)."""
    return dataclasses.replace(policy, hold_stream=False, flush="memset" if policy.flushes else policy.flush)


def encode_case(case: Case) -> dict:
    """The case as JSON for the confined process (never pickle: its replies are a job's word, and
    its request is kept as plain as they are)."""
    return {"index": case.index, "variant": case.variant, "m": case.m, "n": case.n, "k": case.k, "seed": case.seed,
            "description": case.kernel.description.model_dump(mode="json"), "tunables": case.kernel.tunables,
            "origin": case.kernel.origin}
