"""GEMM forms on the GPU (issue 36): tests/fixtures/forms_repo's kernels (TN with FP16 sums and no
alpha/beta, a strided batch, all column-major with alpha only) verified at odd sizes through a real
worker; each with one deliberate fault (B read in the other layout, a k-tile skipped under FP16
sums, a batch stride off by one) unverified and given no speed; a kernel that reads C and writes D;
and cuBLAS's call in every layout,
precision and batch checked against the FP32 product of the same inputs."""

import itertools
from pathlib import Path

import pytest

from core.description.gemm_form import GemmForm
from core.description.kernel_folder import load_folder
from core.description.precision import Precision
from core.settings import Settings
from tests.conftest import wait_for_job
from tests.test_gpu import runner  # noqa: F401 (fixture)
from worker.measure.cases import Case, TimingPolicy, builtin_case

pytestmark = pytest.mark.gpu

REPO = Path(__file__).parent / "fixtures" / "forms_repo"
SIZES = {"hgemm_tn_half_sum": [[1000, 1003, 997], [256, 256, 4096]],
         "hgemm_tn_half_partials": [[1000, 1003, 997], [256, 256, 4096]],
         "sgemm_batched": [[100, 72, 64, 7], [33, 17, 9, 3]],
         "sgemm_col_alpha": [[1000, 1003, 997]]}
FAULTS = {  # kernel -> (what the fault is, the text it replaces, the text it puts there, size)
    "hgemm_tn_half_sum": [
        ("B read row-major", "#define B_AT(k, n) B[(n) * K + (k)]", "#define B_AT(k, n) B[(k) * N + (n)]",
         [256, 256, 256]),
        ("a 32-deep k-tile skipped", "for (size_t k = 0; k < K; ++k) {",
         "for (size_t k = 0; k < K; ++k) {\n        if (k / 32 == 3) continue;", [256, 256, 1024])],
    "hgemm_tn_half_partials": [
        ("a 32-deep k-tile skipped", "for (size_t k0 = 0; k0 < K; k0 += PIECE) {",
         "for (size_t k0 = 0; k0 < K; k0 += PIECE) {\n        if (k0 / 32 == 3) continue;", [256, 256, 1024])],
    "sgemm_batched": [("batch stride off by one", "A + i * stride_a", "A + i * (stride_a + 1)", [64, 48, 32, 5])],
}


def kernels() -> dict:
    return {d.name: d.model_dump(mode="json") for d in load_folder(REPO)}


def run_job(client, desc: dict, sizes: list, succeeds: bool = True) -> list[dict]:
    posted = client.post("/api/jobs", json={"sources": [desc], "sizes": sizes})
    assert posted.status_code == 202, posted.text
    job = wait_for_job(client, posted.json()["id"], timeout=600)
    if succeeds:  # a job whose every kernel is wrong fails, its results kept
        assert job["status"] == "succeeded", job["error"]
    return job["results"]


def test_each_form_verifies_at_odd_sizes_beside_cublas_in_its_form(gpu_stack):
    for name, desc in kernels().items():
        for r in run_job(gpu_stack, desc, SIZES[name]):
            assert r["verified"], (name, r["m"], r["error"])
            assert r["gflops"] > 0 and r["cublas_gflops"] > 0
            form = r["env"]["form"]
            assert form["key"] == r["form"]
            batch = SIZES[name][[s[:3] for s in SIZES[name]].index([r["m"], r["n"], r["k"]])][3:] or [1]
            assert form["batch"] == batch[0]
            if r["form"] != "rrr":
                assert r["env"]["cublas_rel_error"] < 1e-2, r["env"]
    acc16 = run_job(gpu_stack, kernels()["hgemm_tn_half_sum"], [[256, 256, 4096]])[0]
    assert acc16["form"] == "rcr+ab+acc16" and "CUBLAS_COMPUTE_16F" in " ".join(acc16["env"]["notes"])
    # FP16 partial sums into an FP32 C: checked with FP16 sums' bound, timed beside FP32 compute (no
    # cuBLAS GEMM sums in FP16 and writes FP32)
    partials = run_job(gpu_stack, kernels()["hgemm_tn_half_partials"], [[256, 256, 4096]])[0]
    notes = " ".join(partials["env"]["notes"])
    assert partials["verified"] and partials["form"] == "rcr+ab+acc16", partials["error"]
    assert partials["env"]["precision"]["output"] == "float32" and partials["env"]["precision"]["accumulate"] == "float16"
    assert "CUBLAS_COMPUTE_32F" in notes and "CUBLAS_COMPUTE_16F" not in notes, notes


@pytest.mark.parametrize("name,fault", [(n, f) for n, faults in FAULTS.items() for f in faults],
                         ids=lambda x: x if isinstance(x, str) else x[0])
def test_a_kernel_with_a_fault_of_its_form_is_unverified_and_unranked(gpu_stack, name, fault):
    what, old, new, size = fault
    desc = kernels()[name]
    source = desc["source"]
    assert old in desc["files"][source], what
    desc["files"][source] = desc["files"][source].replace(old, new)
    (r,) = run_job(gpu_stack, desc, [size], succeeds=False)
    assert not r["verified"] and r["gflops"] is None and r["pct_of_cublas"] is None, (what, r)
    assert r["error"].startswith("wrong result"), (what, r["error"])


POLICY = TimingPolicy.from_settings(Settings(GEMMWATCH_CASE_TIME_CAP_S=0.5))


MODES = [("fp32", "fp32", "input"), ("tf32", "fp32", "input"), ("fp16", "fp32", "input"), ("bf16", "fp32", "input"),
         ("fp16", "fp16", "input"), ("fp16", "fp16", "fp32")]


@pytest.mark.parametrize("mode,accumulate,output", MODES)
def test_cublas_in_every_layout_and_batch_computes_the_forms_product(mode, accumulate, output):
    from worker.measure.runner import CupyRunner, Problem
    from worker.measure.verify import rel_error

    dev = CupyRunner().device
    precision = Precision(mode, accumulate=accumulate, output=output)
    for layouts, batch in itertools.product(itertools.product(("row", "column"), repeat=3), (1, 3)):
        form = GemmForm(*layouts, accumulate=accumulate)
        problem = Problem(dev, Case(0, "cublas", 77, 65, 129, 5, None, batch=batch), form, precision)
        c = problem.new_c()
        problem.cublas_call(c)()
        dev.synchronize()
        error = rel_error(dev.xp, problem.read(c), dev.reference(problem.a, problem.b))
        assert error <= precision.default_tolerance(129) if mode not in ("fp32", "tf32") else error <= 2e-3, (
            form.key(batch), mode, error)


@pytest.mark.parametrize("mode,accumulate,output", MODES)
def test_cublaslts_candidates_in_every_layout_compute_the_forms_product(mode, accumulate, output):
    """cuBLAS's best is chosen among these in every form, a strided batch too: each of the first four
    candidates' C checked against the FP32 product, at a size no side of which is a multiple of 8
    (where cuBLASLt offers none, it says so and the default call is the bar: allowed, and counted)."""
    from worker.measure.runner import CupyRunner, Problem
    from worker.measure.verify import rel_error

    dev = CupyRunner().device
    precision = Precision(mode, accumulate=accumulate, output=output)
    offered = 0
    sizes = [(77, 65, 129, 1), (256, 192, 320, 1), (64, 48, 96, 3)]
    for layouts, (*size, batch) in itertools.product(itertools.product(("row", "column"), repeat=3), sizes):
        form = GemmForm(*layouts, accumulate=accumulate)
        problem = Problem(dev, Case(0, "cublas", *size, 5, None, batch=batch), form, precision)
        try:
            gemm = dev.cublas_candidates(problem, 4)
        except Exception as exc:  # cuBLASLt has no algorithm for this shape
            assert "no algorithm" in str(exc) or "cublasStatus_t" in str(exc), (form.key(), exc)
            continue
        assert gemm is not None, form.key()
        offered += 1
        for i in range(len(gemm.candidates)):
            gemm.use(i)
            gemm()
            dev.synchronize()
            error = rel_error(dev.xp, problem.read(gemm.c), dev.reference(problem.a, problem.b))
            bound = precision.default_tolerance(size[2]) if mode not in ("fp32", "tf32") else 2e-3
            assert error <= bound, (form.key(batch), size, mode, i, gemm.plan, error)
    assert offered >= 16, offered  # every form at 256 x 192 x 320 and in the batch at least


@pytest.mark.parametrize("size", [(1000, 1000, 1000), (1023, 1021, 1019), (4096, 4096, 4096)])
def test_the_bf16_wgmma_tn_ladder_kernel_verifies_beside_cublas_tn(size):
    from worker.measure.runner import CupyRunner

    out = CupyRunner().run_case(builtin_case("bf16_wgmma_tn", *size), POLICY)
    assert out.verified, out.error
    assert out.form == "rcr" and "op TN" in out.env["cublas_call"]
    assert out.pct_of_cublas > 1


CD_KERNEL = r'''
extern "C" __global__ void cd_gemm(const float* A, const float* B, const float* C, float* D, float alpha, float beta,
                                   int M, int N, int K) {
    int row = blockIdx.y * blockDim.y + threadIdx.y, col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= M || col >= N) return;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc += A[row * K + k] * B[k * N + col];
    D[row * N + col] = alpha * acc + beta * C[row * N + col];
}
'''


@pytest.mark.parametrize("size", [(1000, 1003, 97), (256, 512, 128)], ids=lambda s: "x".join(map(str, s)))
def test_a_kernel_that_reads_c_and_writes_d_is_verified_in_its_alpha_beta_form(runner, size):  # noqa: F811
    """D = alpha*A*B + beta*C with C and D apart in the kernel's parameters: gemmwatch passes its C for
    both; the result is the alpha-beta form's product, and a kernel that ignores C (beta dropped) is refused."""
    from core.description.kernel_description import KernelDescription
    from worker.measure.cases import KernelChoice

    policy = TimingPolicy.from_settings(Settings(GEMMWATCH_CASE_TIME_CAP_S=0.5))
    base = {"name": "cd_gemm", "files": {"cd.cu": CD_KERNEL}, "source": "cd.cu", "entry": "cd_gemm", "block": [16, 16],
            "grid": {"tile": [16, 16]}, "args": ["A", "B", "C", "D", "alpha", "beta", "M", "N", "K"]}
    out = runner.run_case(Case(0, "cd_gemm", *size, 5, KernelChoice(KernelDescription.model_validate(base), {}, "job")),
                          policy)
    assert out.verified and out.gflops > 0, out.error
    dropped = {**base, "files": {"cd.cu": CD_KERNEL.replace("+ beta * C[row * N + col]", "")}}
    out = runner.run_case(Case(1, "cd_gemm", *size, 5, KernelChoice(KernelDescription.model_validate(dropped), {}, "job")),
                          policy)
    assert not out.verified and "wrong result" in (out.error or ""), out.error
