"""Where a number is made: compile a kernel, verify it against cuBLAS, time it beside cuBLAS.

Plain Python, callable without Celery (`CupyRunner().run_case(case, policy)`); the job executor
calls it inside a child process so a faulting kernel cannot take the worker down. The steps
follow docs/ARCHITECTURE.md, "How a number is made". A `Runner` works over a device that
supplies what a GPU supplies (worker/gpu/cupy_device.py on a GPU; tests/fake_gpu.py on CI): inputs,
compiled kernels, output matrices, event times, NVML readings. Every verdict, statistic and
ratio is made here and in worker/measure/verify.py, worker/measure/timing.py and worker/measure/stats.py, from those,
the same code on CI as on the H100.
"""

import dataclasses

from core.description.gemm_form import cublas_gemm
from core.description.kernel import Launch, resolve
from core.description.precision import peak_tflops
from core.settings import Settings
from worker.measure import ab, cublas_best, stats, timing, triton_autotune, verify
from worker.measure import launcher_case
from worker.arguments import tensor_maps
from core.results.timing_stats import gflops
from worker.measure.cases import Case, CaseOutcome, KernelChoice, TimingPolicy, not_applicable
from worker.gpu.cupy_device import CupyDevice, NoCudaDevice  # noqa: F401 (NoCudaDevice: part of this module's API)
from worker.measure.verify import Run
from worker.measure.problem import Problem
from worker.measure.stage_clock import StageClock


class Runner:
    def __init__(self, device):
        self.device = device
        self._gpu_name: str | None = None
        self.cublas_choices: dict = {}  # cuBLAS's best where no folder keeps it (cublas_best.choose's memo)

    def identity(self) -> dict:
        return self.device.identity()

    def gpu_name(self) -> str | None:
        """The GPU's name, read once (identity() asks NVML for clocks and temperatures too)."""
        if self._gpu_name is None:
            self._gpu_name = self.device.identity().get("name")
        return self._gpu_name

    def healthy(self) -> bool:
        return self.device.healthy()

    def release_memory(self) -> None:
        self.device.release_memory()

    def prefetch(self, cases: list[Case]) -> int:
        """The job's kernels compiled ahead of their cases, several at once beside the timing
        (worker/compile/prefetch.py): plain CUDA kernels, the head's and a confirmation's base. A Triton
        kernel (its autotune chooses what to build) and a repository's launcher build as their case comes.
        A Helion kernel's Triton code is written for all its sizes in one compile process (importing
        torch and Helion is most of that process's time), in a thread of its own, while the CUDA kernels
        compile and the first cases run."""
        launches = []
        helion: dict[str, tuple] = {}  # a Helion kernel's sizes, written in one compile process
        for case in cases:
            for choice in (case.kernel, case.base):
                if choice is not None and choice.description.language == "helion" and case.batch == 1:
                    desc = choice.description
                    helion.setdefault(desc.model_dump_json(), (desc, []))[1].append((case.m, case.n, case.k))
                if choice is None or choice.description.launcher or choice.description.language != "cuda":
                    continue
                try:
                    launches.append(self.resolve(choice))
                except Exception:  # its case says what is wrong with it
                    continue
        queued = self.device.prefetch(launches)  # compiling in the background from here
        if helion:  # written beside the first cases; a Helion case that comes sooner waits for it
            self.device.helion_codes_beside(list(helion.values()))
        return queued

    def end_job(self) -> None:
        """What the job's prefetch has not started is dropped."""
        self.device.end_prefetch()

    def wrappers_read(self, case: Case) -> Case:
        """The case with each kernel given by a Python `wrapper` described by the launch it makes, read in
        the confined compile process (worker/compile/triton_wrapper.py); others as they are."""
        def read(choice: KernelChoice | None) -> KernelChoice | None:
            if choice is None or choice.description.wrapper is None:
                return choice
            dims = None  # the wrapper's sizes as names, unless its file was written for this case alone
            if choice.description.language == "helion":  # first its Triton code, as Helion writes it for this case
                if case.batch != 1:
                    raise ValueError(f"{choice.description.name}: a Helion kernel is called as f(a, b) on two "
                                     "matrices; a batch is not run")
                written = self.device.helion_code(choice.description, (case.m, case.n, case.k))
                choice = dataclasses.replace(choice, written_by={"helion": written.record()},
                                             description=choice.description.with_helion_code(
                                                 written.code, (case.m, case.n, case.k)))
                dims = (case.m, case.n, case.k)
            call = self.device.wrapper_call(choice.description, dims)
            return dataclasses.replace(choice, description=choice.description.with_wrapper_call(call))

        return dataclasses.replace(case, kernel=read(case.kernel), base=read(case.base))

    def resolve(self, choice: KernelChoice, case: Case | None = None) -> Launch:
        """The kernel's description on this GPU: its figures (SM count, shared memory) from the device,
        and the case's sizes where the kernel takes them as tl.constexpr."""
        dims = (case.m, case.n, case.k) if case is not None else None
        return resolve(choice.description, choice.tunables, self.device.figures(), choice.origin, dims)

    def verify(self, function, launch: Launch, problem: Problem, ref, seed: int) -> verify.Check:
        return verify.check(self.device.xp, self._run(function, launch, problem), ref, problem.c, problem.refill, seed,
                            self.device.synchronize, problem.read, problem.precision.sentinel(), launch.form.epilogue)

    def after_timing(self, function, launch: Launch, problem: Problem, ref, tolerance: float) -> str | None:
        """Run 1 of the check once more, after the timed calls: why their timing cannot stand, or None."""
        unwritten, error = verify.sentinel_run(self.device.xp, self._run(function, launch, problem), ref, problem.c,
                                               problem.refill, self.device.synchronize, problem.read,
                                               problem.precision.sentinel())
        return verify.after_timing(unwritten, error, int(ref.size), tolerance)

    @staticmethod
    def _run(function, launch: Launch, problem: Problem) -> Run:
        def run(c, alpha, beta):
            problem.kernel_call(function, launch, c, alpha, beta)()

        return run

    def calls(self, case: Case):
        """The case's kernel and cuBLAS as callables over its inputs, for another tool to time
        (nvbench, the studies in scripts/); nothing is verified here. cuBLAS runs in the case's
        precision (the kernel's, or the one a cuBLAS variant names). A Triton kernel under
        @triton.autotune runs the configuration its description pins or a case on this worker chose
        (nothing is tuned here)."""
        dev = self.device
        case = self.wrappers_read(case)
        launch = self.resolve(case.kernel, case) if case.kernel is not None else None
        problem = Problem(dev, case, case.form, case.precision)
        run_cublas = problem.cublas_call()
        if launch is None:
            return run_cublas, run_cublas
        if launch.language == "triton":  # the configuration a description pins or a case chose before
            launch, _ = triton_autotune.settle(self, case.kernel, launch, case, problem, None)
        return problem.kernel_call(dev.compile(launch), launch, problem.c, 1.0, 0.0), run_cublas

    @staticmethod
    def tolerance(launch: Launch, policy: TimingPolicy, k: int) -> float:
        """The kernel's own tolerance, else its precision's bound (bound_for)."""
        return launch.tolerance if launch.tolerance is not None else bound_for(launch.precision, k, policy)

    # -- one case -----------------------------------------------------------------
    def run_case(self, case: Case, policy: TimingPolicy) -> CaseOutcome:
        dev = self.device
        skipped = not_applicable(case, dev.compute_capability, policy.mode)
        if skipped is not None:  # built for another GPU target, or sizes compiled in: its wrapper is not even read
            return skipped
        case = self.wrappers_read(case)
        if any(choice is not None and choice.description.launcher for choice in (case.kernel, case.base)):
            if case.base is not None:
                return CaseOutcome(mode=policy.mode, error="a head-vs-base confirmation of a launcher is not supported "
                                                           "yet: each commit's launcher runs in a case of its own")
            if not getattr(dev, "calls_launcher_itself", False):  # the GPU child: a confined process per case
                return launcher_case.run_in_own_process(dev, case, self.resolve(case.kernel, case), policy)
        if case.base is not None:
            return ab.run_ab(self, case, policy)
        launch = self.resolve(case.kernel, case) if case.kernel is not None else None
        # A kernel is verified with its precision's bound and timed against cuBLAS in the same
        # precision (TF32 against cuBLAS TF32, BF16 against cuBLAS BF16), never FP32's.
        precision = case.precision
        out = CaseOutcome(mode=policy.mode, compute_mode=precision.compute_mode, dtype=precision.input_type,
                          form=case.form.key(case.batch))
        out.env["notes"] = dev.notes(precision)
        if case.kernel is not None and case.kernel.written_by:  # Helion's version and config, where it wrote the code
            out.env.update(case.kernel.written_by)
        out.env["precision"] = precision.describe()
        out.env["form"] = case.form.describe(case.batch)
        problem = Problem(dev, case, case.form, precision)
        clock = StageClock()
        with clock.stage("compile"):  # a prefetched kernel's compile was waited for here
            if launch is not None and launch.language == "triton":  # its @triton.autotune choice, where it has one
                launch, out.env["triton"] = triton_autotune.settle(self, case.kernel, launch, case, problem, policy)
            function = dev.compile(launch) if launch is not None else None
        out.env["before"] = dev.state()

        with clock.stage("reference"):
            ref = dev.reference(problem.a, problem.b)
        if launch is not None:
            with clock.stage("verify"):
                checked = self.verify(function, launch, problem, ref, case.seed)
            out.verified, out.error = checked.verdict(self.tolerance(launch, policy, case.k))
            out.rel_error = checked.rel_error if checked.rel_error != float("inf") else None
            out.env["c_convention"] = checked.convention
            if not out.verified:
                out.status = "incorrect"
        else:
            out.verified, out.rel_error = True, 0.0

        c = problem.c  # the checked kernel's own C: a launcher that keeps its first C's map times as it checked
        if launch is not None:
            problem.refill(c, seed=case.seed + 1)  # finite values: the NaN probe left NaN behind
        with clock.stage("cublas_best"):
            run_cublas = self.baseline(problem, case, policy, out, ref) if out.verified else problem.cublas_call()
        if getattr(run_cublas, "plan", None):  # cuBLASLt's choice, where the baseline makes one
            out.env["cublas_plan"] = run_cublas.plan
        if not (case.form.default and case.batch == 1):
            # The call that gives this form's product, and proof that it does: a baseline of
            # another GEMM would make every ratio of this form a lie.
            out.env["cublas_call"] = cublas_gemm(case.form, case.m, case.n, case.k).text()
            with clock.stage("cublas_check"):
                wrong = self.cublas_disagrees(problem, ref, launch, policy, case.k, out)
            out.env["cublas_status"] = "incorrect" if wrong else "passed"
            if wrong:  # cuBLAS's C is wrong, not the kernel's: the kernel keeps its own verdict, no ratio is made
                out.env["cublas_error"] = wrong
                if launch is None:  # cuBLAS alone (a batch): the result is cuBLAS's, and it is wrong
                    out.verified, out.error, out.status = False, wrong, "incorrect"
        run_variant = problem.kernel_call(function, launch, c, 1.0, 0.0) if launch is not None else run_cublas

        if out.verified:  # a wrong kernel gets no speed
            out.env["inputs"] = case.inputs
            with clock.stage("samples"), problem.timed_inputs(case.inputs), dev.measuring():
                t = timing.time_pair(dev, run_variant, run_cublas, policy)
            with clock.stage("after_check"):
                after = (self.after_timing(function, launch, problem, ref, self.tolerance(launch, policy, case.k))
                         if launch is not None else None)
            if after:  # it worked while checked, then did other work (or none) while timed
                out.verified, out.error, out.status = False, after, "incorrect"
            elif not t.variant_ms:
                out.error = (f"no usable timing samples within {2 * policy.time_cap_s:g} s: "
                             f"{t.hold_timeouts} batch(es) whose stream hold ran out, none throttled")
            else:
                record(out, case, t, policy)
                out.env["peak"] = peak(dev.figures(), precision.compute_mode, out.gflops)
                if out.env.get("cublas_status") == "incorrect":  # its time is of another product: no bar
                    out.pct_of_cublas = out.cublas_median_ms = out.cublas_gflops = None

        out.env["after"] = dev.state()
        if launch is not None:
            with clock.stage("resources"):
                out.env["resources"] = dev.resources(function, launch, case.m, case.n, case.k)
            out.env["launch"] = {"entry": launch.entry, "block": launch.block,
                                 "grid": launch.grid(case.m, case.n, case.k, case.batch),
                                 "dynamic_smem": launch.dynamic_smem(case.m, case.n, case.k, case.batch),
                                 "defines": launch.defines, "layout": launch.form.uniform_layout or "mixed",
                                 "target": launch.target,
                                 "compiler": launch.compiler, "flags": list(launch.flags),
                                 "params": function.plan.describe(),
                                 **({"tensor_maps": {x: list(b) for x, b in launch.tensor_maps.items()}}
                                    if launch.tensor_maps else {}),
                                 # The maps the TMA could not describe at this size: the kernel's other path ran.
                                 **({"maps_absent": missing}
                                    if (missing := tensor_maps.absent(launch, case.m, case.n, case.k)) else {}),
                                 **({"c_starts_zero": True} if launch.c_starts_zero else {}),
                                 # A Triton kernel's @triton.heuristics, as computed for this case.
                                 **({"heuristics": function.heuristics} if getattr(function, "heuristics", None)
                                    else {})}
        out.env["stages_s"] = clock.record()
        return out


    def baseline(self, problem: Problem, case: Case, policy: TimingPolicy, out: CaseOutcome, ref):
        """The cuBLAS call the kernel is timed beside: cuBLAS's best where the policy asks for it
        and the device offers cuBLASLt's candidates for this GEMM, else cuBLAS's default call; what
        was chosen, and from what, in env.cublas_best (worker/measure/cublas_best.py)."""
        default = problem.cublas_call()
        if policy.cublas_baseline != "best":
            return default
        dev = self.device
        try:
            gemm = dev.cublas_candidates(problem, cublas_best.CANDIDATES)
        except Exception as exc:  # cuBLASLt has no algorithm for this shape (an odd leading dimension, say)
            gemm, why = None, f"cuBLASLt offers no candidates here: {str(exc)[:150]}"
        else:
            why = "no cuBLASLt candidates for this GEMM on this device"
        if gemm is None:
            out.env["cublas_best"] = {"against": "default", "why": why}
            return default

        def median_ms(call) -> float:
            return self.median_ms(call, policy)

        key = {"gpu": self.gpu_name(), "library": gemm.library_version, "m": case.m, "n": case.n,
               "k": case.k, "precision": problem.precision.describe(), "form": problem.form.key(case.batch),
               "mode": policy.mode, "flush": policy.flush}
        if getattr(dev, "calls_launcher_itself", False):
            # This process runs the job's host code: it writes nothing that other jobs would inherit
            # (nor may it touch the data folder: worker/launch/host_jail.py). Its choice is made in the
            # rehearsal, before the job's code is first called, and kept here for the timed run.
            plan = cublas_best.choose(default, gemm, median_ms, None, key, memo=self.cublas_choices)
        else:
            plan = cublas_best.choose(default, gemm, median_ms, dev.cfg.data_dir / "cublas-best", key)
        if plan["against"] == "best":  # the bar must be a right product too: the chosen call's C checked once
            gemm()
            dev.synchronize()
            error = verify.rel_error(dev.xp, problem.read(gemm.c), ref)
            bound = bound_for(problem.precision, case.k, policy)
            if error > bound:
                plan = {**plan, "against": "default",
                        "why": f"cuBLASLt's fastest candidate gave a C off by {error:.3g}: timed against the default"}
        out.env["cublas_best"] = plan
        return gemm if plan["against"] == "best" else default

    def median_ms(self, call, policy: TimingPolicy) -> float:
        """A candidate's time when one of several is chosen (cuBLAS's best, a Triton autotune): one
        warm-up launch (its module loaded, its workspace touched), then the median of a few samples."""
        self.device.warm_up([call], 0.0)
        return cublas_best.median_of(self.device.sample([call] * cublas_best.SELECTION_SAMPLES, policy).times_ms)

    def cublas_disagrees(self, problem: Problem, ref, launch: Launch | None, policy: TimingPolicy, k: int,
                         out: CaseOutcome) -> str | None:
        """Run cuBLAS once in the form and check its C like a kernel's; why it is wrong, or None."""
        c = problem.new_c()
        call = problem.cublas_call(c)
        call()
        self.device.synchronize()
        # cuBLASLt's FP8 call pads an odd N and leaves its C in a padded matrix of its own (`c`).
        error = verify.rel_error(self.device.xp, problem.read(getattr(call, "c", c)), ref)
        out.env["cublas_rel_error"] = error if error != float("inf") else None
        bound = self.tolerance(launch, policy, k) if launch is not None else bound_for(problem.precision, k, policy)
        if error <= bound:
            return None
        return (f"the cuBLAS baseline of form {out.form} is wrong (relative error {error:.3g} > {bound:g}): the "
                "kernel is judged on its own check, and no ratio is made against cuBLAS; please report this with the case")


def bound_for(precision, k: int, policy: TimingPolicy) -> float:
    """The one bound on a C's relative error in a precision, for a kernel without its own and for
    cuBLAS's: the deployment's for FP32 and TF32 (GEMMWATCH_MAX_REL_ERROR and _TF32), else the bound
    a narrow precision and K allow (core/description/precision.py derives it)."""
    if precision.compute_mode == "tf32":
        return policy.max_rel_error_tf32
    if precision.compute_mode == "fp32":
        return policy.max_rel_error
    return precision.default_tolerance(k)


def record(out: CaseOutcome, case: Case, t: timing.PairedSamples, policy: TimingPolicy) -> None:
    """The result's figures from its samples. Statistics come from the stored (compact) samples,
    so a re-analysis gets the same numbers."""
    variant_ms, cublas_ms = compact(t.variant_ms), compact(t.cublas_ms)
    out.add_timing(variant_ms, stats.summarise(variant_ms))
    out.converged = t.converged
    out.gflops = gflops(case.m, case.n, case.k, out.median_ms, case.batch)
    cublas_stats = stats.summarise(cublas_ms)
    out.cublas_median_ms = cublas_stats["median_ms"]
    out.cublas_gflops = gflops(case.m, case.n, case.k, out.cublas_median_ms, case.batch)
    out.pct_of_cublas = pct_of_cublas(variant_ms, cublas_ms)
    out.env["cublas_samples_ms"] = cublas_ms
    out.env["cublas_stats"] = cublas_stats
    out.env["throttled_samples_discarded"] = t.discarded
    out.env["throttle_reasons_seen"] = t.reasons_seen
    out.env["throttled_samples_kept"] = t.throttled_kept
    out.env["stream_hold"] = {"used": policy.holds_stream, "batches_dropped": t.hold_timeouts}
    out.env["l2_flush"] = policy.flush if policy.flushes else None
    if policy.mode == "sustained":
        out.env["sustained"] = {"settle_s": policy.settle_s, "settle_samples": t.settle_samples,
                                "power_capped_batches_kept": t.power_capped_kept}
    out.env["convergence"] = {"variant": stats.convergence(variant_ms), "cublas": stats.convergence(cublas_ms)}


def pct_of_cublas(variant_ms: list[float], cublas_ms: list[float]) -> float:
    """Paired: each variant sample against the cuBLAS sample taken beside it, so a clock change
    between pairs moves both sides of the ratio; the median of those ratios, in percent."""
    ratios = sorted(cb / v for v, cb in zip(variant_ms, cublas_ms))
    return 100.0 * ratios[len(ratios) // 2]


def peak(figures, compute_mode: str, gflops_measured: float | None) -> dict:
    """The GPU's peak for this precision (core/description/precision.py: SMs x top SM clock x operations per SM
    per clock) and how much of it the kernel reached."""
    tflops = peak_tflops(figures.compute_capability, compute_mode, figures.sm_count, figures.max_sm_clock_mhz)
    pct = 100.0 * gflops_measured / 1000.0 / tflops if tflops and gflops_measured else None
    return {"tflops": tflops, "sm_clock_mhz": figures.max_sm_clock_mhz, "pct": pct}


def compact(samples: list[float]) -> list[float]:
    """Six significant digits: CUDA events resolve about 0.5 us, so nothing real is lost."""
    return [float(f"{x:.6g}") for x in samples]


class CupyRunner(Runner):
    """The runner on this machine's GPU, through CuPy. Made as the GPU process starts (worker/child.py),
    with that process's one Settings (core/settings.py), read from the environment it was given."""

    registration_identity = staticmethod(CupyDevice.registration_identity)

    def __init__(self, cfg: Settings | None = None):
        super().__init__(CupyDevice(cfg or Settings()))
