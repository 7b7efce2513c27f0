"""Issue 50 on the GPU: a Triton kernel (tests/fixtures/triton_repo), compiled ahead of time in the
confined compile process, loaded and launched by the runner with Triton's block and shared memory,
verified against cuBLAS in its precision and timed beside it. Skipped where no CUDA device exists."""

import pytest

from core.settings import Settings
from tests.test_triton_kernels import described
from worker.measure.cases import Case, KernelChoice, TimingPolicy

pytestmark = pytest.mark.gpu
pytest.importorskip("triton")
POLICY = TimingPolicy.from_settings(Settings(GEMMWATCH_CASE_TIME_CAP_S=1.0))


@pytest.fixture(scope="module")
def runner():
    from worker.measure.runner import CupyRunner

    return CupyRunner()


@pytest.mark.parametrize("size", [(1000, 1003, 997), (4096, 4096, 4096), (64, 4096, 1024)],
                         ids=lambda s: "x".join(map(str, s)))
def test_a_triton_kernel_is_verified_and_timed(runner, size):
    out = runner.run_case(Case(0, "triton_matmul_fp16", *size, 7, KernelChoice(described(), {}, "job")), POLICY)
    assert out.verified, out.error
    assert out.gflops > 0 and out.pct_of_cublas > 0
    assert out.env["resources"]["compiler"].startswith("Triton ")


def test_a_triton_kernel_that_skips_a_k_block_is_refused(runner):
    wrong = described(files={"matmul.py": (described().files["matmul.py"]
                                           .replace("for k0 in range(0, K, BLOCK_K):", "for k0 in range(BLOCK_K, K, BLOCK_K):"))})
    out = runner.run_case(Case(0, "triton_matmul_fp16", 512, 512, 512, 7, KernelChoice(wrong, {}, "job")), POLICY)
    assert not out.verified and out.gflops is None
    assert "relative error" in out.error, out.error


# -- @triton.autotune, a file as a repository has it (tests/fixtures/triton_script_repo) ---------
@pytest.mark.parametrize("size", [(1000, 1003, 997), (2048, 2048, 2048)], ids=lambda s: "x".join(map(str, s)))
def test_an_autotuned_kernel_chooses_its_configuration_and_is_verified(runner, size):
    from tests.test_triton_autotune import described as autotuned

    first = runner.run_case(Case(0, "triton_autotuned_fp16", *size, 7, KernelChoice(autotuned(), {}, "job")), POLICY)
    assert first.verified, first.error
    chosen = first.env["triton"]["config"]
    assert first.env["launch"]["defines"]["BLOCK_M"] == chosen["kwargs"]["BLOCK_M"]
    assert first.env["launch"]["block"][0] == 32 * chosen["num_warps"]
    # The same bucket again: the kept choice, nothing timed.
    again = runner.run_case(Case(0, "triton_autotuned_fp16", *size, 8, KernelChoice(autotuned(), {}, "job")), POLICY)
    assert again.verified and again.env["triton"]["chosen_by"] == "an earlier autotune on this worker"
    assert again.env["triton"]["config"] == chosen


# -- @triton.heuristics, computed per case (tests/fixtures/triton_heuristics_repo) -----------------
@pytest.mark.parametrize("size", [(1000, 1003, 997), (2048, 2048, 2048)], ids=lambda s: "x".join(map(str, s)))
def test_a_kernel_under_heuristics_is_verified_at_even_and_odd_k(runner, size):
    from tests.test_triton_heuristics import described as with_heuristics

    out = runner.run_case(Case(0, "triton_heuristics_fp16", *size, 7, KernelChoice(with_heuristics(), {}, "job")),
                          POLICY)
    assert out.verified, out.error
    even = size[2] % out.env["launch"]["defines"]["BLOCK_K"] == 0
    assert out.env["launch"]["heuristics"] == {"EVEN_K": even, "MASK_K": not even}


# -- a kernel file in a package, its types as tl.constexpr (tests/fixtures/triton_package_repo) --------
@pytest.mark.parametrize("words", [{}, {"acc_dtype": "tl.float32", "AB_DTYPE": None, "input_precision": None}],
                         ids=["as_described", "no_conversion"])
@pytest.mark.parametrize("size", [(1000, 1003, 997), (2048, 2048, 2048)], ids=lambda s: "x".join(map(str, s)))
def test_a_kernel_of_a_package_with_type_constexprs_is_verified(runner, size, words):
    from tests.test_triton_package import described as in_package

    desc = in_package(**({"triton": {"string_constexprs": words}} if words else {}))
    out = runner.run_case(Case(0, "package_matmul", *size, 7, KernelChoice(desc, {}, "job")), POLICY)
    assert out.verified, out.error
    assert out.env["triton"]["config"]["kwargs"]["BLOCK_M"] in (64, 128)  # one of tile_sizes.py's CONFIGS


def test_a_named_configuration_is_the_one_run(runner):
    from tests.test_triton_autotune import described as autotuned

    out = runner.run_case(Case(0, "triton_autotuned_fp16", 512, 512, 512, 7,
                               KernelChoice(autotuned(triton={"config": 2}), {}, "job")), POLICY)
    assert out.verified, out.error
    assert out.env["triton"]["config"]["index"] == 2 and out.env["launch"]["defines"]["BLOCK_M"] == 32
    assert out.env["launch"]["block"][0] == 64



def test_another_tool_launches_the_configuration_pinned_or_kept(runner):
    """runner.calls (nvbench's and the studies' way in) runs an autotuned kernel in the configuration
    its description pins; with none pinned and none kept for the bucket it says so, tuning nothing."""
    import cupy as cp

    from tests.test_triton_autotune import described as autotuned

    run_variant, _ = runner.calls(Case(0, "triton_autotuned_fp16", 512, 512, 512, 7,
                                       KernelChoice(autotuned(triton={"config": 2}), {}, "job")))
    run_variant()
    cp.cuda.Device().synchronize()
    with pytest.raises(ValueError, match="no @triton.autotune choice"):
        runner.calls(Case(0, "triton_autotuned_fp16", 100, 100, 100, 7, KernelChoice(autotuned(), {}, "job")))


# -- a kernel given by its repository's Python wrapper (tests/fixtures/triton_wrapper_repo) ------------
@pytest.mark.parametrize("wrapper", ["matmul", "persistent_matmul"])
@pytest.mark.parametrize("size", [(1000, 1003, 997), (4096, 4096, 4096)], ids=lambda s: "x".join(map(str, s)))
def test_a_wrapped_kernel_is_verified_and_timed_on_the_gpu(runner, wrapper, size):
    from tests.test_triton_wrapper import wrapped

    out = runner.run_case(Case(0, f"wrapped_{wrapper}", *size, 7, KernelChoice(wrapped(wrapper), {}, "job")), POLICY)
    assert out.verified and out.gflops > 0, out.error
    assert out.env["launch"]["entry"] == "scaled_matmul"


@pytest.mark.parametrize("size", [(1000, 1003, 997), (4096, 4096, 4096)], ids=lambda s: "x".join(map(str, s)))
def test_an_fp8_split_k_wrapper_writing_fp16_is_verified_beside_cublaslt_fp16(runner, size):
    """FP8 inference's wrapper shape (float scales, an FP16 C zeroed and added into atomically), as
    pytorch-labs/applied-ai writes it: verified against the product and timed beside cuBLASLt's FP8
    GEMM writing FP16; the same kernel with each part's first slab left out is refused."""
    from tests.test_triton_wrapper import REPO, wrapped

    desc = wrapped("split_k_fp8", compute_mode="fp8", output="fp16")
    out = runner.run_case(Case(0, desc.name, *size, 7, KernelChoice(desc, {}, "job")), POLICY)
    assert out.verified and out.gflops > 0, out.error
    assert out.env["precision"]["output"] == "float16" and out.env["cublas_plan"]["c_type"] == "CUDA_R_16F"
    short = wrapped("split_k_fp8", compute_mode="fp8", output="fp16", files={"wrappers.py": (
        REPO / "wrappers.py").read_text().replace("for k0 in range(part * BLOCK_K, K,", "for k0 in range((part + 4) * BLOCK_K, K,")})
    out = runner.run_case(Case(0, desc.name, *size, 7, KernelChoice(short, {}, "job")), POLICY)
    assert not out.verified and "relative error" in (out.error or ""), out.error


@pytest.mark.parametrize("call", ["tiled_matmul(a, b, 128, 64, 32, torch.float16, False, 4, 8)",
                                  "Matmul(mode='wide')(a, b, block_k=64)"])
@pytest.mark.parametrize("size", [(1000, 1003, 997), (8, 4096, 1024)], ids=lambda s: "x".join(map(str, s)))
def test_a_wrapper_named_by_its_call_is_verified_on_the_gpu(runner, call, size):
    """A wrapper that wants its tiles and launch options (alfin3/triton-kernel-opt's shape), named by the call
    made at home: verified at an awkward size and a skinny one; the same call with relu=True, whose C is
    not A·B, is refused as wrong."""
    from tests.test_triton_wrapper import wrapped

    out = runner.run_case(Case(0, "call", *size, 7, KernelChoice(wrapped(call), {}, "job")), POLICY)
    assert out.verified and out.gflops > 0, out.error
    if call.startswith("tiled_matmul"):
        assert out.env["launch"]["defines"]["BLOCK_M"] == 128
        clipped = wrapped(call.replace("False", "True"))
        out = runner.run_case(Case(1, "clipped", *size, 7, KernelChoice(clipped, {}, "job")), POLICY)
        assert not out.verified and "wrong result" in (out.error or ""), out.error


@pytest.mark.parametrize("size", [(1000, 1003, 997), (4096, 4096, 4096)], ids=lambda s: "x".join(map(str, s)))
def test_a_lock_per_tile_split_k_and_its_workspace_are_verified(runner, size):
    """alfin3/triton-kernel-opt's lock-per-tile split-K shape: its locks are a workspace zeroed before each call,
    C zeroed too; verified at an awkward size and 4096 cubed. Each part starting one slab late is refused."""
    from tests.test_triton_wrapper import REPO, wrapped

    desc = wrapped("locked_split_k")
    out = runner.run_case(Case(0, desc.name, *size, 7, KernelChoice(desc, {}, "job")), POLICY)
    assert out.verified and out.gflops > 0, out.error
    assert out.env["launch"]["c_starts_zero"] is True and "zeros(int32" in out.env["launch"]["params"][3]
    short = wrapped("locked_split_k", files={"wrappers.py": (REPO / "wrappers.py").read_text().replace(
        "for k0 in range(part * BLOCK_K, K, BLOCK_K * SPLIT_K):", "for k0 in range((part + 4) * BLOCK_K, K, BLOCK_K * SPLIT_K):")})
    out = runner.run_case(Case(1, desc.name, *size, 7, KernelChoice(short, {}, "job")), POLICY)
    assert not out.verified and "relative error" in (out.error or ""), out.error


# -- a configuration's pre_hook read as zeroing C (tests/fixtures/triton_pre_hook_repo) --------------
@pytest.mark.parametrize("size", [(1000, 1003, 997), (4096, 4096, 4096), (128, 4096, 8192)],
                         ids=lambda s: "x".join(map(str, s)))
def test_split_k_configurations_whose_hook_zeroes_c_run_and_are_verified(runner, size):
    """triton-lang/kernels' split-K shape: every configuration's hook is init_to_zero("C"); both are timed, C zeroed
    before each call, and the chosen one verified. The body without its zeroing (one split, C as the runner
    fills it), and the configurations with each part starting one slab late, are refused."""
    from tests.test_triton_pre_hook import REPO, described as split_k

    desc = split_k("split_k_zeroed")
    out = runner.run_case(Case(0, desc.name, *size, 7, KernelChoice(desc, {}, "job")), POLICY)
    assert out.verified and out.gflops > 0, out.error
    assert out.env["launch"]["c_starts_zero"] is True
    assert [t["index"] for t in out.env["triton"]["timed"] if "median_ms" in t] == [0, 1], out.env["triton"]
    unzeroed = split_k("split_k_body", defines={"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "SPLIT_K": 2})
    out = runner.run_case(Case(1, unzeroed.name, *size, 7, KernelChoice(unzeroed, {}, "job")), POLICY)
    assert not out.verified and out.error, out.error
    late = split_k("split_k_zeroed", files={"split_k.py": (REPO / "split_k.py").read_text().replace(
        "range(pid_k * BLOCK_K, K, BLOCK_K * SPLIT_K)", "range((pid_k + SPLIT_K) * BLOCK_K, K, BLOCK_K * SPLIT_K)")})
    out = runner.run_case(Case(2, late.name, *size, 7, KernelChoice(late, {}, "job")), POLICY)
    assert not out.verified and "relative error" in (out.error or ""), out.error


def test_a_word_constexpr_reaches_the_gpu_kernel(runner):
    """The tutorial's ACTIVATION: "" (as the wrapper passes it) is the plain GEMM, verified; the same
    kernel with the word "relu" set over it clips C's negative elements, and the check says so."""
    from tests.test_triton_wrapper import wrapped

    size = (1000, 1003, 997)
    plain = wrapped("matmul_with_activation")
    out = runner.run_case(Case(0, plain.name, *size, 7, KernelChoice(plain, {}, "job")), POLICY)
    assert out.verified and out.gflops > 0, out.error
    assert out.env["launch"]["entry"] == "scaled_matmul"
    clipped = wrapped("matmul_with_activation", triton={"string_constexprs": {"ACTIVATION": "relu"}})
    out = runner.run_case(Case(1, clipped.name, *size, 7, KernelChoice(clipped, {}, "job")), POLICY)
    assert not out.verified and "wrong result" in (out.error or ""), out.error


# -- a kernel that makes its TMA descriptors on the device (tl.make_tensor_descriptor) ------------
@pytest.mark.parametrize("size", [(512, 384, 256), (4096, 4096, 4096)], ids=lambda s: "x".join(map(str, s)))
def test_a_device_descriptor_kernel_gets_its_scratch_and_is_verified(runner, size):
    """Its descriptors live in Triton's global scratch, one slice a program, in a buffer gemmwatch
    gives the launch (a null one faults); TMA wants 16-byte strides, so the sizes are multiples of 8."""
    from tests.test_triton_kernels import DEVICE_DESCRIPTORS

    desc = described(name="device_descriptors", files={"matmul.py": DEVICE_DESCRIPTORS})
    out = runner.run_case(Case(0, desc.name, *size, 7, KernelChoice(desc, {}, "job")), POLICY)
    assert out.verified, out.error
    assert out.gflops > 0 and out.pct_of_cublas > 0
    wrong = described(name="device_descriptors_wrong", files={"matmul.py": DEVICE_DESCRIPTORS.replace(
        "for k0 in range(0, K, BLOCK_K):", "for k0 in range(BLOCK_K, K, BLOCK_K):")})
    refused = runner.run_case(Case(0, wrong.name, *size, 7, KernelChoice(wrong, {}, "job")), POLICY)
    assert not refused.verified and "relative error" in refused.error, refused.error


# -- host TensorDescriptors (tests/test_triton_kernels.py's HOST_DESCRIPTORS) --------------------------
@pytest.mark.parametrize("size", [(4096, 4096, 4096), (1000, 1000, 1000), (64, 4096, 1024)],
                         ids=lambda s: "x".join(map(str, s)))
def test_a_kernel_taking_host_descriptors_is_verified(runner, size):
    """Each descriptor's map made with the box and swizzle Triton compiled its copies for, passed by
    value with the matrix's shape and strides; 1000 (a line of 2,000 bytes) has edges the TMA fills."""
    from tests.test_triton_kernels import host_descriptors

    out = runner.run_case(Case(0, "host_descriptors", *size, 7, KernelChoice(host_descriptors(), {}, "job")), POLICY)
    assert out.verified and out.gflops > 0, out.error


def test_a_host_descriptor_kernel_at_a_size_the_tma_cannot_take_is_refused(runner):
    from tests.test_triton_kernels import host_descriptors

    with pytest.raises(ValueError, match="reaches A through its tensor map alone .* not a multiple of 16"):
        runner.run_case(Case(0, "host_descriptors", 1000, 1003, 997, 7, KernelChoice(host_descriptors(), {}, "job")),
                        POLICY)



# -- Triton code as Helion generates it (tests/fixtures/helion_generated) ----------------------------


def test_helion_s_generated_code_is_verified_on_the_gpu_through_its_launcher(runner):
    from tests.test_triton_wrapper import helion_generated

    dynamic = helion_generated("matmul_dynamic")
    for size in [(1000, 1003, 997), (2048, 2048, 2048)]:
        out = runner.run_case(Case(0, dynamic.name, *size, 7, KernelChoice(dynamic, {}, "job")), POLICY)
        assert out.verified and out.gflops > 0, out.error
        assert out.env["launch"]["entry"] == "_helion_matmul_dynamic"
    fixed = helion_generated("matmul", sizes=["64"])
    out = runner.run_case(Case(0, fixed.name, 64, 64, 64, 7, KernelChoice(fixed, {}, "job")), POLICY)
    assert out.verified and out.gflops > 0, out.error
    other = runner.run_case(Case(0, fixed.name, 128, 128, 128, 7, KernelChoice(fixed, {}, "job")), POLICY)
    assert other.not_applicable and not other.verified, other.error
