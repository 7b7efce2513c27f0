"""A confirmation case on the GPU: the base commit's kernel and the head's, verified, then timed
interleaved (head, base, head, base ...) by the runner's own paired timing loop, so each pair of
samples shares the clocks and temperature of its moment (api/regression.py judges the ratios)."""

from dataclasses import replace

from api.confirm import AB_MODE
from worker import gpu_identity, resources, stats
from worker.cases import Case, CaseOutcome, TimingPolicy, gflops



def run_ab(runner, case: Case, policy: TimingPolicy) -> CaseOutcome:
    cp = runner.cp
    out = CaseOutcome(mode=AB_MODE, compute_mode=case.launch.compute_mode)
    tf32 = case.launch.compute_mode == "tf32"
    tolerance = policy.max_rel_error_tf32 if tf32 else policy.max_rel_error
    a, b = runner._inputs(case)
    head = runner._compile(case)
    base = runner._compile(replace(case, launch=case.base, base=None))
    errors = {"head": runner._verify(head, a, b, case.seed), "base": runner._verify(base, a, b, case.seed)}
    out.rel_error = errors["head"] if errors["head"] != float("inf") else None
    wrong = [f"{side}: relative error {err:.3g} > {tolerance:g}" for side, err in errors.items() if not err <= tolerance]
    out.env["resources"] = resources.for_function(head.function, case.launch.block, runner.device)
    out.env["base_resources"] = resources.for_function(base.function, case.base.block, runner.device)
    if wrong:
        out.error = "wrong result, " + "; ".join(wrong)
        return out
    out.verified = True
    c_head, c_base = (cp.empty((case.m, case.n), dtype=cp.float32) for _ in range(2))
    with gpu_identity.nvml():  # the timing loop reads throttle reasons between batches
        t = runner._time_pair(lambda: head(a, b, c_head, 1.0, 0.0), lambda: base(a, b, c_base, 1.0, 0.0), policy)
    record(out, case, t.variant_ms, t.cublas_ms, t.converged)
    return out


def record(out: CaseOutcome, case: Case, head_ms: list[float], base_ms: list[float], converged: bool) -> None:
    """Head samples as the result's own; the base's beside them, pair for pair, in env["ab"]."""
    head_ms = [float(f"{x:.6g}") for x in head_ms]
    base_ms = [float(f"{x:.6g}") for x in base_ms]
    out.add_timing(head_ms, stats.summarise(head_ms))
    out.converged = converged
    out.gflops = gflops(case.m, case.n, case.k, out.median_ms)
    base_stats = stats.summarise(base_ms)
    out.env["ab"] = {"base_ms": base_ms, "base_stats": base_stats,
                     "base_gflops": gflops(case.m, case.n, case.k, base_stats["median_ms"])}
