"""Every manifest in docs/examples/ is one a user can copy beside the repository it names: each
kernel validates as a description (fields, flags as its Makefile writes them, args, the form), with
a stand-in for the repository's files (the repositories themselves are not carried: the GPU tests
and scripts/studies/home_runner_compare.py run them as they are)."""

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from core.description import compile_flags
from core.description.kernel_description import KernelDescription
from core.description.kernel_folder import folder_defaults

EXAMPLES_DIR = Path(__file__).resolve().parent.parent / "docs" / "examples"
EXAMPLES = sorted(EXAMPLES_DIR.glob("*.gemmwatch.json"))


def _kernels(path: Path) -> list[dict]:
    """Each kernel as the folder's loader hands it on: with the manifest's own fields for all (`build`)."""
    return folder_defaults(path, json.loads(path.read_text()))


def _described(kernel: dict) -> KernelDescription:
    stand_in = "// the repository's file\n"
    return KernelDescription.model_validate(
        {**kernel, "files": {path: stand_in for path in [kernel["source"], *kernel.get("units", [])]}})


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name.removesuffix(".gemmwatch.json"))
def test_each_example_manifest_validates(path):
    kernels = _kernels(path)
    assert kernels
    names = [_described(k).name for k in kernels]
    assert len(set(names)) == len(names), "two kernels of one manifest share a name"


def test_the_fp16_repository_is_described_in_its_own_words():
    """yencal/cuda-hgemm-mma: class-template launchers, beta never read, FP16 sums, its Makefile's
    flags as written (-arch=sm_80 a minimum, -lcurand/-lcublas the worker's own)."""
    for kernel in _kernels(next(p for p in EXAMPLES if p.name.startswith("yencal-"))):
        desc = _described(kernel)
        assert desc.launcher.endswith(">::Run") and "<" in desc.launcher
        assert desc.form.key() == "rrr+alpha+acc16"
        flags = compile_flags.parse(list(desc.flags))
        assert flags.target == "sm_80+" and set(flags.libraries) == {"curand", "cublas"}


def test_the_same_kernel_without_ignored_beta_is_another_form():
    """The manifest's "ignored" is what makes the form C = alpha·A·B: named as a plain beta, the
    same launcher would be checked as C = alpha·A·B + beta·C (a guard against a manifest drifting)."""
    kernel = dict(_kernels(next(p for p in EXAMPLES if p.name.startswith("yencal-")))[0])
    kernel["args"] = ["M", "N", "K", "alpha", "A", "B", "beta", "C"]
    try:
        form = _described(kernel).form.key()
    except ValidationError:
        return  # refused outright is also "not the same form"
    assert form != "rrr+alpha+acc16"


def test_the_triton_tutorials_manifest_is_what_was_measured():
    """docs/examples/triton-lang-triton.gemmwatch.json is the descriptions
    scripts/studies/triton_tutorials.py timed beside do_bench (docs/BENCHMARKS.md): the same entries,
    args, defines, grids and forms, the tutorials' files named where Triton keeps them."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts" / "studies"))
    from triton_tutorials import INPUTS, KERNELS

    manifest = EXAMPLES_DIR / "triton-lang-triton.gemmwatch.json"
    assert json.loads(manifest.read_text())["inputs"] == INPUTS  # the tutorials' torch.randn, as do_bench's side
    kernels = _kernels(manifest)
    assert [k["name"] for k in kernels] == list(KERNELS)
    for kernel in kernels:
        spec = KERNELS[kernel["name"]]
        assert kernel["source"] == f"python/tutorials/{spec['file']}"
        for field in ("entry", "compute_mode", "args", "defines", "grid"):
            assert kernel[field] == spec[field], field
        assert kernel.get("layout") == spec.get("layout")
        assert kernel.get("triton", {}).get("string_constexprs", {}) == spec.get("words", {})  # ACTIVATION=""
        assert _described(kernel).language == "triton"


def test_the_matmul_tutorial_launchers_take_the_three_maps_their_runner_encodes():
    """KnowingNothing/MatmulTutorial's this-sm90 launchers: three maps (A, B and the store map of C)
    as test_vN.py encodes them, its boxes and swizzles; the TN form in BF16 (no alpha or beta)."""
    for kernel in _kernels(next(p for p in EXAMPLES if p.name.startswith("KnowingNothing-"))):
        desc = _described(kernel)
        assert desc.launcher == "gemm_bf16_launch" and desc.args[:3] == ["A_map", "B_map", "C_map"]
        assert {m: (list(t.box), t.swizzle) for m, t in desc.tensor_maps.items() if m != "C"} == {
            "A": ([64, 128], 128), "B": ([64, 128], 128)}
        assert desc.form.key() == "rcr+ab" and desc.compute_mode == "bf16"


def test_fp16_partial_sums_into_an_fp32_c_are_described_as_such():
    """spatters/mma-matmul: FP16 in, FP32 C; kernels 3.2-3.4 keep FP16 sums (mma .f16) added into FP32,
    so they are "accumulate": "fp16" with an FP32 C (checked with FP16 sums' bound); 2.x and 3.x read B
    column-major (runner.cu's B_T); 3.x run at K = 4096 only, their prefetch clamp's."""
    kernels = {k["name"]: _described(k) for k in _kernels(next(p for p in EXAMPLES if p.name.startswith("spatters-")))}
    assert len(kernels) == 9
    for name, desc in kernels.items():
        sums16 = name in ("mma_matmul_3_2", "mma_matmul_3_3", "mma_matmul_3_4")
        assert desc.precision.output_type == "float32" and desc.precision.fp16_accumulate == sums16, name
        assert desc.form.key() == ("rrr+ab" if name.startswith("mma_matmul_1") else "rcr+ab") + ("+acc16" if sums16 else "")
        assert (desc.sizes is not None) == name.startswith("mma_matmul_3"), name


def test_deepseek_v3s_fp8_gemm_is_described_with_block_scales_and_its_sizes_compiled_in():
    """deepseek-ai/DeepSeek-V3's inference/kernel.py as it is: fp8_gemm_kernel(a, b, c, a_s, b_s, M,
    N: tl.constexpr, K: tl.constexpr, ...), B the N x K weights, DeepSeek-V3's own block scales."""
    (kernel,) = _kernels(next(p for p in EXAMPLES if p.name.startswith("deepseek-ai-")))
    desc = _described(kernel)
    assert desc.precision.scales == "1x128,128x128" and desc.form.key() == "rcr+ab"
    assert desc.args == ["A", "B", "C", "scale_A", "scale_B", "M"]
    assert desc.triton is not None and desc.triton.size_constexprs == ["N", "K"]


def test_vllms_block_fp8_kernel_is_described_in_its_argument_form():
    """vllm-project/vllm's _w8a8_triton_block_scaled_mm as its wrapper launches it with its default
    configuration: the group sizes and all ten strides, the scale arrays' row strides computed."""
    (kernel,) = _kernels(next(p for p in EXAMPLES if p.name.startswith("vllm-project-")))
    desc = _described(kernel)
    assert desc.precision.scales == "1x128,128x128" and desc.form.key() == "rcr+ab" and len(desc.args) == 20
    assert desc.args[8:10] == ["=128", "=128"] and desc.args[16] == desc.args[19] == "=(K + 127) // 128"
    assert desc.triton is not None and (desc.triton.num_warps, desc.triton.num_stages) == (4, 2)


def test_a_repository_pytorch_builds_is_described_with_its_build():
    """gau-nernst/learn-cuda's CUDA kernels are built by torch.utils.cpp_extension.load: each keeps the
    manifest's `build`, so nvcc gets PyTorch's flags around the repository's extra_cuda_cflags; its two
    Triton wrappers beside them are not given it (a Triton kernel with a build is refused)."""
    kernels = [_described(k) for k in _kernels(next(p for p in EXAMPLES if p.name.startswith("gau-nernst-")))]
    built = [d for d in kernels if d.compiler == "nvcc"]
    for desc in built:
        assert desc.build == "torch.utils.cpp_extension" and desc.flags == ["-O3", "-lineinfo", "-Xptxas=-v"]
        assert "--expt-relaxed-constexpr" in desc.nvcc_flags
        assert desc.name.endswith("_" + desc.launcher.removeprefix("matmul_pt<matmul_").removesuffix(">"))
    assert len(built) == 21
    # its main.py calls the bindings of matmul.cpp, which make C and return it: their args name no C
    bindings = [d for d in built if d.returns_c]
    assert [d.launcher for d in bindings] == [f"matmul_pt<matmul_{v}>" for v in ("v1", "v2", "v3", "v4", "v5", "v6a", "v6b")]
    assert all(d.args == ["A", "B"] and d.units == ["02a_matmul_simt/matmul.cu"] for d in bindings)
    assert [d.wrapper for d in kernels if d.language == "triton" and d.build is None] == ["matmul_ref", "matmul"]


def test_leetcudas_sgemm_launchers_take_torch_tensors_as_its_runner_calls_them():
    """xlite-dev/LeetCUDA's kernels/sgemm launchers take `torch::Tensor a, b, c` (then the stage count,
    whether to swizzle and the swizzle stride): A, B and C as tensors, its PyTorch build and its flags,
    and the stride its sgemm.py computes, int((int(N / 8) // 256) * 256), at each N it runs."""
    from core.description import kernel_expr

    kernels = [_described(k) for k in _kernels(next(p for p in EXAMPLES if p.name.startswith("xlite-dev-LeetCUDA-sgemm")))]
    assert len(kernels) == 21
    for desc in kernels:
        assert desc.build == "torch.utils.cpp_extension" and desc.args[:3] == ["A", "B", "C"]
        assert "-U__CUDA_NO_HALF_OPERATORS__" in desc.nvcc_flags and "--use_fast_math" in desc.nvcc_flags
    swizzled = [d for d in kernels if d.name.endswith("_swizzle")]
    assert len(swizzled) == 4 and all(d.args[4] == "=1" and d.compute_mode == "tf32" for d in swizzled)
    for n in (4096, 8192, 16384):
        assert kernel_expr.evaluate(swizzled[0].args[5][1:], {"N": n}) == int((int(n / 8) // 256) * 256)


def test_leetcudas_hgemm_torch_launchers_are_the_set_its_runner_runs_as_it_builds_them():
    """xlite-dev/LeetCUDA's kernels/hgemm hgemm.py with --mma --mma-tn --cute-tn: 32 calls of five
    launchers over torch tensors, every file built with one extra_cuda_cflags and one list of -I
    folders (its tools/utils.py), said once for the folder; each call's stage count, and the block
    swizzle its make_block_swizzle_stride works out, on only where the stride is 256 or more."""
    from core.description import kernel_expr

    path = next(p for p in EXAMPLES if p.name.startswith("xlite-dev-LeetCUDA-hgemm-torch"))
    folder = json.loads(path.read_text())
    kernels = [_described(k) for k in _kernels(path)]
    assert len(kernels) == 32 and all(k.keys() <= {"name", "technique", "source", "launcher", "args", "compute_mode",
                                                   "accumulate", "layout", "size_multiple", "libraries"}
                                      for k in folder["kernels"])  # the nvcc line is the folder's alone
    for desc in kernels:
        assert (desc.build, desc.compiler, desc.include_dirs) == (folder["build"], "nvcc", folder["include_dirs"])
        assert desc.flags == folder["flags"] and "-U__CUDA_NO_HALF_OPERATORS__" in desc.nvcc_flags
        assert desc.args[:3] == ["A", "B", "C"] and desc.args[3] in ("=2", "=3", "=4")
    assert sum("cute" in d.name for d in kernels) == 6
    assert all(d.libraries == ["cutlass"] for d in kernels if "cute" in d.name)

    def runners_stride(n: int, k: int) -> int:  # hgemm.py's make_block_swizzle_stride
        factor = 0.5 if n <= 4096 else 0.25
        if n >= 14848 and k > 8192 and n % 8 == 0:
            factor = 0.125
        stride = int(n * factor)
        return stride if stride >= 256 else 1

    swizzled = [d for d in kernels if d.name.endswith("block")]
    assert len(swizzled) == 8 + 5 + 3  # its NN mma.sync calls that swizzle blocks, its TN ones, its CuTe ones
    for n, k in [(256, 256), (512, 512), (4096, 4096), (8192, 8192), (16384, 16384), (16384, 4096)]:
        stride = runners_stride(n, k)
        for desc in swizzled:
            on, given = (kernel_expr.evaluate(a[1:], {"N": n, "K": k, "M": n}) for a in desc.args[4:6])
            assert (bool(on), given) == (stride >= 256, stride), (desc.name, n, k)
    assert all(d.args[4:] == ["=0", "=1"] for d in kernels if d not in swizzled)


def test_thunderkittens_gemm_is_built_with_its_common_mk_line_and_called_as_its_runner_calls_it():
    """HazyResearch/ThunderKittens' kernels/common.mk line for GPU := H100, word for word: what changes
    nothing of gemmwatch's build is dropped, nothing refused; inner_run gets the grid and block its
    run_benchmark works out: mmt::grid's 132 blocks and NUM_THREADS_v's 384 (8 consumer warps and a
    producer warpgroup of 4)."""
    kernel, *levels = _kernels(EXAMPLES_DIR / "HazyResearch-ThunderKittens.gemmwatch.json")
    desc = _described(kernel)
    # The tutorial's levels share launch.cu, which calls matmul(d_A, d_B, d_C, M): N alone, square sizes.
    assert [k["name"][-2:] for k in levels] == ["04", "05", "06", "07", "08"]
    assert all(_described(k).args == ["A", "B", "C", "N"] and k["flags"] == kernel["flags"] for k in levels)
    flags = desc.build_flags
    assert flags.dropped == ("-lrt", "-lpthread", "-ldl", "-lcudadevrt", "-forward-unknown-to-host-compiler",
                             "-Xnvlink=--verbose", "-ftemplate-backtrace-limit=0")
    assert flags.target == "sm_90a" and flags.libraries == ("cuda", "cudart_static")
    assert flags.defines == {"NDEBUG": "1", "KITTENS_HOPPER": "1"} and "-std=c++20" in flags.nvcc
    consumer_warps, producer_warps = 2 * 4, 4  # matmul_template<2,4,8>: M_BLOCK warpgroups, and the producer's
    assert desc.args[-2:] == ["=132", f"={(consumer_warps + producer_warps) * 32}"]
    assert desc.include_dirs == ["include", "prototype"] and desc.size_multiple.model_dump(exclude_none=True) == {"M": 128, "N": 256, "K": 64}


def test_cute_gemm_101_says_its_form_and_build_once_for_the_folder():
    """HuyNguyen-hust/cute-gemm-101: every launcher is `launch_..._<T>(m, n, k, const T* alpha, A, lda, B,
    ldb, const T* beta, C, ldc, stream)` over A row-major, B and C column-major (its cublasGemmEx is the TN
    call), FP16 sums in its half_t kernels; CMake's `CUDA_ARCHITECTURES 80` builds with CUTLASS's headers."""
    kernels = [_described(k) for k in _kernels(EXAMPLES_DIR / "HuyNguyen-hust-cute-gemm-101.gemmwatch.json")]
    half = [d for d in kernels if "half_t" in d.launcher]
    # V03 scales the C it wrote by alpha + beta: right at beta = 0 alone, so its beta is "ignored"
    assert len(half) == 3 and [d.form.key() for d in half] == ["rcc+acc16", "rcc+acc16", "rcc+alpha+acc16"]
    assert all(d.form.key() == "rcc" for d in kernels if d not in half)
    # V00's `float` is SM80_16x8x8_F32TF32TF32F32_TN: TF32 on the tensor cores, checked as TF32 (FP32's
    # 1e-4 refused it on the H100 at 2.6e-4); the official sgemms sum in FP32 on the CUDA cores
    assert {d.name: d.compute_mode for d in kernels if d not in half} == {
        "cute_gemm_101_official_v01_fp32": "fp32", "cute_gemm_101_official_v02_fp32": "fp32",
        "cute_gemm_101_v00_tf32": "tf32"}
    assert all(d.libraries == ["cutlass"] and d.build_flags.target == "sm_80+" for d in kernels)
    # no predicate in its tiles' copies: sizes in whole tiles (128x128x32 for V01-V03, 64x64x16 for the rest)
    assert {d.size_multiple.model_dump(exclude_none=True)["M"] for d in half} == {128}


def test_gemm_zoos_kernel_functors_are_run_as_objects_with_their_own_forms():
    """AD2605/gemm-zoo: each launcher is a class built from (m, n, k, cudaDeviceProp) and called with
    (a, b, c, d, alpha, beta, stream), C read and D written; its bench files are the units, as its CMake
    file builds them, and its constructors assert whole tiles (`m % M == 0`)."""
    kernels = [_described(k) for k in _kernels(EXAMPLES_DIR / "AD2605-gemm-zoo.gemmwatch.json")]
    assert all(d.launcher.startswith("gemmwatch::functor<nvidia::kernel_functors::") and d.launcher.endswith(">")
               for d in kernels)
    assert all(d.args[:3] == ["M", "N", "K"] and d.args[3:7] == ["A", "B", "C", "D"] for d in kernels)
    by_name = {d.name: d for d in kernels}
    # BF16 into an FP32 C; FP16 summed in FP16 (its mma is .f16.f16.f16.f16); TF32 on the tensor cores
    assert by_name["gemm_zoo_bf16_mma"].compute_mode == "bf16" and by_name["gemm_zoo_bf16_mma"].output == "fp32"
    assert by_name["gemm_zoo_fp16_mma"].form.accumulate == "fp16"
    assert by_name["gemm_zoo_tf32_mma"].compute_mode == "tf32"
    assert by_name["gemm_zoo_fp16_mma"].size_multiple.model_dump(exclude_none=True) == {"M": 256, "N": 256, "K": 32}
    assert all(d.source.startswith("nvidia/bench/bench_") for d in kernels)
