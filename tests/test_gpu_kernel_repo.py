"""The fixture kernel repository (tests/fixtures/kernel_repo, see tests/test_kernel_repo.py) on a
real GPU: each kernel, every configuration, compiled from its files with their host and CUDA
includes in the confined compile step, run and checked against cuBLAS at odd sizes; the kernel
that reads C at beta = 0 verified and said to; the column-major one verified in its layout.

Run on the lent H100 (`gpu` marker); skipped where no CUDA device exists.
"""

import pytest

from core.description.kernel_folder import load_folder
from tests.test_gpu import POLICY, runner  # noqa: F401 (fixture)
from tests.test_kernel_compile import config_id
from tests.test_kernel_repo import REPO
from worker.measure.cases import Case, KernelChoice
from worker.measure.verify import LEAVES_C, READS_C

pytestmark = pytest.mark.gpu

KERNELS = {d.name: d for d in load_folder(REPO)}
CONFIGS = [(name, params) for name, d in KERNELS.items() for params in d.configurations()]


@pytest.mark.parametrize("size", [(1000, 1003, 997), (4096, 4096, 4096), (64, 4096, 1024)],
                         ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize(("name", "params"), CONFIGS, ids=[config_id(n, p) for n, p in CONFIGS])
def test_each_repository_kernel_matches_cublas(runner, name, params, size):  # noqa: F811
    case = Case(0, name, *size, 31, KernelChoice(KERNELS[name], params, "job"))
    out = runner.run_case(case, POLICY)
    assert out.verified, out.error
    assert out.rel_error <= 1e-4 and out.gflops > 0 and out.pct_of_cublas > 0
    assert out.env["c_convention"] == (READS_C if name == "rowwise" else LEAVES_C)
    assert out.env["launch"]["layout"] == KERNELS[name].layout
