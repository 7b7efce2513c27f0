"""The CPU double of a launcher call's set-up hook (worker/launch/launcher_call.LauncherHook), named
"tests.cpu_gemm_hook:CpuGemm" by the tests of the confined process: a launcher with the signature
below, called once over seeded inputs, its C read back."""

import ctypes
import random

from worker.launch.jail_terms import Allowance

def cpu_gemm_inputs(M: int, N: int, K: int, seed: int) -> tuple[list[float], list[float], list[float]]:
    """A (M x K), B (K x N) and C (M x N), row-major, uniform in [-1, 1): the CPU hook's inputs, and
    what a test computes its reference from."""
    rng = random.Random(seed)

    def draw(n: int) -> list[float]:
        return [rng.uniform(-1.0, 1.0) for _ in range(n)]

    return draw(M * K), draw(K * N), draw(M * N)


# launch(size_t M, size_t N, size_t K, float alpha, const float *A, const float *B, float beta, float *C,
#        cudaStream_t stream)
LAUNCHER_ARGTYPES = [ctypes.c_size_t] * 3 + [ctypes.c_float, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_float,
                                             ctypes.c_void_p, ctypes.c_void_p]


class CpuGemm:
    """A launcher call's set-up on the CPU (worker/launch/launcher_call.LauncherHook): the CI's, a test of
    the confinement, not of speed. It calls the launcher once over inputs of its own."""

    def __init__(self, args: dict):
        self.M, self.N, self.K = int(args.get("M", 8)), int(args.get("N", 8)), int(args.get("K", 8))
        self.alpha, self.beta = float(args.get("alpha", 1.0)), float(args.get("beta", 0.0))
        self.seed = int(args.get("seed", 0))

    def setup_allowance(self) -> Allowance:
        return Allowance()

    def set_up(self) -> None:
        a, b, c = cpu_gemm_inputs(self.M, self.N, self.K, self.seed)
        self.A, self.B, self.C = ((ctypes.c_float * len(x))(*x) for x in (a, b, c))

    def call_allowance(self) -> Allowance:
        return Allowance()

    def call(self, launcher) -> None:
        launcher.argtypes = LAUNCHER_ARGTYPES
        launcher.restype = None
        launcher(self.M, self.N, self.K, self.alpha, ctypes.addressof(self.A), ctypes.addressof(self.B), self.beta,
                 ctypes.addressof(self.C), None)

    def after_call(self) -> dict:
        return {"C": list(self.C)}
