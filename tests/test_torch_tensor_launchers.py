"""Launchers that take torch::Tensor (xlite-dev/LeetCUDA's `sgemm(a, b, c)`, most repositories PyTorch
builds): with `"build": "torch.utils.cpp_extension"` the file compiles against gemmwatch's stand-in
for torch (worker/compile/torch_stand_in), and each matrix reaches the launcher as a tensor record
(worker/arguments/torch_tensors.py) with the sizes, strides and element type a PyTorch tensor of it
would have.

Real but the GPU, as tests/test_launcher_cases.py: nvcc in the confined compile process, the library's
symbols, the confined launcher process. On the CPU double the fixtures (tests/fixtures/host_launchers/
src/torch_gemm.cu) compute C on the host through their tensors' strides; on the GPU,
tests/test_gpu_launchers.py runs one that launches a kernel.
"""

import ctypes

import numpy
import pytest

from core.description.gemm_form import GemmForm
from tests.test_launcher_cases import HOST, POLICY, built, case, described, needs_confinement, runner  # noqa: F401
from worker.arguments import kernel_args, torch_tensors
from worker.compile import launcher_library

LEETCUDA = "torch::Tensor"  # how the fixture spells its parameters


def record_at(address: int) -> torch_tensors.TensorRecord:
    return torch_tensors.TensorRecord.from_address(address)


# --- the plan and the records -------------------------------------------------------------------

def test_a_tensor_parameter_is_a_matrix_by_value_or_by_reference_and_nothing_else():
    params = [["at::Tensor", None], ["at::Tensor const&", None], ["at::Tensor&", None], ["int", None], ["bool", None]]
    plan = kernel_args.plan("sgemm", ("A", "B", "C", "=3", "=1"), params, "float32", "float32", host=True)
    assert [how for _r, how in plan.passing] == ["tensor", "&tensor", "&tensor", "i32", "b8"]
    with pytest.raises(kernel_args.ArgumentMismatch, match="M is a torch::Tensor here, and a tensor is a matrix's"):
        kernel_args.plan("sgemm", ("A", "B", "M"), params[:3], "float32", "float32", host=True)
    with pytest.raises(kernel_args.ArgumentMismatch, match="the constant 2 is not a bool"):
        kernel_args.plan("sgemm", ("=2",), [["bool", None]], "float32", "float32", host=True)


def test_a_bool_takes_an_integer_expression_nonzero_being_true():
    # LeetCUDA's runner turns `bool swizzle` on where the stride it works out from N is 256 or more
    on = "=1 if N // 2 >= 256 else 0"
    plan = kernel_args.plan("hgemm", ("A", "B", "C", on), [["at::Tensor", None]] * 3 + [["bool", None]],
                            "float16", "float16", host=True)
    assert plan.passing[-1] == (on, "b8")
    assert kernel_args.value("b8", 2048, None) is numpy.True_ and kernel_args.value("b8", 0, None) is numpy.False_
    assert launcher_library._scalar("b8", 2048).value is True and launcher_library._scalar("b8", 0).value is False
    # a float parameter still takes no integer expression
    with pytest.raises(kernel_args.ArgumentMismatch, match="is an integer expression, and the parameter is float"):
        kernel_args.plan("hgemm", ("=N // 2",), [["float", None]], "float16", "float16", host=True)


@pytest.mark.parametrize(("layout", "batch", "sizes", "strides"), [
    ({}, 1, {"A": (5, 7), "B": (7, 3), "C": (5, 3)}, {"A": (7, 1), "B": (3, 1), "C": (3, 1)}),
    # B column-major is a (K, N) tensor with strides (1, K): `randn(N, K).T`
    ({"b": "column"}, 1, {"B": (7, 3)}, {"B": (1, 7)}),
    ({"a": "column", "c": "column"}, 1, {"A": (5, 7), "C": (5, 3)}, {"A": (1, 5), "C": (1, 5)}),
    ({}, 4, {"A": (4, 5, 7), "C": (4, 5, 3)}, {"A": (35, 7, 1), "C": (15, 3, 1)}),
])
def test_each_matrix_reaches_the_launcher_with_the_sizes_and_strides_its_form_gives_it(layout, batch, sizes, strides):
    launch = type("Launch", (), {"form": GemmForm(**layout), "language": "cuda", "tensor_maps": {}, "scope": {},
                                 "args": (), "precision": type("P", (), {"input_type": "bfloat16",
                                                                         "output_type": "float32"})()})()
    named = kernel_args.named_values(launch, 5, 3, 7, "a", "b", "c", 1.0, 0.0, batch)
    plan = kernel_args.ArgPlan((("A", "tensor"), ("B", "&tensor"), ("C", "tensor")), ("", "", ""))
    args = launcher_library.arguments(plan, named, {"a": 0x1000, "b": 0x2000, "c": 0x3000}.__getitem__)
    by_value = {"A": record_at(args.values[0]), "C": record_at(args.values[2]),
                "B": record_at(ctypes.c_void_p.from_address(args.values[1]).value)}  # a reference: the cell's
    for x in sizes:
        rec = by_value[x]
        assert tuple(rec.sizes[:rec.dim]) == sizes[x] and tuple(rec.strides[:rec.dim]) == strides[x], x
    assert [by_value[x].data for x in "ABC"] == [0x1000, 0x2000, 0x3000]
    # PyTorch's own numbers: BFloat16 15, Float 6
    assert [by_value[x].scalar_type for x in "ABC"] == [15, 15, 6]


# --- through the confined process, on the CPU double ---------------------------------------------

@needs_confinement
@pytest.mark.parametrize("name", ["torch_host_gemm", "torch_host_gemm_ref", "torch_host_gemm_stages"])
def test_a_launcher_taking_tensors_is_built_against_the_stand_in_and_verified(runner, name):  # noqa: F811
    out = runner.run_case(case(described(HOST, name)), POLICY)
    assert out.verified and out.error is None and out.rel_error < 1e-6, out.error
    assert out.env["launch"]["params"][:3] == [f"{x}: at::Tensor{'' if name != 'torch_host_gemm_ref' else r}"
                                               for x, r in zip("ABC", (" const&", " const&", "&"))]


@needs_confinement
def test_a_launcher_reads_a_column_major_b_through_its_strides(runner):  # noqa: F811
    desc = described(HOST, "torch_host_gemm", layout={"A": "row", "B": "col", "C": "row"})
    out = runner.run_case(case(desc, size=(40, 24, 56)), POLICY)
    assert out.verified and out.error is None, out.error


@needs_confinement
@pytest.mark.parametrize(("name", "changes", "words"), [
    # LeetCUDA's own check, which prints the options and throws: its message reaches the case's error
    ("torch_host_gemm", {"compute_mode": "bf16"}, "values must be torch::kFloat32"),
    ("torch_host_gemm_ref", {"compute_mode": "bf16"}, "a must be float32, not BFloat16"),
    # the bool reaches the launcher as the bool the args say
    ("torch_host_gemm_stages", {"args": ["A", "B", "C", "=3", "=1"]}, "this fixture does not swizzle"),
    ("torch_host_gemm_stages", {"args": ["A", "B", "C", "=4", "=0"]}, "stages must be 3, got 4"),
    # a tensor the launcher allocates: said, not faked
    ("torch_host_gemm_workspace", {}, "gemmwatch's stand-in for torch cannot allocate a tensor (zeros_like)"),
])
def test_what_the_stand_in_cannot_do_or_the_launcher_refuses_fails_its_case_with_the_reason(
        runner, name, changes, words):  # noqa: F811
    out = runner.run_case(case(described(HOST, name, **changes)), POLICY)
    assert not out.verified and out.gflops is None and words in out.error, out.error
    if "values must be" in words:  # what its check printed first, in the case's record of the output
        assert "Tensor Info:TensorOptions(dtype=BFloat16, device=cuda:0)" in out.env["launcher"]["output"]


# --- a launcher that makes C and returns it ------------------------------------------------------

@needs_confinement
@pytest.mark.parametrize("name", ["torch_host_matmul", "torch_host_matmul_zeros"])
def test_a_launcher_that_makes_c_is_handed_the_cases_c_and_verified(runner, name):  # noqa: F811
    """learn-cuda's binding: `torch::Tensor matmul(a, b)`, C from torch::empty({M, N}, a.options()) (or
    torch::zeros), returned. Its args name no C; the case's C is what that call returns."""
    out = runner.run_case(case(described(HOST, name), size=(70, 33, 65)), POLICY)
    assert out.verified and out.error is None and out.rel_error < 1e-6, out.error


@needs_confinement
def test_a_launcher_that_makes_another_tensor_or_returns_none_is_refused_by_what_it_did(
        runner, shared_kernel_cache):  # noqa: F811
    out = runner.run_case(case(described(HOST, "torch_host_matmul_swapped"), size=(70, 33, 65)), POLICY)
    words = "cannot allocate a tensor (empty of [33, 70] Float) other than C ([70, 33] Float)"
    assert not out.verified and words in out.error, out.error
    # a launcher that returns nothing cannot be the one that made C: refused at its build, by its type
    with pytest.raises(kernel_args.ArgumentMismatch, match="torch_host_matmul_void returns void, and args name no C"):
        built(described(HOST, "torch_host_matmul_void"), shared_kernel_cache)


def test_only_a_torch_built_launcher_may_leave_c_out_of_its_args_and_its_c_is_row_major():
    with pytest.raises(ValueError, match="missing C"):
        described(HOST, "torch_host_matmul", build=None)
    with pytest.raises(ValueError, match='a C the launcher makes .* is a contiguous row-major tensor: C is "row"'):
        described(HOST, "torch_host_matmul", layout={"A": "row", "B": "row", "C": "col"})
    assert described(HOST, "torch_host_matmul").returns_c and not described(HOST, "torch_host_gemm").returns_c
