"""The CPU double's launcher cases (never imported by product code): the device of the confined
process of a launcher case (worker/measure/launcher_case.py) on the CPU, and its set-up hook.

As on the GPU, the product's runner runs there and calls the job's launcher through ctypes with the
planned arguments (worker/compile/launcher_library.py); here the matrices are NumPy's, so the launcher
gets host pointers and a null stream, and a launcher that computes on the host
(tests/fixtures/host_launchers) really computes C. Event times come from the double's model.
"""

import hashlib
import os
import struct
from pathlib import Path

from worker.arguments import kernel_args, tensor_maps
from worker.compile import launcher_library
from worker.launch.host_jail import Allowance
from worker.measure.launcher_hook import LauncherCase
from tests.fake_gpu import Call, FakeDevice, FakeKernel


class FakeLauncherDevice(FakeDevice):
    calls_launcher_itself = True

    def __init__(self, cfg, plan: kernel_args.ArgPlan, compiler_label: str):
        super().__init__(cfg)
        self.plan, self.compiler_label = plan, compiler_label
        self.launcher = None  # the job's function (ctypes), once loaded

    def compile(self, launch) -> FakeKernel:
        return FakeKernel(launch, launch.variant, self.plan, self.compiler_label)

    def kernel_call(self, kernel, launch, m, n, k, a, b, c, alpha, beta, batch=1, buffers=None):
        if self.launcher is None:  # the rehearsal: cuBLAS in its place
            return self.cublas_call(a, b, c, launch.precision, launch.form, batch)
        named = kernel_args.named_values(launch, m, n, k, a, b, c, alpha, beta, batch, buffers) | {"stream": None}
        for matrix, box in launch.tensor_maps.items():  # no driver here: the map's request, in bytes
            named[f"{matrix}_map"] = fake_map({"A": a, "B": b, "C": c}[matrix], matrix, launch, m, n, k, box)
        args = launcher_library.arguments(kernel.plan, named, lambda x: 0 if x is None else x.ctypes.data)
        launcher = self.launcher
        launcher.argtypes, launcher.restype = list(args.argtypes), None

        def run():
            launcher(*args.values)

        run.keep = args  # the host scalars live as long as the call
        return Call(run, 2.0 * m * n * k / (kernel.gflops * 1e6))

    def resources(self, kernel, launch, m, n, k) -> dict:
        return {}  # the entry's, from the GPU child (worker/measure/launcher_case.py)


def fake_map(x, matrix: str, launch, m: int, n: int, k: int, box) -> bytes:
    """What stands for a TMA tensor map on the CPU, whose driver has no cuTensorMapEncodeTiled: the
    request the GPU's driver would encode (the product's tensor_maps.request), as a record a fixture
    launcher reads (tests/fixtures/host_launchers/src/host_maps.cu): base address, elements along a line,
    lines, bytes between lines, the box's two sides and its swizzle, in 128 bytes."""
    req = tensor_maps.request(matrix, launch.form.layout(matrix), m, n, k, x.ctypes.data,
                              tensor_maps.data_type(launch, matrix), box)
    record = struct.pack("<QQQQIII", req.address, *req.dims, req.line_bytes, *req.box, req.swizzle)
    return record.ljust(tensor_maps.MAP_BYTES, b"\0")


class CpuLauncherCase(LauncherCase):
    """The set-up hook of a launcher case on the CPU. Its set-up "compiles" one kernel per precision into
    the call's CuPy cache, as a GPU's set-up compiles CuPy's own (worker/launch/setup_kernels.py), where
    that cache lacks it, and a note of the case's result says which it did (whether its cache was seeded)."""

    def setup_allowance(self) -> Allowance:
        return Allowance(writable=(os.environ["CUPY_CACHE_DIR"],))

    def set_up(self) -> None:
        super().set_up()
        name = hashlib.sha1(str(self.case.precision).encode()).hexdigest() + ".cubin"
        kernel = Path(os.environ["CUPY_CACHE_DIR"]) / name
        self.kernel_note = f"set-up kernel {name} {'found' if kernel.exists() else 'compiled'}"
        if not kernel.exists():
            kernel.write_bytes(b"a set-up's kernel")

    def call(self, launcher) -> None:
        super().call(launcher)
        if self.outcome is not None:
            self.outcome.env.setdefault("notes", []).append(self.kernel_note)

    def call_allowance(self) -> Allowance:
        return Allowance()

    def make_device(self) -> FakeLauncherDevice:
        device = FakeLauncherDevice(self.cfg, self.plan, self.compiler)
        if self.compute_capability:  # the parent's double's, as the GPU child's is the GPU's own
            device.compute_capability = self.compute_capability
        return device
