"""The GPU as the runner uses it, through CuPy: inputs, compiled kernels, launches, cuBLAS, CUDA
event samples behind a stream hold, NVML readings. Everything this module returns is what a
GPU supplies; every number and verdict is made from it by worker/measure/runner.py, worker/measure/verify.py and
worker/measure/timing.py (tests/fake_gpu.py supplies the same things from the CPU).
"""

import os
import time
from typing import Any

import numpy

from core.description.kernel import DeviceFigures, Launch
from core.description.precision import Precision
from core.settings import Settings
from core.description.gemm_form import GemmForm
from core.description.inputs import SIGNED, drawn
from worker.compile import compiler, launcher_library
from worker.compile.prefetch import Prefetch
from worker.gpu import cublas_forms, cublas_half, cublaslt, cublaslt_fp8, gpu_identity, resources
from worker.arguments import kernel_args, tensor_maps
from worker.gpu.stream_hold import StreamHold
from worker.gpu.samples import Batch


class NoCudaDevice(RuntimeError):
    pass


class CupyDevice:
    registration_identity = staticmethod(gpu_identity.registration_identity)
    # The set-up hook of a launcher case's confined process (worker/measure/launcher_case.py).
    launcher_hook = "worker.measure.launcher_gpu:CupyLauncherCase"

    def __init__(self, cfg: Settings) -> None:
        # cuBLAS must be true FP32: CuPy switches cupy.matmul to TF32 when CUPY_TF32 is set.
        if os.environ.get("CUPY_TF32", "0") not in ("", "0"):
            raise RuntimeError("CUPY_TF32 is set: the cuBLAS baseline would run in TF32, not FP32")
        try:
            import cupy
        except Exception as exc:  # ImportError, or CUDA libraries missing
            raise NoCudaDevice(f"no CUDA device: CuPy is not usable here ({exc})") from exc
        try:
            count = cupy.cuda.runtime.getDeviceCount()
        except cupy.cuda.runtime.CUDARuntimeError as exc:
            raise NoCudaDevice(f"no CUDA device: {exc}") from exc
        if count == 0:
            raise NoCudaDevice("no CUDA device: the CUDA runtime sees no GPU")
        self.cfg = cfg
        self.cp = self.xp = cupy
        self.cublas_math_mode = _check_cublas_math_mode(cupy)
        self.device = cupy.cuda.Device(0)
        self.compute_capability = self.device.compute_capability  # "90" for 9.0
        self.pci_bus_id = self.device.pci_bus_id
        self._functions: dict[tuple, kernel_args.LoadedKernel] = {}
        # A job's next kernels compile while its first cases are timed (worker/compile/prefetch.py).
        self._prefetch = Prefetch(lambda launch: compiler.compile_launch(launch, self.compute_capability, cfg),
                                  cfg.compile_workers)
        self._flush_buffer = None
        self._readwrite_flush = None
        self._hold = None
        self._max_clock: int | None = None

    # -- identity and health ----------------------------------------------------------
    def identity(self) -> dict[str, Any]:
        cp = self.cp
        attrs = self.device.attributes
        cc = self.compute_capability
        with gpu_identity.nvml():
            ident = gpu_identity.static_identity(self.pci_bus_id)
        ident.update(
            sm_count=attrs["MultiProcessorCount"],
            compute_capability=f"{cc[:-1]}.{cc[-1]}",
            l2_bytes=attrs["L2CacheSize"],
            cuda_runtime=cp.cuda.runtime.runtimeGetVersion(),
            cuda_driver_api=cp.cuda.runtime.driverGetVersion(),
            cupy=cp.__version__,
            cublas=cublaslt.version(),  # cuBLASLt's, which cuBLAS's own calls share: 130100 for 13.1.0
            # CuPy passes -ftz=true to NVRTC for every RawModule; denormals flush to zero.
            nvrtc_flush_to_zero=True,
            cublas_math_mode=self.cublas_math_mode,
        )
        return ident

    def figures(self) -> DeviceFigures:
        a = self.device.attributes
        cc = self.compute_capability
        return DeviceFigures(
            sm_count=a["MultiProcessorCount"], smem_per_sm=a["MaxSharedMemoryPerMultiprocessor"],
            smem_per_block=a.get("MaxSharedMemoryPerBlockOptin", a["MaxSharedMemoryPerBlock"]),
            regs_per_sm=a["MaxRegistersPerMultiprocessor"], max_threads_per_sm=a["MaxThreadsPerMultiProcessor"],
            l2_bytes=a["L2CacheSize"], compute_capability=f"{cc[:-1]}.{cc[-1]}",
            max_sm_clock_mhz=self._max_sm_clock_mhz())

    def _max_sm_clock_mhz(self) -> int:
        if self._max_clock is None:
            with gpu_identity.nvml():
                self._max_clock = int(gpu_identity.static_identity(self.pci_bus_id).get("max_sm_clock_mhz") or 0)
        return self._max_clock

    def healthy(self) -> bool:
        """False once a kernel fault has poisoned this process's CUDA context."""
        try:
            self.cp.cuda.runtime.deviceSynchronize()
            return True
        except Exception:
            return False

    def release_memory(self) -> None:
        """Between jobs: give pooled device memory back, keep the context and compiled modules."""
        self.cp.get_default_memory_pool().free_all_blocks()

    def notes(self, precision: Precision) -> list[str]:
        return ["kernels compiled by NVRTC with -ftz=true (CuPy adds it): denormals flush to zero",
                f"cuBLAS baseline: {cublaslt_fp8.describe(precision)}" if precision.fp8 else
                f"cuBLAS baseline: {cublas_forms.describe(precision)}" if precision.fp16_accumulate else
                f"cuBLAS baseline: {cublas_half.describe(precision)}" if precision.half else
                "cuBLAS baseline: cupy.matmul with CUBLAS_TF32_TENSOR_OP_MATH (TF32 tensor cores)"
                if precision.compute_mode == "tf32" else "cuBLAS baseline: cupy.matmul, FP32 compute, TF32 off"]

    def state(self) -> dict[str, Any]:
        with gpu_identity.nvml():
            return gpu_identity.device_state(self.pci_bus_id)

    # -- matrices ---------------------------------------------------------------------
    def uniform(self, seed: int, rows: int, cols: int, inputs: str = SIGNED):
        """Uniform in [-1, 1) unless `inputs` names another distribution (core/description/inputs.py): never
        zeros, which hide unwritten outputs and run unrealistically fast."""
        return drawn(self.cp.random.default_rng(seed), rows, cols, inputs, self.cp.float32)

    def in_layout(self, x, layout: str):
        return self.cp.asfortranarray(x) if layout == "column" else self.cp.ascontiguousarray(x)

    def matrix(self, rows: int, cols: int, layout: str, fill: float | None = None, seed: int | None = None):
        if seed is not None:
            return self.in_layout(self.uniform(seed, rows, cols), layout)
        order = "F" if layout == "column" else "C"
        if fill is None:
            return self.cp.empty((rows, cols), dtype=self.cp.float32, order=order)
        return self.cp.full((rows, cols), fill, dtype=self.cp.float32, order=order)

    def synchronize(self) -> None:
        self.cp.cuda.Device().synchronize()

    # -- kernels ----------------------------------------------------------------------
    def triton_kernel(self, launch: Launch) -> dict:
        """A Triton kernel's parameters and @triton.autotune configurations, read in the confined
        compile process (worker/compile/triton_build.describe)."""
        from worker.compile import triton_build  # here: the C++ paths never need it

        return triton_build.describe(launch, self.compute_capability, self.cfg)

    def wrapper_call(self, desc, dims: tuple[int, int, int] | None = None) -> dict:
        """The one launch a Triton description's `wrapper` makes, read in the confined compile process
        (at these sizes, as numbers, for a file written for one size)."""
        from worker.compile import triton_build  # here: the C++ paths never need it

        return triton_build.wrapper_call(desc, self.compute_capability, self.cfg, dims)

    @staticmethod
    def zeroed_first(call, c):
        """The call with C set to zero before it, on the same (current) stream: one call, one time."""
        def zeroed_then_called():
            c.fill(0)
            call()

        zeroed_then_called.keep = call  # what the call keeps alive (a launcher's host scalars) lives on
        return zeroed_then_called

    def helion_code(self, desc, dims: tuple[int, int, int]):
        """The Triton code Helion writes for a Helion description's kernel at this size, in the confined
        compile process (worker/compile/helion_build.py)."""
        from worker.compile import helion_build  # here: only a Helion kernel needs it

        return helion_build.triton_code(desc, dims, self.compute_capability, self.cfg)

    def helion_codes_beside(self, kernels: list) -> object:
        """Helion's Triton code for each (kernel, sizes) of a job, each kernel's sizes in one compile
        process, written and kept in a thread of its own while the job's first cases run."""
        from worker.compile import helion_build

        return helion_build.write_beside(kernels, self.compute_capability, self.cfg)

    def compile(self, launch: Launch) -> kernel_args.LoadedKernel:
        """A cubin from the confined compile process (worker/compile/compiler.py), loaded here: this
        process, which holds the GPU and the worker's settings, never runs the compiler. How its
        arguments are passed comes from the parameters the cubin records (worker/arguments/kernel_args.py)."""
        key = kernel_args.loaded_key(launch)
        if key not in self._functions:
            failed = self._prefetch.wait(key)  # compiled ahead, into the kernel cache: the compile below reads it
            if failed is not None:
                raise failed
            built = compiler.compile_launch(launch, self.compute_capability, self.cfg)
            self._functions[key] = kernel_args.load(built, launch, lambda symbol: self.cp.RawModule(
                path=str(built.cubin_path)).get_function(symbol))
        return self._functions[key]

    def prefetch(self, launches: list[Launch]) -> int:
        """Start compiling these kernels ahead of their cases, in order; how many were queued."""
        return self._prefetch.start([(kernel_args.loaded_key(launch), launch) for launch in launches])

    def end_prefetch(self) -> None:
        self._prefetch.stop()

    def build_launcher(self, launch: Launch) -> launcher_library.LauncherLibrary:
        """The launch's host launcher as a shared library, from the confined compile process; never loaded here."""
        return launcher_library.build(launch, self.compute_capability, self.cfg)

    def kernel_call(self, kernel: kernel_args.LoadedKernel, launch: Launch, m: int, n: int, k: int, a, b, c,
                    alpha: float, beta: float, batch: int = 1, buffers: dict | None = None):
        """A call of the kernel over these matrices, each argument of the type its binary declares."""
        function = kernel.function
        if kernel.plan is None:  # a launcher's entry, loaded for its resources: never launched by the runner
            raise ValueError(f"{launch.variant}: its entry {launch.entry} was loaded as a launcher's kernel and has no "
                             "argument plan of its own; describe it without `launcher` to time the kernel itself")
        grid, smem = launch.grid(m, n, k, batch), launch.dynamic_smem(m, n, k, batch)
        if kernel.shared_bytes is not None:  # what its compiler (Triton) says a launch needs
            smem = kernel.shared_bytes
        if smem > 0 and function.max_dynamic_shared_size_bytes < smem:
            function.max_dynamic_shared_size_bytes = smem  # past 48 KiB a kernel gets it only when it asks
        named = kernel_args.named_values(launch, m, n, k, a, b, c, alpha, beta, batch, buffers)
        by_value = kernel_args.maps_by_value(kernel.plan)
        # A Triton descriptor's map: the box Triton compiled it for.
        for matrix, encoded in self._encoded_maps(launch, m, n, k, a, b, c, kernel.descriptors).items():
            if encoded is None:  # no map at this size: what stands in for it (problem.kernel_call refused the rest)
                encoded = tensor_maps.stand_in(launch, matrix, m, n, k, by_value)
            # By value: the bytes themselves; by address: the map in device memory, kept alive by the
            # call, or address 0.
            if matrix in by_value:
                named[f"{matrix}_map"] = encoded
            else:
                named[f"{matrix}_map"] = (self.cp.uint64(0) if encoded is None
                                          else self.cp.asarray(numpy.frombuffer(encoded, dtype=numpy.uint8)))
        if kernel.scratch is not None:  # one buffer for every call of the case, as Triton's allocator gives one
            named[kernel_args.SCRATCH_ROLE] = kernel.scratch.buffer(grid, self.cp)
        args = kernel_args.values(kernel.plan, named, self.cp)
        block = launch.block
        return lambda: function(grid, block, args, shared_mem=smem)

    @staticmethod
    def _encoded_maps(launch: Launch, m: int, n: int, k: int, a, b, c,
                      boxes: dict | None = None) -> dict[str, bytes | None]:
        """Each TMA tensor map the launch takes, over this case's matrix, by matrix: its 128 bytes, or None
        where the TMA cannot describe the matrix (worker/arguments/tensor_maps.py). boxes: a box per matrix
        in place of the description's."""
        encoded = {}
        for matrix, box in launch.tensor_maps.items():
            x = {"A": a, "B": b, "C": c}[matrix]
            req = tensor_maps.request(matrix, launch.form.layout(matrix), m, n, k, x.data.ptr,
                                      tensor_maps.data_type(launch, matrix), (boxes or {}).get(matrix, box))
            encoded[matrix] = None if req is None else tensor_maps.encode(req)
        return encoded

    def resources(self, kernel: kernel_args.LoadedKernel, launch: Launch, m: int, n: int, k: int) -> dict:
        smem = kernel.shared_bytes if kernel.shared_bytes is not None else launch.dynamic_smem(m, n, k)
        found = resources.for_function(kernel.function, launch.block, self.device, smem)
        return {**found, "compiler": kernel.compiler}

    def cublas_candidates(self, problem, count: int):
        """cuBLASLt's heuristic candidates for the problem's GEMM (any form, a strided batch too), as
        one call that `use(i)` sets to the i-th (worker/measure/cublas_best.py times them)."""
        out = problem.new_c()
        if problem.precision.fp8:
            gemm = cublaslt_fp8.call(self.cp, problem.a_in, problem.b_in, out, problem.precision, count, problem.scales)
        else:
            gemm = cublaslt.LtGemm(self.cp, problem.a_in, problem.b_in, out, problem.precision, problem.form, count)
        gemm.library_version = cublaslt.version()
        return gemm

    def cublas_call(self, a, b, out, precision: Precision, form: GemmForm = GemmForm(), batch: int = 1,
                    scales: dict | None = None):
        """cuBLAS over A, B and C in the precision's types and the form's layouts (a batch: one
        strided-batched call). The default form (row-major, FP32 sums, one matrix) keeps the calls
        its figures were first measured with, as does FP8 in the TN form (cuBLASLt's FP8 call takes
        either B); every other goes through worker/gpu/cublas_forms.py."""
        cp = self.cp
        if not _own_lt_call(form, precision, batch):
            return cublas_forms.call(cp, a, b, out, precision, form, batch)
        if precision.fp8:
            return cublaslt_fp8.call(cp, a, b, out, precision, scales=scales)
        if precision.half:
            return cublas_half.call(cp, a, b, out, precision)
        if precision.compute_mode == "fp32":
            return lambda: cp.matmul(a, b, out=out)
        # cuBLAS with TF32 tensor cores allowed for this call only; the handle is put back to its
        # FP32 math mode right after, so FP32 baselines stay FP32.
        from cupy_backends.cuda.libs import cublas  # CuPy is optional (gemmwatch[gpu]): imported on a GPU only

        handle = cp.cuda.device.get_cublas_handle()
        tf32_mode = getattr(cublas, "CUBLAS_TF32_TENSOR_OP_MATH", 3)
        fp32_mode = self.cublas_math_mode or 0

        def run():
            cublas.setMathMode(handle, tf32_mode)
            try:
                cp.matmul(a, b, out=out)
            finally:
                cublas.setMathMode(handle, fp32_mode)

        return run

    def reference(self, a, b):
        """A·B by cuBLAS FP32 (TF32 off): what every kernel is checked against."""
        return self.cp.matmul(a, b)

    # -- samples ------------------------------------------------------------------------
    clock = staticmethod(time.perf_counter)

    def measuring(self):
        return gpu_identity.nvml()  # the timing loop reads throttle reasons between batches

    @staticmethod
    def profile_range(name: str):
        """An NVTX range around the launches a profiler is to see (worker/profile/profile_launch.py)."""
        from cupyx.profiler import time_range  # CuPy is optional (gemmwatch[gpu]): imported on a GPU only

        return time_range(name)

    def warm_up(self, calls, warmup_ms: float) -> None:
        stream = self.cp.cuda.get_current_stream()
        warm_end = time.perf_counter() + warmup_ms / 1000.0
        while True:  # at least one warm-up launch of each, then until the warm-up time is spent
            for call in calls:
                call()
            stream.synchronize()
            if time.perf_counter() >= warm_end:
                break

    @staticmethod
    def rest(seconds: float) -> None:
        """The card left idle ("burst"): nothing queued, so its power controller lets the clock up."""
        time.sleep(seconds)

    def sample(self, order, policy) -> Batch:
        """One batch of CUDA event samples, in order. Samples are queued behind a stream hold
        (worker/gpu/stream_hold.py), so no sample waits for a launch. Isolated (cold default): each
        sample behind a hold of its own, waited for before the next is queued, as nvbench takes a
        cold sample; back to back, a small kernel read 0.5-0.8 us longer (docs/BENCHMARKS.md); hot
        and sustained samples stay back to back, sustained ones with no hold (TimingPolicy)."""
        cp = self.cp
        flush = self._flusher(policy.flush) if policy.flushes else (lambda: None)
        hold = self._stream_hold() if policy.holds_stream else None
        stream = cp.cuda.get_current_stream()
        events = []
        timed_out = False
        for group in ([fn] for fn in order) if policy.isolated else [order]:
            if hold is not None:
                hold.hold(stream)  # the GPU waits here until the group is queued
            try:
                for fn in group:
                    flush()
                    start, end = cp.cuda.Event(), cp.cuda.Event()
                    start.record(stream)
                    fn()
                    end.record(stream)
                    events.append((start, end))
            finally:
                if hold is not None:
                    hold.release()
            end.synchronize()
            timed_out |= hold is not None and hold.timed_out()
        reasons = gpu_identity.throttle_reasons(self.pci_bus_id)
        return Batch([cp.cuda.get_elapsed_time(s, e) for s, e in events], timed_out, reasons or 0)

    def _stream_hold(self):
        if self._hold is None:
            self._hold = StreamHold(self.cp, self.compute_capability, self.cfg)
        return self._hold

    def _flusher(self, how: str):
        """Before a cold sample: "readwrite" (default) reads and writes 2x the L2's size with our
        own kernel; "memset" zero-fills it with cudaMemset, as nvbench and CuPy's fill(0) do."""
        cp = self.cp
        l2 = self.device.attributes["L2CacheSize"]
        if how == "memset":
            if self._flush_buffer is None:
                self._flush_buffer = cp.empty(max(2 * l2, 1 << 20) // 4, dtype=cp.float32)
            buf = self._flush_buffer
            return lambda: buf.fill(0.0)
        if self._readwrite_flush is None:
            self._readwrite_flush = self._stream_hold().flusher(l2)
        return self._readwrite_flush


def _check_cublas_math_mode(cp) -> int | None:
    """The FP32 baseline must not be allowed TF32 tensor cores (CUBLAS_TF32_TENSOR_OP_MATH = 3)."""
    try:
        from cupy_backends.cuda.libs import cublas  # CuPy is optional (gemmwatch[gpu]): imported on a GPU only

        mode = cublas.getMathMode(cp.cuda.device.get_cublas_handle())
    except Exception:  # older CuPy without the binding: CUPY_TF32 was checked already
        return None
    if mode & 0xF not in (0, 2):  # CUBLAS_DEFAULT_MATH, CUBLAS_PEDANTIC_MATH
        raise RuntimeError(f"cuBLAS math mode {mode} allows reduced precision; the FP32 baseline would not be FP32")
    return mode


def _own_lt_call(form: GemmForm, precision: Precision, batch: int) -> bool:
    """Whether cuBLAS's product in this form is one of the baseline's own calls (row-major, FP32
    sums, one matrix; FP8 in either of its forms, which cuBLASLt's FP8 call lays out itself), not
    worker/gpu/cublas_forms.py's."""
    return batch == 1 and form.accumulate == "fp32" and (form.uniform_layout == "row" or precision.fp8)
