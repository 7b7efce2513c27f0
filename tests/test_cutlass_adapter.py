"""Issue 50: a CUTLASS example as it ships. CUTLASS's examples define their GEMM as a type
(`using Gemm = GemmUniversalAdapter<GemmKernel>;`) and run it from a main that fills its own
buffers: there is no function of pointers to name. `"launcher": "gemmwatch::cutlass3_gemm<Gemm>"`
names gemmwatch's own launcher over that type (worker/compile/launcher_adapters/gemmwatch/cutlass3_gemm.h),
compiled after the example's unit in the confined compile.

The example is the nvidia-cutlass wheel's copy of example 48 (Hopper, warp-specialised, TF32),
described by docs/examples/NVIDIA-cutlass-examples.gemmwatch.json. Real nvcc and the real confined
compile build it here; it runs on the GPU in tests/test_gpu_cutlass_adapter.py.
"""

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError

from core.description.inputs import drawn
from core.description.kernel_description import KernelDescription
from core.description.kernel_folder import load_folder
from tests.test_cutlass_library import CUTLASS, REPO as CUTLASS_REPO, needs_nvcc
from tests.test_launcher_cases import built, needs_confinement
from worker.arguments import kernel_args
from worker.compile.compiled import CompileError

ROOT = Path(__file__).resolve().parents[1]
MANIFEST = ROOT / "docs" / "examples" / "NVIDIA-cutlass-examples.gemmwatch.json"
EXAMPLES = Path(CUTLASS.include_dirs[0]).parent / "examples"  # the wheel's cutlass_library/source/examples
EXAMPLE = "48_hopper_warp_specialized_gemm"


@pytest.fixture(scope="module")
def examples(tmp_path_factory) -> Path:
    """CUTLASS's examples folder as the wheel ships it (the two folders example 48 reads), with the
    manifest of docs/examples beside them."""
    folder = tmp_path_factory.mktemp("cutlass-examples")
    for sub in (EXAMPLE, "common"):
        shutil.copytree(EXAMPLES / sub, folder / sub)
    shutil.copy(MANIFEST, folder / "gemmwatch.json")
    return folder


def example(folder: Path, **changes) -> KernelDescription:
    desc, = load_folder(folder)
    return KernelDescription.model_validate({**desc.model_dump(mode="json"), **changes})


def test_the_example_is_taken_as_it_ships(examples):
    desc = example(examples)
    assert sorted(desc.files) == [f"{EXAMPLE}/{EXAMPLE}.cu", "common/helper.h"]
    assert (examples / EXAMPLE / f"{EXAMPLE}.cu").read_bytes() == (EXAMPLES / EXAMPLE / f"{EXAMPLE}.cu").read_bytes()
    assert desc.launcher == "gemmwatch::cutlass3_gemm<Gemm>" and desc.libraries == ["cutlass"]
    # Its main fills A and B with integers in [-8, 8]; the timed runs multiply the same kind of data.
    assert desc.inputs == "integers(-8,8)" and json.loads(MANIFEST.read_text())["timing"] == "burst"


@pytest.mark.parametrize(("changes", "words"), [
    ({"libraries": []}, r'gemmwatch::cutlass3_gemm is written against cutlass: add "libraries": \["cutlass"\]'),
    ({"launcher": "gemmwatch::cutlass4_gemm<Gemm>"},
     r"gemmwatch::cutlass4_gemm is not one of gemmwatch's launchers \(gemmwatch::cutlass3_gemm, "
     r"gemmwatch::cutlass2_gemm, gemmwatch::functor, gemmwatch::cute_tensors\)"),
    ({"launcher": "gemmwatch::cutlass3_gemm"}, r'name the GEMM type gemmwatch::cutlass3_gemm runs.*"gemmwatch::cutlass3_gemm<Gemm>"'),
    ({"launcher": "gemmwatch :: cutlass3_gemm"}, "name the GEMM type"),
])
def test_gemmwatchs_launcher_is_named_with_its_type_and_its_library(examples, changes, words):
    with pytest.raises(ValidationError, match=words):
        example(examples, **changes)


def test_a_launcher_over_cutlass_types_takes_cutlasss_element_types():
    params = [["int", None]] * 3 + [["float", None], ["cutlass::half_t const*", None], ["cutlass::half_t const*", None],
                                    ["float", None], ["cutlass::half_t*", None], ["CUstream_st*", None]]
    roles = ("M", "N", "K", "alpha", "A", "B", "beta", "C", "stream")
    plan = kernel_args.plan("gemmwatch::cutlass3_gemm<Gemm>", roles, params, "float16", "float16", host=True)
    assert [how for _r, how in plan.passing] == ["i32", "i32", "i32", "f32", "ptr", "ptr", "f32", "ptr", "ptr"]
    with pytest.raises(kernel_args.ArgumentMismatch, match="A"):  # half_t is not BF16's storage
        kernel_args.plan("gemmwatch::cutlass3_gemm<Gemm>", roles, params, "bfloat16", "float16", host=True)


@pytest.mark.parametrize(("spelling", "how"), [("cutlass::half_t const*", "&f16"), ("cutlass::bfloat16_t const*", "&bf16"),
                                               ("cutlass::half_t", "f16"), ("cutlass::bfloat16_t", "bf16")])
def test_a_scalar_in_cutlasss_16_bit_types_is_passed_in_its_bits(spelling, how):
    """cute-gemm-101's `launch_cute_gemm_kernel_v02<cute::half_t>(m, n, k, const T* alpha, ...)`: alpha and
    beta are half_t on the host; a CUTLASS 16-bit type holds the same bits as __half or __nv_bfloat16."""
    roles = ("M", "alpha", "A", "beta")
    params = [["unsigned long", None], [spelling, None], ["cutlass::half_t const*", None], [spelling, None]]
    plan = kernel_args.plan("launch_cute_gemm_kernel_v02<cute::half_t>", roles, params, "float16", "float16", host=True)
    assert [h for _r, h in plan.passing] == ["u64", how, "ptr", how]


def test_a_scalar_of_an_unknown_type_is_refused_with_the_types_it_may_be():
    params = [["cutlass::tfloat32_t const*", None]]
    with pytest.raises(kernel_args.ArgumentMismatch, match="alpha must be a float, double, __half or __nv_bfloat16 "
                                                           r"\(or CUTLASS's half_t, bfloat16_t\)"):
        kernel_args.plan("launch", ("alpha",), params, "float32", "float32", host=True)


@pytest.mark.parametrize(("inputs", "bound"), [("integers(-8,8)", 8), ("integers(-2,2)", 2)])
def test_cutlasss_integer_inputs_are_whole_numbers_over_the_whole_range(inputs, bound):
    x = drawn(np.random.default_rng(7), 300, 200, inputs, np.float32)
    assert x.dtype == np.float32 and np.array_equal(x, np.round(x))
    assert set(np.unique(x)) == set(range(-bound, bound + 1))  # every value, each end included


@needs_nvcc
@needs_confinement
def test_the_example_builds_with_gemmwatchs_launcher_and_its_parameters_are_read(examples, shared_kernel_cache):
    library = built(example(examples), shared_kernel_cache)
    assert [how for _r, how in library.plan.passing] == ["i32", "i32", "i32", "f32", "ptr", "ptr", "f32", "ptr", "ptr"]
    assert library.plan.spelled[4] == "float const*" and library.plan.spelled[7] == "float*"
    assert library.compiler.endswith(f" + CUTLASS {CUTLASS.version}")


@needs_nvcc
@needs_confinement
def test_a_type_gemmwatchs_launcher_cannot_run_is_refused_in_the_compilers_words(tmp_path, shared_kernel_cache):
    """A CUTLASS 2 device GEMM (the fixture's SimtSgemm) has no CUTLASS 3 kernel type: the error is
    nvcc's, located in gemmwatch's header and shown to the job (not filtered as a system file's)."""
    folder = tmp_path / "repo"
    shutil.copytree(CUTLASS_REPO, folder)
    entry = {"name": "simt_as_cutlass3", "source": "gemm.cu", "compiler": "nvcc", "libraries": ["cutlass"],
             "flags": ["-std=c++17"], "launcher": "gemmwatch::cutlass3_gemm<SimtSgemm>",
             "args": ["M", "N", "K", "alpha", "A", "B", "beta", "C", "stream"]}
    (folder / "gemmwatch.json").write_text(json.dumps({"kernels": [entry]}))
    desc, = load_folder(folder)
    with pytest.raises(CompileError) as refused:
        built(desc, shared_kernel_cache)
    said = str(refused.value)
    assert "gemmwatch/cutlass3_gemm.h" in said and "static assertion failed" in said, said
    assert "Gemm must be a CUTLASS 3 device GEMM" in said and "a launcher of the repository's own" in said


@needs_nvcc
@needs_confinement
@pytest.mark.parametrize("name", ["cutlass2_simt_sgemm", "cutlass2_streamk_sgemm"])
def test_a_cutlass2_device_gemm_is_run_by_gemmwatchs_launcher_its_parameters_read(name, shared_kernel_cache):
    """CUTLASS 2's `cutlass::gemm::device::Gemm<...>` (the fixture's SimtSgemm) and its universal stream-K
    GEMM (StreamKSgemm, `device::GemmUniversal<..., ThreadblockSwizzleStreamK, ...>`, whose arguments are
    built otherwise), each named as the type its repository defines, with no function of pointers around
    it: gemmwatch::cutlass2_gemm<Type>."""
    from tests.test_cutlass_library import described as cutlass_kernel

    library = built(cutlass_kernel(name), shared_kernel_cache)
    assert [how for _r, how in library.plan.passing] == ["i32", "i32", "i32", "f32", "ptr", "ptr", "f32", "ptr", "ptr"]
    assert library.plan.spelled[4] == "float const*" and library.plan.spelled[7] == "float*"
    assert library.compiler.endswith(f" + CUTLASS {CUTLASS.version}")


@needs_nvcc
@needs_confinement
def test_a_type_that_is_no_cutlass2_gemm_is_refused_in_the_compilers_words(shared_kernel_cache):
    from tests.test_cutlass_library import described as cutlass_kernel

    with pytest.raises(CompileError) as refused:
        built(cutlass_kernel("cutlass2_simt_sgemm", launcher="gemmwatch::cutlass2_gemm<RowMajor>"), shared_kernel_cache)
    said = str(refused.value)
    assert "gemmwatch/cutlass2_gemm.h" in said and "static assertion failed" in said, said
    assert "Gemm must be a CUTLASS 2 device GEMM" in said and "gemmwatch::cutlass3_gemm<Gemm>" in said


def test_every_launcher_gemmwatch_names_has_its_header():
    from core.description.launch_checks import LAUNCHER_ADAPTERS
    from worker.compile.header_libraries import ADAPTER_DIR, adapter_header

    for name in LAUNCHER_ADAPTERS:
        assert (ADAPTER_DIR / adapter_header(f"{name}<Gemm>")).is_file(), name
    assert adapter_header("gemmwatch::cutlass4_gemm<Gemm>") is None and adapter_header("launch_gemm<float>") is None


@pytest.mark.parametrize("launcher", [
    'gemmwatch::cutlass3_gemm<Gemm>; void *p = (void *)&system; //',  # a statement after the type
    "gemmwatch::cutlass3_gemm<Gemm>)) {} int x = ((1",  # closing the expression it is pasted into
    "gemmwatch::cutlass3_gemm<Gemm>>",  # unbalanced brackets
    "gemmwatch::cutlass3_gemm<Gemm /* a comment */>",
    "gemmwatch::cutlass3_gemm<Gemm>\n#include </etc/passwd>",
])
def test_a_type_named_for_gemmwatchs_launcher_cannot_be_code(examples, launcher):
    """The type is pasted into the launcher unit, as any launcher's name is: the same bound holds."""
    with pytest.raises(ValidationError, match="launcher"):
        example(examples, launcher=launcher)
