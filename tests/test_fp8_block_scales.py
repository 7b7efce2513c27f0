"""FP8 with DeepSeek-V3's block scales without a GPU: the description's rules, the scales a case
draws and what they make of A and B, the copies cuBLASLt's block scaling reads (against the layout
it was seen to read on the H200), and tests/fixtures/fp8_block_repo's kernels judged by the product's
runner over the CPU double: the CUDA and Triton kernels verified, the twin that reads B's scales with
their sides swapped and the one that skips a k-slab refused (tests/test_gpu_fp8_block_scales.py
runs them on the GPU beside cuBLASLt)."""

from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError

from core.description.kernel_description import KernelDescription
from core.description.kernel_folder import load_folder
from core.description.precision import BLOCK_SCALES, Precision
from core.settings import Settings
from tests.descriptions import one_file
from tests.fake_gpu import CpuRunner, FakeDevice
from worker.arguments import block_scales, kernel_args
from worker.measure.cases import Case, KernelChoice, TimingPolicy

POLICY = TimingPolicy.from_settings(Settings(GEMMWATCH_CASE_TIME_CAP_S=0.3, GEMMWATCH_MIN_TIME_S=0))
REPO = Path(__file__).parent / "fixtures" / "fp8_block_repo"
BLOCKS = {"A": "1x128", "B": "128x128"}
SRC = "#include <cuda_fp8.h>\n__global__ void k() {}"
ARGS = ["A", "B", "C", "scale_A", "scale_B", "M", "N", "K"]


def described(**change) -> KernelDescription:
    fields = {"compute_mode": "fp8", "scales": BLOCKS, "args": ARGS, "layout": {"A": "row", "B": "col", "C": "row"},
              **change}
    return KernelDescription.model_validate(one_file("k", SRC, "k", [16, 16], [16, 16], **fields))


def test_a_block_scaled_description_names_its_scales_and_their_shapes():
    precision = described().precision
    assert precision.block_scaled and precision.scales == "1x128,128x128"
    assert precision.describe()["scales"] == BLOCKS and "scale_a" not in precision.describe()
    assert precision.tensor_scale == 1.0 and precision.storage_scale == 2.0**-8  # nothing folded into alpha
    assert precision.scale_shapes(1000, 1003, 997) == ((1000, 8), (8, 8))
    assert described(scales={"A": "1x128", "B": "1x128"}).precision.scale_shapes(3, 130, 129) == ((3, 2), (130, 2))


@pytest.mark.parametrize("change, refused", [
    ({"compute_mode": "bf16"}, "scales per block are FP8's; this kernel is bf16"),
    ({"scales": "tensor"}, "args name scale_A, scale_B, FP8's block scales: give them in `scales`"),
    ({"args": ["A", "B", "C", "scale_A", "M", "N", "K"]}, "takes both arrays: name scale_A and scale_B"),
    ({"scales": {"A": "128x128", "B": "128x128"}}, "scales"),
    ({"scales": {"A": "1x128", "B": "128x128", "C": "1x128"}}, "scales"),
    ({"scales": "block"}, "scales"),
    ({"args": ARGS + ["scale_C"]}, "scale_C"),
])
def test_block_scale_descriptions_that_do_not_fit_are_refused_by_name(change, refused):
    with pytest.raises(ValidationError, match=refused):
        described(**change)


def test_a_wrapper_or_a_launcher_is_not_read_for_block_scales_yet():
    with pytest.raises(ValidationError, match="its launcher is not read for them yet"):
        KernelDescription.model_validate(
            {"name": "k", "files": {"k.cu": SRC}, "source": "k.cu", "compiler": "nvcc", "launcher": "run",
             "compute_mode": "fp8", "scales": BLOCKS, "args": ARGS, "layout": {"A": "row", "B": "col", "C": "row"}})


def test_a_scale_pointer_of_another_type_is_refused_from_the_binary():
    with pytest.raises(kernel_args.ArgumentMismatch, match="scale_B points to __half; FP8's block scales are FP32"):
        kernel_args.plan("k", ("A", "B", "C", "scale_A", "scale_B"),
                         [["__nv_fp8_e4m3 const*", 8], ["__nv_fp8_e4m3 const*", 8], ["__nv_bfloat16*", 8],
                          ["float const*", 8], ["__half const*", 8]], "float8_e4m3", "bfloat16")


def test_drawn_scales_are_powers_of_two_of_every_factor_and_repeatable():
    precision = Precision("fp8", scales="1x128,128x128")
    one = block_scales.draw(FakeDevice(), precision, 300, 520, 1000, seed=4)
    again = block_scales.draw(FakeDevice(), precision, 300, 520, 1000, seed=4)
    other = block_scales.draw(FakeDevice(), precision, 300, 520, 1000, seed=5)
    assert one["scale_A"].shape == (300, 8) and one["scale_B"].shape == (5, 8)
    for role in block_scales.ROLES:
        assert one[role].dtype == np.float32 and one[role].flags.c_contiguous
        assert set(np.unique(one[role] / 2.0**-8)) == set(block_scales.FACTORS)
        assert np.array_equal(one[role], again[role]) and not np.array_equal(one[role], other[role])


def test_applied_scales_multiply_each_element_by_its_blocks_scale():
    rng = np.random.default_rng(1)
    m, n, k = 3, 260, 300
    a, b = rng.standard_normal((m, k)), rng.standard_normal((k, n))
    for key in BLOCK_SCALES:
        precision = Precision("fp8", scales=key)
        (a_rows, a_cols), (b_rows, b_cols) = precision.scale_shapes(m, n, k)
        scales = {"scale_A": rng.uniform(1, 2, (a_rows, a_cols)), "scale_B": rng.uniform(1, 2, (b_rows, b_cols))}
        got_a, got_b = block_scales.applied(np, a, b, scales, precision)
        b_side = BLOCK_SCALES[key][1][0]
        for i, j in [(0, 0), (2, 299), (1, 128), (0, 127)]:
            assert got_a[i, j] == a[i, j] * scales["scale_A"][i, j // 128]
        for kk, j in [(0, 0), (299, 259), (128, 127), (127, 128)]:
            assert got_b[kk, j] == b[kk, j] * scales["scale_B"][j // b_side, kk // 128]


def cublaslt_reading(flat, block, rows: int, slabs: int, rows_wanted: int, slabs_wanted: int):
    """How cuBLASLt 13.1 read an operand's block scales on the H200 (docs/BENCHMARKS.md, the probe of
    2026-12-03): 1x128 at [slab * rows + row], 128x128 at [row_block * slabs + slab]; as [rows, slabs]."""
    r, s = np.arange(rows_wanted)[:, None], np.arange(slabs_wanted)[None, :]
    at = s * rows + r if block[0] == 1 else (r // block[0]) * slabs + s
    return flat.reshape(-1)[at]


@pytest.mark.parametrize("key", list(BLOCK_SCALES))
@pytest.mark.parametrize("m, n, k", [(198, 300, 640), (1000, 1003, 997), (256, 384, 512)])
def test_cublaslts_copies_give_each_block_its_own_scale_after_padding(key, m, n, k):
    precision = Precision("fp8", scales=key)
    scales = block_scales.draw(FakeDevice(), precision, m, n, k, seed=2)
    mp, np_, slabs = -(-m // 4) * 4, -(-n // 16) * 16, -(-k // 512) * 4  # as worker/gpu/cublaslt_fp8.py pads
    a_block, b_block = BLOCK_SCALES[key]
    for role, block, rows, padded in (("scale_A", a_block, m, mp), ("scale_B", b_block, n, np_)):
        copy = block_scales.for_cublaslt(np, scales[role], block, padded, slabs)
        assert copy.flags.c_contiguous and copy.size % 4 == 0
        read = cublaslt_reading(copy, block, padded, slabs, rows, -(-k // 128))
        expected = np.repeat(scales[role], block[0], axis=0)[:rows]
        assert np.array_equal(read, expected), role
        whole = cublaslt_reading(copy, block, padded, slabs, padded, slabs)
        assert np.all(whole[:, -(-k // 128):] == 1)  # the padded K-slabs (zeros in A and B) scaled by 1
        if block[0] == 1:
            assert np.all(whole[rows:] == 1)  # and the padded rows


def fixture(name: str) -> KernelChoice:
    return KernelChoice(next(d for d in load_folder(REPO) if d.name == name), {}, "job")


@pytest.fixture
def runner(monkeypatch, tmp_path):
    monkeypatch.setenv("FAKE_GPU_COMPUTE_CAPABILITY", "9.0")
    monkeypatch.setenv("GEMMWATCH_DATA_DIR", str(tmp_path))  # its own autotune choices, made here
    return CpuRunner()


@pytest.mark.parametrize("name", ["fp8_block_tn", "fp8_block_triton", "fp8_block_triton_sized", "fp8_block_grouped"])
@pytest.mark.parametrize("size", [(200, 264, 384), (100, 103, 297)])
def test_the_fixtures_block_scaled_kernels_compile_as_a_job_and_verify(runner, name, size):
    out = runner.run_case(Case(0, name, *size, 9, fixture(name)), POLICY)
    assert out.verified, out.error
    assert out.env["precision"]["scales"] == BLOCKS and out.gflops > 0 and out.cublas_gflops > 0
    assert out.rel_error <= Precision("fp8", scales="1x128,128x128").default_tolerance(size[2])
    if name == "fp8_block_tn":  # the scale pointers' types, from the binary
        assert out.env["launch"]["params"][3:5] == ["scale_A: float const*", "scale_B: float const*"]
    if name == "fp8_block_triton_sized":  # N and K compiled in as this case's, its tile autotuned here
        assert out.env["triton"]["chosen_by"].startswith("autotune here: 2 of 2"), out.env["triton"]


def sized() -> KernelDescription:
    return next(d for d in load_folder(REPO) if d.name == "fp8_block_triton_sized")


def test_sizes_taken_as_constexprs_are_the_cases_own_and_outlive_an_autotune_configuration():
    from core.description.kernel import resolve
    from tests.fake_gpu import H100_FIGURES

    desc = sized()
    assert "N" not in resolve(desc, None, H100_FIGURES).defines  # no case: nothing compiled in
    launch = resolve(desc, None, H100_FIGURES, dims=(300, 520, 1000))
    assert (launch.defines["N"], launch.defines["K"]) == (520, 1000) and "M" not in launch.defines
    config = {"kwargs": {"BLOCK_M": 128, "BLOCK_N": 64}, "num_warps": 8, "num_stages": 3}
    tuned = desc.with_triton_config(config)
    assert tuned.triton.size_constexprs == ["N", "K"] and tuned.triton.num_warps == 8
    assert resolve(tuned, None, H100_FIGURES, dims=(1, 2, 3)).defines == {"BLOCK_M": 128, "BLOCK_N": 64, "N": 2, "K": 3}


@pytest.mark.parametrize("sizes, refused", [(["N", "N"], "each size once"), (["M"], "not among the args")])
def test_size_constexprs_that_repeat_or_are_args_are_refused(sizes, refused):
    data = sized().model_dump(mode="json")
    data["triton"]["size_constexprs"] = sizes
    with pytest.raises(ValidationError, match=refused):
        KernelDescription.model_validate(data)


def test_gemmwatch_check_builds_the_folder_an_autotuned_kernel_by_its_first_configuration():
    from worker.compile.offline_check import check_kernel, reference

    _, figures = reference("9.0")
    for desc in load_folder(REPO):
        checked = check_kernel(desc, figures, Settings())
        assert checked.builds, (desc.name, checked.detail)
    assert "configuration 0 of its 2 @triton.autotune configurations" in check_kernel(sized(), figures, Settings()).detail


@pytest.mark.parametrize("name", ["fp8_block_tn_swapped", "fp8_block_tn_skip"])
def test_a_kernel_reading_b_scales_swapped_or_skipping_a_slab_is_wrong(runner, name):
    out = runner.run_case(Case(0, name, 200, 264, 384, 9, fixture(name)), POLICY)
    assert not out.verified and out.gflops is None
    assert out.error.startswith("wrong result: relative error"), out.error


def test_a_triton_kernels_expression_args_are_integers_specialized_as_their_value_is():
    """vLLM's and SGLang's block FP8 kernel takes the scale arrays' strides: a description computes them
    ("=(K + 127) // 128"), passed as i32 and specialized as Triton's launcher would specialize the value."""
    from core.description.kernel import resolve
    from tests.fake_gpu import H100_FIGURES
    from worker.compile import triton_build

    launch = resolve(fixture("fp8_block_triton").description, None, H100_FIGURES)
    stride = "=(K + 127) // 128"
    assert launch.args[-2:] == (stride, stride) and triton_build.types(launch)[-2:] == ["i32", "i32"]
    for k, value, specialized in ((2048, 16, "D"), (100, 1, "1"), (300, 3, "")):
        values = kernel_args.named_values(launch, 64, 256, k, None, None, None, 1.0, 0.0)
        assert values[stride] == value
        assert triton_build.specialization(launch, values)[-2:] == (specialized, specialized)


def test_a_confirmation_of_a_block_scaled_kernel_thawed_from_the_store_keeps_its_scales(runner, cfg):
    """The A/B runner over a kernel as a confirmation job thaws it: its scales (and its sizes compiled
    in) come back from the kernel store, each side verified beside the same block-scaled problem; a
    base that reads B's scales swapped is refused, not ranked."""
    from core.records.db import session_factory
    from core.records.kernel_store import freeze, thaw
    from worker.measure.cases import choice_from_stored

    def thawed(name: str) -> KernelChoice:
        with session_factory(cfg)() as db:
            frozen = freeze(db, fixture(name).description, {}, "job")
            db.commit()
            return choice_from_stored(thaw(db, frozen, name))

    head = thawed("fp8_block_triton_sized")
    assert head.description.scales_key == "1x128,128x128" and head.description.triton.size_constexprs == ["N", "K"]
    out = runner.run_case(Case(0, "fp8_block_triton_sized", 200, 264, 384, 9, head, base=fixture("fp8_block_triton_sized")),
                          POLICY)
    assert out.verified, out.error
    assert out.env["precision"]["scales"] == BLOCKS
    wrong_base = runner.run_case(Case(0, "fp8_block_tn", 200, 264, 384, 9, thawed("fp8_block_tn"),
                                      base=fixture("fp8_block_tn_swapped")), POLICY)
    assert not wrong_base.verified and "wrong result" in wrong_base.error, wrong_base.error
