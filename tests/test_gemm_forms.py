"""GEMM forms (issue 36) through the product's runner on the CPU double: each operand's layout, the
epilogue, FP16 sums, a batch. The double reads a kernel's A and B from their memory as its form
(or a wrong-kernel marker) says and carries cuBLAS's call out from its transposes and leading
dimensions, so the verdicts below come from worker/measure/runner.py and worker/measure/verify.py judging what a
GPU would give: a kernel right in its own form is verified, the same kernel read in another form
is not, and cuBLAS's call in every form is checked against the reference before it is timed."""

import itertools

import pytest
from pydantic import ValidationError

from core.description import gemm_form
from core.description.gemm_form import GemmForm, cublas_gemm, label
from core.description.kernel_description import KernelDescription
from core.description.precision import Precision, fp16_accumulate_tolerance
from core.settings import Settings
from tests.fake_gpu import CpuRunner
from worker.measure.cases import Case, KernelChoice, TimingPolicy
from worker.measure.verify import WRITE_ONLY

POLICY = TimingPolicy.from_settings(Settings(GEMMWATCH_CASE_TIME_CAP_S=0.3, GEMMWATCH_MIN_TIME_S=0))
SOURCE = 'extern "C" __global__ void k() {}\n'


def kernel(layout="row", markers: dict | None = None, **fields) -> KernelDescription:
    text = "".join(f"#define {name} {value}\n" for name, value in (markers or {}).items()) + SOURCE
    return KernelDescription(**{"name": "formed", "files": {"k.cu": text}, "source": "k.cu", "entry": "k",
                                "block": [16, 16], "grid": {"tile": [16, 16]}, "layout": layout, **fields})


def run(desc: KernelDescription, m=48, n=40, k=64, batch=1, seed=3):
    # A built-in's origin: the double takes its parameters from the description, compiling nothing.
    return CpuRunner().run_case(Case(0, desc.name, m, n, k, seed, KernelChoice(desc, {}, "builtin"), batch=batch),
                                POLICY)


LAYOUTS = list(itertools.product(("row", "col"), repeat=3))


@pytest.mark.parametrize("a,b,c", LAYOUTS)
def test_a_kernel_right_in_its_own_layouts_is_verified_beside_cublas_in_the_same_form(a, b, c):
    out = run(kernel({"A": a, "B": b, "C": c}))
    assert out.verified, out.error
    assert out.rel_error < 1e-6
    assert out.form == f"{a[0]}{b[0]}{c[0]}"
    assert out.env["form"]["layout"] == {x: "column" if lay == "col" else "row" for x, lay in zip("ABC", (a, b, c))}
    if (a, b, c) != ("row", "row", "row"):  # the default form keeps the calls its figures were measured with
        assert "op " in out.env["cublas_call"] and out.env["cublas_rel_error"] < 1e-6


@pytest.mark.parametrize("b,read_as", [("col", 1), ("row", 2)])
def test_b_read_in_the_other_layout_is_a_wrong_result_and_gets_no_speed(b, read_as):
    out = run(kernel({"A": "row", "B": b, "C": "row"}, {"FAKE_GPU_READS_B_AS": read_as}))
    assert not out.verified and out.gflops is None and out.error.startswith("wrong result: relative error")
    assert out.rel_error > 0.1


def test_a_cublas_call_of_another_product_is_caught_before_any_ratio(monkeypatch):
    """The runner checks the baseline's C: a plan with a wrong transpose gives no ratio, and the
    kernel, right by its own check, keeps its verdict and its speed (cuBLAS's disposition is its own)."""
    def swapped(form, m, n, k):
        plan = cublas_gemm(form, m, n, k)
        return type(plan)(**{**plan.__dict__, "transa": "N" if plan.transa == "T" else "T"})

    right = run(kernel({"A": "row", "B": "col", "C": "row"}), m=32, n=32, k=32)
    assert right.env["cublas_status"] == "passed" and right.pct_of_cublas is not None
    monkeypatch.setattr("tests.fake_gpu.cublas_gemm", swapped)
    out = run(kernel({"A": "row", "B": "col", "C": "row"}), m=32, n=32, k=32)
    assert out.verified and out.error is None and out.gflops
    assert out.as_row()["status"] == "passed"
    assert out.pct_of_cublas is None and out.cublas_gflops is None and out.cublas_median_ms is None
    assert out.env["cublas_status"] == "incorrect"
    assert "cuBLAS baseline of form rcr is wrong" in out.env["cublas_error"]
    # cuBLAS alone (a batch, so its form's call is checked): the result is cuBLAS's own, and wrong.
    alone = CpuRunner().run_case(Case(0, "cublas", 16, 16, 16, 3, None, batch=3), POLICY)
    assert not alone.verified and alone.status == "incorrect" and alone.gflops is None
    assert "cuBLAS baseline of form" in alone.error


@pytest.mark.parametrize("a,b,c", [("row", "row", "row"), ("row", "col", "row"), ("col", "col", "col")])
def test_a_batch_is_verified_and_its_flops_count_every_matrix(a, b, c):
    desc = kernel({"A": a, "B": b, "C": c}, args=["M", "N", "K", "alpha", "A", "B", "beta", "C", "batch",
                                                   "stride_a", "stride_b", "stride_c"])
    out = run(desc, m=24, n=20, k=32, batch=5)
    assert out.verified, out.error
    assert out.form.endswith("+batch5") and out.env["form"]["batch"] == 5
    assert out.gflops == pytest.approx(2 * 24 * 20 * 32 * 5 / (out.median_ms * 1e-3) / 1e9)
    assert out.env["launch"]["grid"][2] == 5  # one matrix per grid z


def test_a_batch_stride_off_by_one_is_a_wrong_result():
    out = run(kernel("row", {"FAKE_GPU_BATCH_STRIDE_OFF": 1}), m=24, n=20, k=32, batch=4)
    assert not out.verified and out.error.startswith("wrong result")


FP16_SUMS = dict(compute_mode="fp16", accumulate="fp16", args=["A", "B", "C", "M", "N", "K"],
                 layout={"A": "row", "B": "col", "C": "row"})


@pytest.mark.parametrize("k", [256, 1024, 4096])
def test_fp16_sums_pass_their_bound_and_a_skipped_k_tile_does_not(k):
    right = run(kernel(**FP16_SUMS), m=64, n=64, k=k)
    assert right.verified, right.error
    assert right.form == "rcr+ab+acc16" and right.env["precision"]["accumulate"] == "float16"
    # the bound is not loose by a mile either: FP16 sums really do err more than FP32 ones
    assert 1e-5 < right.rel_error < fp16_accumulate_tolerance(k)
    wrong = run(kernel(markers={"FAKE_GPU_SKIP_K_TILE": 3}, **FP16_SUMS), m=64, n=64, k=k)
    assert not wrong.verified and wrong.error.startswith("wrong result: relative error")


def test_fp16_sums_writing_an_fp32_c_are_checked_with_fp16_sums_bound():
    """FP16 partial sums added into an FP32 C (spatters/mma-matmul's kernels 3.2-3.4): FP16 sums'
    bound, an FP32 C, the FP16-sum form; the same kernel judged by FP32 sums' bound would be wrong
    by construction, and a skipped k-tile is still wrong under FP16 sums' bound."""
    fields = {**FP16_SUMS, "output": "fp32"}
    desc = kernel(**fields)
    assert desc.precision.output_type == "float32" and desc.precision.fp16_accumulate
    assert not desc.precision.baseline_fp16_sums and kernel(**FP16_SUMS).precision.baseline_fp16_sums
    assert desc.precision.default_tolerance(4096) == fp16_accumulate_tolerance(4096)
    right = run(desc, m=64, n=64, k=1024)
    assert right.verified, right.error
    assert right.form == "rcr+ab+acc16" and right.env["precision"] == {
        "input": "float16", "accumulate": "float16", "output": "float32"}
    # FP16 sums err past FP32 sums' bound: only the FP16-sum description verifies this kernel
    assert right.rel_error > Precision("fp16", output="fp32").default_tolerance(1024)
    wrong = run(kernel(markers={"FAKE_GPU_SKIP_K_TILE": 3}, **fields), m=64, n=64, k=1024)
    assert not wrong.verified and wrong.error.startswith("wrong result: relative error")


def test_the_fp16_bound_is_the_derived_one():
    """2 u16 sqrt(K) + 2 u16 (core/description/precision.py): a mutated formula moves these figures."""
    assert fp16_accumulate_tolerance(4096) == pytest.approx(2 * 2**-11 * 64 + 2 * 2**-11)
    assert Precision("fp16", accumulate="fp16").default_tolerance(1024) == pytest.approx(2**-11 * 66)
    assert fp16_accumulate_tolerance(4096) < (32 / 4096) ** 0.5  # a dropped 32-deep slab stays outside it


def test_an_ab_only_kernel_that_reads_c_is_wrong_not_a_convention():
    right = run(kernel(**FP16_SUMS))
    assert right.verified and right.env["c_convention"] == WRITE_ONLY
    fields = {**FP16_SUMS, "args": ["A", "B", "C", "M", "N", "K", "alpha", "beta"]}
    # a kernel that adds C where its form says C is only written: C's NaN spreads into its result
    reads = run(kernel(markers={"FAKE_GPU_READS_C": 1}, **{**fields, "args": ["A", "B", "C", "M", "N", "K"]}))
    assert right.verified and not reads.verified and "NaN" in reads.error


def test_a_kernel_that_adds_into_c_is_right_only_where_c_is_zeroed_before_each_call():
    """A split-K kernel adds its pieces into C, whose own caller zeroes it first (torch.zeros): with
    c_starts_zero the runner does too, before every call, checked ones and timed ones; without it the
    same kernel adds onto what C held (the check's NaN) and is wrong."""
    adds = {"markers": {"FAKE_GPU_ADDS_INTO_C": 1}, "args": ["A", "B", "C", "M", "N", "K"]}
    zeroed = run(kernel(c_starts_zero=True, **adds))
    assert zeroed.verified and zeroed.env["launch"]["c_starts_zero"] is True, zeroed.error
    assert zeroed.gflops > 0
    assert not run(kernel(**adds)).verified


def test_an_alpha_only_kernel_is_checked_at_alpha_075():
    out = run(kernel(args=["M", "N", "K", "alpha", "A", "B", "C"]))
    assert out.verified and out.form == "rrr+alpha" and out.env["c_convention"] == WRITE_ONLY


def test_an_fp8_kernel_without_alpha_gets_unscaled_inputs_and_is_checked(monkeypatch):
    """C = A·B in FP8 (Triton's persistent tutorial): no alpha to fold the per-tensor scales into, so
    A and B are drawn unscaled and cuBLASLt gets scales of 1; a kernel that applied a scale anyway
    would be off by 2^16."""
    desc = kernel({"A": "row", "B": "col", "C": "row"}, compute_mode="fp8", args=["M", "N", "K", "A", "B", "C"])
    assert desc.form.key() == "rcr+ab" and desc.precision.tensor_scale == 1.0
    assert desc.precision.describe()["scale_a"] == 1.0
    assert kernel({"A": "row", "B": "col", "C": "row"}, compute_mode="fp8").precision.tensor_scale == 2.0**-8
    monkeypatch.setenv("FAKE_GPU_COMPUTE_CAPABILITY", "9.0")
    out = run(desc)
    assert out.verified, out.error


def test_descriptions_that_do_not_fit_their_form_are_refused_with_why():
    with pytest.raises(ValidationError, match="epilogue alpha_beta takes alpha and beta"):
        kernel(epilogue="alpha_beta", args=["A", "B", "C", "M", "N", "K"])
    with pytest.raises(ValidationError, match='accumulate "fp16" is for fp16 kernels'):
        kernel(compute_mode="bf16", accumulate="fp16")
    # FP8 in the two forms its cuBLASLt baseline takes (rrr, and TN: rcr), no other
    assert kernel({"A": "row", "B": "col", "C": "row"}, compute_mode="fp8").form.key() == "rcr"
    for layout in ({"A": "col", "B": "col", "C": "row"}, {"A": "row", "B": "col", "C": "col"}, "column"):
        with pytest.raises(ValidationError, match="fp8 kernels take A and C row-major"):
            kernel(layout, compute_mode="fp8")
    with pytest.raises(ValidationError, match="this one is rcr[+]alpha"):
        kernel({"A": "row", "B": "col", "C": "row"}, compute_mode="fp8", args=["M", "N", "K", "alpha", "A", "B", "C"])
    # a spelling that once got past: the form's key says nothing of a batch, so a batched FP8
    # kernel passed as "rcr" and failed only on the GPU, at its cuBLAS call
    with pytest.raises(ValidationError, match="fp8 kernels multiply one matrix a call"):
        kernel({"A": "row", "B": "col", "C": "row"}, compute_mode="fp8",
               args=["M", "N", "K", "alpha", "A", "B", "beta", "C", "batch", "stride_a", "stride_b", "stride_c"])
    with pytest.raises(ValidationError, match="args take beta but not alpha"):
        kernel(args=["M", "N", "K", "A", "B", "beta", "C"])
    assert kernel({"A": "row", "B": "column", "C": "row"}).form == kernel({"B": "col"}).form == GemmForm(b="column")


def test_form_keys_and_labels():
    assert GemmForm().key() == gemm_form.DEFAULT_KEY == "rrr"
    assert GemmForm("row", "column", "row", "ab_only", "fp16").key(32) == "rcr+ab+acc16+batch32"
    assert label("rcr+ab+acc16+batch32") == "A row, B col, C row · C = A·B · FP16 accumulate · batch 32"
    assert label("ccc+alpha") == "A col, B col, C col · C = alpha·A·B"


@pytest.mark.parametrize("a,b,c", [("row", "column", "row"), ("row", "column", "column")])
def test_the_cublas_call_for_tn_is_the_one_cuda_hgemm_makes(a, b, c):
    """cuda_hgemm's own cublasTensorOp: cublasGemmEx(OP_T, OP_N, N, M, K, B, ld K, A, ld K, C, ld N)
    for row-major A, column-major B, row-major C; and its mirror for column-major C."""
    plan = cublas_gemm(GemmForm(a, b, c), 100, 200, 300)
    if c == "row":
        assert (plan.transa, plan.transb, plan.m, plan.n, plan.k) == ("T", "N", 200, 100, 300)
        assert (plan.first, plan.lda, plan.second, plan.ldb, plan.ldc) == ("B", 300, "A", 300, 200)
    else:
        assert (plan.transa, plan.transb, plan.m, plan.n, plan.k) == ("T", "N", 100, 200, 300)
        assert (plan.first, plan.lda, plan.second, plan.ldb, plan.ldc) == ("A", 300, "B", 300, 100)


FORMS_REPO = __import__("pathlib").Path(__file__).parent / "fixtures" / "forms_repo"


@pytest.mark.parametrize("name,m,n,k,batch", [("hgemm_tn_half_sum", 100, 103, 97, 1),
                                              ("hgemm_tn_half_partials", 100, 103, 97, 1),
                                              ("sgemm_batched", 40, 24, 16, 3), ("sgemm_col_alpha", 50, 30, 70, 1)])
def test_the_forms_fixture_compiles_as_a_job_and_verifies_on_the_double(name, m, n, k, batch):
    """The same kernels the GPU test runs (tests/test_gpu_forms.py), compiled by NVRTC as a job's are,
    their parameter types read from the binary (size_t sizes, long long strides)."""
    from core.description.kernel_folder import load_folder

    desc = next(d for d in load_folder(FORMS_REPO) if d.name == name)
    out = CpuRunner().run_case(Case(0, name, m, n, k, 9, KernelChoice(desc, {}, "job"), batch=batch), POLICY)
    assert out.verified, out.error
    assert out.form == desc.form.key(batch)
    params = out.env["launch"]["params"]
    if name == "hgemm_tn_half_sum":
        assert params[3:] == ["M: unsigned long", "N: unsigned long", "K: unsigned long"]
    if name == "sgemm_batched":
        assert params[-3:] == ["stride_a: long long", "stride_b: long long", "stride_c: long long"]


def test_cublass_best_is_chosen_in_every_form_each_on_its_own(tmp_path, monkeypatch):
    """cuBLASLt's candidates are timed in each form (fast.cu's rcc, a ccc kernel, TN as the default
    form, a strided batch), each choice cached under its own form (the candidates are different calls)."""
    monkeypatch.setenv("GEMMWATCH_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("FAKE_GPU_CUBLAS_CANDIDATES", "1.04,0.90")
    runner = CpuRunner()
    outs = {}
    for a, b, c in LAYOUTS:
        desc = kernel({"A": a, "B": b, "C": c})
        outs[desc.form.key()] = runner.run_case(Case(0, desc.name, 48, 40, 64, 3, KernelChoice(desc, {}, "builtin")),
                                                POLICY)
    assert len(outs) == 8
    for key, out in outs.items():
        best = out.env["cublas_best"]
        assert out.verified and best["against"] == "best" and best["best"]["index"] == 1, (key, best)
        assert not best["cached"], key  # each form's choice is its own, not another form's of the same shape
    single = runner.run_case(Case(0, "formed", 16, 16, 16, 3, KernelChoice(kernel("row"), {}, "builtin")), POLICY)
    assert single.env["cublas_best"]["against"] == "best"
    # the same shape in a batch: cuBLASLt's candidates are other calls, so its choice is its own too
    desc = kernel("row", args=["M", "N", "K", "alpha", "A", "B", "beta", "C", "batch"])
    batched = runner.run_case(Case(0, desc.name, 16, 16, 16, 3, KernelChoice(desc, {}, "builtin"), batch=3), POLICY)
    best = batched.env["cublas_best"]
    assert batched.verified and best["against"] == "best" and not best["cached"], best
