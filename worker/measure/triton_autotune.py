"""@triton.autotune, run by gemmwatch: which of a Triton kernel's configurations a case runs.

A kernel under @triton.autotune lists configurations (its tl.constexpr values, warps and stages);
its wrapper lets Triton time them on the first call. Here the list is read in the confined compile
process (worker/compile/triton_build.describe) and each configuration becomes a description of its own: its
values are defines, its warps and stages the `triton` options. Then, per case and outside the
timing, each is compiled (all of them at once, in the job's compile workers, as the first is timed),
launched once to warm up and timed by the median of a few samples, as cuBLAS's candidates are
(worker/measure/cublas_best.py); the fastest is the one the case verifies and times. A kernel's
`prune_configs_by` is the job's Python, which reads the GPU (its perf model asks the driver): it is not run,
and every configuration is timed.

The choice is kept on the worker's disk and reused until the kernel (its description's hash), the
shape bucket (M, N and K each rounded up to a power of two), the GPU or the Triton release changes.
A description that names `triton.config` runs that configuration and times nothing else. Every
result says which configuration ran and how it was chosen (env.triton).
"""

import json
from pathlib import Path
from typing import Callable

from core.description.kernel import Launch, resolve
from core.description.kernel_description import KernelDescription
from core.records.kernel_store import kernel_hash
from worker.measure import cublas_best
from worker.arguments import kernel_args
from worker.compile import triton_build
from worker.compile.triton_build import unsupported

def bucket(m: int, n: int, k: int) -> list[int]:
    """The shape bucket a choice is kept for: each dimension rounded up to a power of two."""
    return [1 << max(0, (x - 1).bit_length()) for x in (m, n, k)]


def with_config(desc: KernelDescription, config: dict) -> KernelDescription:
    """The description with one configuration's values as defines and its warps and stages."""
    return desc.with_triton_config(config)


def choose(desc: KernelDescription, configs: list[dict], time_config: Callable[[KernelDescription], float] | None,
           folder: Path | None, key: dict) -> tuple[int, dict]:
    """The position of the configuration to run and what to record of the choice. `time_config`
    gives a description's median time in ms (it raises where the configuration cannot run); None
    where only a kept choice may be used (a profile's process, which times nothing)."""
    if desc.triton is not None and desc.triton.config is not None:
        index = desc.triton.config
        if index >= len(configs):
            raise ValueError(f"triton.config {index}: {desc.entry} lists {len(configs)} configurations "
                             f"(0 to {len(configs) - 1})")
        why = unsupported(configs[index], desc)
        if why:
            raise ValueError(f"triton.config {index} of {desc.entry} has {why}, which gemmwatch cannot launch yet")
        return index, {"chosen_by": "the description (triton.config)"}
    path = cublas_best.cache_path(folder, key) if folder is not None else None
    if path is not None and path.exists():
        try:
            stored = json.loads(path.read_text())
            if stored["configs"] == configs:  # the same list, in the same order
                return stored["index"], {"chosen_by": "an earlier autotune on this worker", "timed": stored["timed"],
                                         **({"not_run": stored["not_run"]} if stored.get("not_run") else {})}
        except (ValueError, KeyError, TypeError):
            pass  # unreadable: tuned again and written anew
    if time_config is None:
        raise ValueError(f"no @triton.autotune choice of {desc.entry} is kept on this worker for this case (its bucket "
                         f"{key['bucket']}): a profile runs the configuration its timed case chose")
    timed: list[dict] = []
    # What is not run, one entry a reason with its configurations: triton-lang/kernels' 320 split-K ones share
    # one pre_hook, and a line each made most of a result's env.
    passed_over: dict[str, list[int]] = {}
    for index, config in enumerate(configs):
        why = unsupported(config, desc)
        if why:
            passed_over.setdefault(why, []).append(index)
            continue
        try:
            timed.append({"index": index, "median_ms": time_config(with_config(desc, config))})
        except Exception as exc:  # too much shared memory for this GPU, a compile error: said, not chosen
            timed.append({"index": index, "error": str(exc)[:200]})
    not_run = [{"why": why, "indices": indices} for why, indices in passed_over.items()]
    ran = [t for t in timed if "median_ms" in t]
    if not ran:
        raise ValueError(f"none of the {len(configs)} configurations of {desc.entry}'s @triton.autotune ran here: "
                         + "; ".join([f"{t['index']}: {t['error']}" for t in timed[:4]]
                                     + [f"{len(n['indices'])} not run: {n['why']}" for n in not_run]))
    index = min(ran, key=lambda t: t["median_ms"])["index"]
    said = {"timed": timed, **({"not_run": not_run} if not_run else {})}
    if path is not None:
        cublas_best.store(path, {"configs": configs, "index": index, **said, "key": key})
    return index, {"chosen_by": f"autotune here: {len(ran)} of {len(configs)} configurations timed", **said}


def _runnable(desc: KernelDescription, configs: list[dict], concrete: Callable[[KernelDescription], Launch]) -> list[Launch]:
    """The launch of each configuration `choose` would time, in its order; one that cannot even be
    resolved is left for its own timing to report."""
    launches = []
    for config in configs:
        if unsupported(config, desc):
            continue
        try:
            launches.append(concrete(with_config(desc, config)))
        except Exception:  # said by choose, when this configuration's turn comes
            continue
    return launches


def settle(runner, choice, launch: Launch, case, problem, policy) -> tuple[Launch, dict]:
    """The launch a case runs for a Triton kernel, and env.triton to record: for a kernel under
    @triton.autotune, the chosen configuration's launch; otherwise the launch as it was. Without a
    policy only a kept choice is taken (nothing is timed)."""
    dev = runner.device
    described = dev.triton_kernel(launch)
    values = kernel_args.named_values(launch, case.m, case.n, case.k, None, None, None, 1.0, 0.0, case.batch)
    configs = described["configs"]
    if not configs:
        return triton_build.for_case(launch, described, values), {"version": described["triton"]}
    desc, figures = choice.description, dev.figures()
    dims = (case.m, case.n, case.k)  # a kernel's sizes taken as tl.constexpr (triton.size_constexprs)

    def concrete(candidate: KernelDescription) -> Launch:
        return triton_build.for_case(resolve(candidate, choice.tunables, figures, choice.origin, dims), described,
                                     values)

    queued = []

    def time_config(candidate: KernelDescription) -> float:
        if not queued:  # the first to be timed: every configuration that can run starts compiling, several at
            queued.append(dev.prefetch(_runnable(desc, configs, concrete)))  # once (triton-lang/kernels lists 418)
        launch = concrete(candidate)
        return runner.median_ms(problem.kernel_call(dev.compile(launch), launch, problem.new_c(), 1.0, 0.0), policy)

    key = {"kernel": kernel_hash(desc), "triton": described["triton"], "gpu": runner.gpu_name(),
           "bucket": bucket(case.m, case.n, case.k), "precision": problem.precision.describe(),
           "form": problem.form.key(case.batch)}
    index, how = choose(desc, configs, time_config if policy is not None else None,
                        dev.cfg.data_dir / "triton-autotune", key)
    chosen = triton_build.for_case(resolve(with_config(desc, configs[index]), choice.tunables, figures, choice.origin,
                                           dims), described, values)
    return chosen, {"version": described["triton"], "config": {"index": index, **configs[index]},
                    "bucket": key["bucket"], **how}
