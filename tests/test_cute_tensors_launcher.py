"""A launcher that takes its matrices as CuTe tensors (andylolu2/simpleGEMM's `simplegemm::gemm<Config>(A,
B, C)`): `"launcher": "gemmwatch::cute_tensors<simplegemm::gemm<Config>>"` names gemmwatch's launcher over
it (worker/compile/launcher_adapters/gemmwatch/cute_tensors.h). gemmwatch makes A (M, K), B (N, K) and
C (M, N) over the case's matrices, in the description's types and layouts, and C++ deduces the repository's
launcher's own template arguments from them, as its main's call does.

Real but the GPU, as tests/test_launcher_cases.py: nvcc builds the library in the confined compile against
the pinned CUTLASS's CuTe, the case runs in its own confined process, and tests/fixtures/host_launchers'
src/cute_gemm.cu computes on the host, through each tensor's layout, for the CPU double. The GPU's run:
tests/test_gpu_launchers.py.
"""

import pytest
from pydantic import ValidationError

from core.description.kernel import resolve
from tests.fake_gpu import H100_FIGURES
from tests.test_cutlass_library import needs_nvcc
from tests.test_launcher_cases import HOST, POLICY, built, case, described, needs_confinement, runner  # noqa: F401
from worker.compile import compile_sandbox, header_libraries
from worker.compile.compiled import CompileError

LAUNCHER = "gemmwatch::cute_tensors<hostcute::gemm<hostcute::Config>>"


def test_the_launcher_is_named_with_the_repositorys_own_and_takes_the_sizes_then_the_matrices():
    desc = described(HOST, "host_cute_gemm")
    assert desc.launcher == LAUNCHER and desc.libraries == ["cutlass"] and desc.args == ["M", "N", "K", "A", "B", "C"]
    with pytest.raises(ValidationError, match=r'gemmwatch::cute_tensors is written against cutlass: add "libraries"'):
        described(HOST, "host_cute_gemm", libraries=[])
    with pytest.raises(ValidationError, match=r"args: gemmwatch::cute_tensors takes \['M', 'N', 'K', 'A', 'B', 'C'\].*"
                                              r"not \['A', 'B', 'C'\]"):
        described(HOST, "host_cute_gemm", args=["A", "B", "C"])
    with pytest.raises(ValidationError, match="takes no parameter types"):
        described(HOST, "host_cute_gemm", launcher=LAUNCHER + "(float*, float*, float*)")
    with pytest.raises(ValidationError, match="launcher"):  # pasted into the unit: no code gets in
        described(HOST, "host_cute_gemm", launcher="gemmwatch::cute_tensors<f>; int x = 1; //")


@pytest.mark.parametrize(("layout", "compute_mode", "output", "types"), [
    ({"A": "row", "B": "col", "C": "row"}, "fp32", "input",
     "float,float,float,cute::GenRowMajor,cute::GenRowMajor,cute::GenRowMajor"),
    ({"A": "col", "B": "row", "C": "col"}, "fp16", "input",
     "cutlass::half_t,cutlass::half_t,cutlass::half_t,cute::GenColMajor,cute::GenColMajor,cute::GenColMajor"),
    ({"A": "row", "B": "row", "C": "row"}, "bf16", "fp32",
     "cutlass::bfloat16_t,cutlass::bfloat16_t,float,cute::GenRowMajor,cute::GenColMajor,cute::GenRowMajor"),
])
def test_the_tensors_take_the_descriptions_types_and_b_is_n_by_k(layout, compute_mode, output, types):
    """B is (N, K) in CuTe's convention: a K x N B stored by columns is that tensor's rows."""
    desc = described(HOST, "host_cute_gemm", layout=layout, compute_mode=compute_mode, output=output)
    assert ",".join(header_libraries.cute_tensor_types(resolve(desc, {}, H100_FIGURES, "job")).values()) == types


def test_the_unit_writes_the_call_so_cpp_deduces_the_launchers_template_arguments():
    address, before = compile_sandbox.launcher_address(LAUNCHER)
    assert address == "&gemmwatch::cute_tensors_as_described<gemmwatch_cute_launch>::run"
    assert "hostcute::gemm<hostcute::Config>(tensors...);" in before and "struct gemmwatch_cute_launch" in before


@needs_confinement
@pytest.mark.parametrize("name", ["host_cute_gemm", "host_cute_gemm_b_rows"])
def test_the_repositorys_launcher_gets_the_tensors_in_the_descriptions_layout_and_is_verified(runner, name):  # noqa: F811
    """The fixture computes through each tensor's own layout: handed a tensor in another order than the
    matrix lies in memory (B's, above, not turned), it reads the wrong elements and is refused."""
    out = runner.run_case(case(described(HOST, name)), POLICY)
    assert out.verified and out.error is None and out.rel_error < 1e-6, out.error
    assert out.env["launch"]["params"] == ["M: int", "N: int", "K: int", "A: float*", "B: float*", "C: float*"]
    assert out.env["launch"]["launcher"] == LAUNCHER


@needs_nvcc
@needs_confinement
def test_a_launcher_that_cannot_take_the_tensors_is_refused_at_its_build_in_nvccs_words(shared_kernel_cache):
    desc = described(HOST, "host_cute_gemm", launcher="gemmwatch::cute_tensors<hostcute::Config>")
    with pytest.raises(CompileError) as refused:
        built(desc, shared_kernel_cache)
    said = str(refused.value)
    assert "hostcute::Config" in said and "error" in said, said


@needs_nvcc
@needs_confinement
@pytest.mark.parametrize(("name", "element"), [("cute_tensors_sgemm", "float"), ("cute_tensors_hgemm", "cutlass::half_t")])
def test_a_gpu_launcher_over_cute_tensors_builds_with_the_descriptions_element_type(shared_kernel_cache, name, element):
    """tests/fixtures/cutlass_repo's, which tests/test_gpu_launchers.py runs on the GPU: a kernel that takes the
    tensors by value, built for FP32 and for FP16 (half_t) from the same source."""
    from tests.test_cutlass_library import described as cutlass_kernel

    library = built(cutlass_kernel(name), shared_kernel_cache)
    assert library.plan.describe() == ["M: int", "N: int", "K: int", *(f"{x}: {element}*" for x in "ABC")]
