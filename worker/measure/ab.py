"""A confirmation case on the GPU: the base commit's kernel and the head's, verified, then timed
interleaved (head, base, head, base ...) by the runner's own paired timing loop, so each pair of
samples shares the clocks and temperature of its moment (core/verdicts/regression.py judges the ratios).
Each side is its own description (files, grid, target, compute mode...), resolved on this GPU."""

from contextlib import nullcontext

from core.verdicts.regression import AB_MODE
from worker.measure import stats, timing, triton_autotune
from core.results.timing_stats import gflops
from worker.measure.cases import Case, CaseOutcome, TimingPolicy
from worker.measure.problem import Problem
from worker.measure.stage_clock import StageClock


def run_ab(runner, case: Case, policy: TimingPolicy) -> CaseOutcome:
    dev = runner.device
    head_launch, base_launch = runner.resolve(case.kernel, case), runner.resolve(case.base, case)
    out = CaseOutcome(mode=AB_MODE, compute_mode=head_launch.compute_mode, dtype=head_launch.precision.input_type,
                      form=head_launch.form.key(case.batch))
    out.env["precision"] = head_launch.precision.describe()
    for side, choice in (("head", case.kernel), ("base", case.base)):  # Helion's record, where it wrote the code
        out.env.update({f"{tool}_{side}": record for tool, record in (choice.written_by or {}).items()})
    if base_launch.form != head_launch.form:  # another GEMM: no ratio of the two says anything of a change
        out.error = (f"the base commit's kernel has form {base_launch.form.key(case.batch)} and the head's "
                     f"{out.form}: a confirmation compares one GEMM at two commits")
        return out
    # One set of A, B and C for both sides where they take the same types (a changed kernel, not a
    # changed precision): the ratio is then the kernels' alone. Each side on buffers of its own read
    # the same binary 1.8 % slower on one side in an A/B job (bf16_wgmma_persistent_64 at 4096^3,
    # H200): where its allocations lay in memory, not the kernel, and a regression "confirmed".
    problem = {"head": Problem(dev, case, head_launch.form, head_launch.precision)}
    problem["base"] = (problem["head"] if base_launch.precision == head_launch.precision
                       else Problem(dev, case, base_launch.form, base_launch.precision))
    shared = problem["base"] is problem["head"]
    clock = StageClock()
    with clock.stage("compile"):
        for side, choice in (("head", case.kernel), ("base", case.base)):  # each side's own @triton.autotune choice
            launch = head_launch if side == "head" else base_launch
            if launch.language == "triton":
                launch, out.env[f"triton_{side}"] = triton_autotune.settle(runner, choice, launch, case,
                                                                           problem[side], policy)
                head_launch, base_launch = (launch, base_launch) if side == "head" else (head_launch, launch)
        functions = {"head": dev.compile(head_launch), "base": dev.compile(base_launch)}
    launches = {"head": head_launch, "base": base_launch}
    # Each side against the product of its own inputs: the same draws, rounded to its input type
    # (a commit that changed the kernel's precision is compared as it runs).
    with clock.stage("reference"):
        refs = {"head": dev.reference(problem["head"].a, problem["head"].b)}
        refs["base"] = (refs["head"] if base_launch.precision.input_type == head_launch.precision.input_type
                        else dev.reference(problem["base"].a, problem["base"].b))
    wrong = []
    for side in ("head", "base"):
        with clock.stage("verify"):
            checked = runner.verify(functions[side], launches[side], problem[side], refs[side], case.seed)
        ok, why = checked.verdict(runner.tolerance(launches[side], policy, case.k))
        if side == "head":
            out.rel_error = checked.rel_error if checked.rel_error != float("inf") else None
        if not ok:
            wrong.append(f"{side}: {why}")
    with clock.stage("resources"):
        out.env["resources"] = dev.resources(functions["head"], head_launch, case.m, case.n, case.k)
        out.env["base_resources"] = dev.resources(functions["base"], base_launch, case.m, case.n, case.k)
    out.env["stages_s"] = clock.record()  # again below, with the samples
    if wrong:
        out.error, out.status = "; ".join(wrong), "incorrect"
        return out
    out.verified = True
    for side in ("head",) if shared else ("head", "base"):  # finite values again: the NaN probe left NaN behind
        problem[side].refill(problem[side].c, seed=case.seed + 1)
    calls = {side: problem[side].kernel_call(functions[side], launches[side], problem[side].c, 1.0, 0.0)
             for side in ("head", "base")}
    out.env["inputs"] = case.inputs
    with clock.stage("samples"), problem["head"].timed_inputs(case.inputs), \
            (nullcontext() if shared else problem["base"].timed_inputs(case.inputs)), dev.measuring():
        t = timing.time_pair(dev, calls["head"], calls["base"], policy)
    record(out, case, t.variant_ms, t.cublas_ms, t.converged)
    out.env["stages_s"] = clock.record()
    return out


def record(out: CaseOutcome, case: Case, head_ms: list[float], base_ms: list[float], converged: bool) -> None:
    """Head samples as the result's own; the base's beside them, pair for pair, in env["ab"]."""
    head_ms = [float(f"{x:.6g}") for x in head_ms]
    base_ms = [float(f"{x:.6g}") for x in base_ms]
    out.add_timing(head_ms, stats.summarise(head_ms))
    out.converged = converged
    out.gflops = gflops(case.m, case.n, case.k, out.median_ms, case.batch)
    base_stats = stats.summarise(base_ms)
    out.env["ab"] = {"base_ms": base_ms, "base_stats": base_stats,
                     "base_gflops": gflops(case.m, case.n, case.k, base_stats["median_ms"], case.batch)}
