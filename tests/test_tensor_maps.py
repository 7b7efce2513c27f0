"""TMA tensor maps in a kernel description (`tensor_maps`, args A_map, B_map and C_map): what a
description may say, what the runner asks the driver for, how it passes a map (by address or by
value, as the kernel declares it), and where it passes none. The driver's encoding
itself and the kernels that read the maps are tested on the GPU (tests/test_gpu.py)."""

import re

import pytest
from pydantic import ValidationError

from core.description.builtins import builtin_kernels
from core.description.kernel import resolve
from core.description.kernel_description import KernelDescription
from tests.descriptions import one_file
from tests.test_kernel_compile import H100_FIGURES
from worker.arguments import kernel_args, tensor_maps

SOURCE = 'extern "C" __global__ void k(int M, int N, int K, float alpha, const float* A, const float* B, float beta, ' \
         'float* C, const void* A_map) {}'
ARGS = ["M", "N", "K", "alpha", "A", "B", "beta", "C", "A_map"]


def described(**extra) -> KernelDescription:
    return KernelDescription.model_validate(one_file("k", SOURCE, "k", [128], [128, 128], **extra))


def test_a_map_in_args_and_in_tensor_maps_resolves_to_its_box():
    desc = described(args=ARGS, tensor_maps={"A": {"box": [32, "BM"], "swizzle": 128}}, defines={"BM": 128})
    assert resolve(desc, {}, H100_FIGURES).tensor_maps == {"A": (32, 128, 128)}


@pytest.mark.parametrize(("extra", "words"), [
    ({"args": ARGS}, "each map in both"),  # a map argument with no map described
    ({"tensor_maps": {"A": {"box": [32, 64]}}}, "each map in both"),  # a map no argument receives
    ({"args": ARGS, "tensor_maps": {"A": {"box": [32, "M"]}}}, "M"),  # a box may not vary per case
    ({"args": ARGS, "tensor_maps": {"A": {"box": [32, 64], "swizzle": 16}}}, "swizzle"),
])
def test_a_description_that_gets_its_maps_wrong_is_refused(extra, words):
    with pytest.raises(ValidationError, match=words):
        described(**extra)


@pytest.mark.parametrize("extra", [
    {"args": ARGS, "tensor_maps": {"C": {"box": [32, 64]}}},  # only A and B have maps
    {"args": ARGS[:-1] + ["B_map"], "tensor_maps": {"A": {"box": [32, 64]}}},  # the other matrix's map
    {"args": ARGS + ["A_map"], "tensor_maps": {"A": {"box": [32, 64]}}},  # the map passed twice
    {"args": ARGS, "tensor_maps": {"A": {"box": [32, 64, 1]}}},  # a third side
    {"args": ARGS, "tensor_maps": {"A": {"box": [32, 64], "interleave": 1}}},  # a field gemmwatch does not know
    {"args": ARGS, "tensor_maps": {"A": {"box": [True, 64]}}},  # a bool is no size
    {"args": ARGS, "tensor_maps": {"A": {"box": [32.0, 64]}}},
    {"args": ARGS, "tensor_maps": {"A": {"box": [32, "1 << 40"]}}},  # outside the expression language
    {"args": ARGS, "tensor_maps": {"A": {"box": [32, 64], "swizzle": "128"}}},
    {"args": ARGS, "tensor_maps": {"A": {"box": [32, 64], "swizzle": True}}},
])
def test_a_description_that_tries_to_get_a_map_past_the_rules_is_refused(extra):
    with pytest.raises(ValidationError):
        described(**extra)


@pytest.mark.parametrize(("box", "swizzle"), [([64, 128], 128), ([30, 128], 0), ([32, 512], 0), ([0, 8], 0),
                                              ([-32, 64], 0), ([32, "SM_COUNT * 1000000000000"], 0)])
def test_a_box_the_tma_cannot_copy_is_refused_when_resolved(box, swizzle):
    """64 floats are 256 bytes, past a 128-byte swizzle; 30 floats are no multiple of 16 bytes; a
    side of 512 or 0 is outside 1..256."""
    desc = described(args=ARGS, tensor_maps={"A": {"box": box, "swizzle": swizzle}})
    with pytest.raises(ValueError, match="tensor_maps.A.box"):
        resolve(desc, {}, H100_FIGURES)


def test_the_map_follows_the_layout_and_is_left_out_where_the_tma_cannot_describe_the_matrix():
    row = tensor_maps.request("A", "row", 1000, 1100, 1000, 4096, "float32", (32, 128, 128))
    assert (row.dims, row.line_bytes, row.box, row.swizzle) == ((1000, 1000), 4000, (32, 128), 128)
    b = tensor_maps.request("B", "row", 1000, 1100, 1000, 4096, "float32", (32, 32, 0))
    assert (b.dims, b.line_bytes) == ((1100, 1000), 4400)
    column = tensor_maps.request("A", "column", 1000, 1100, 1000, 4096, "float16", (64, 64, 128))
    assert (column.dims, column.line_bytes) == ((1000, 1000), 2000)
    assert tensor_maps.request("A", "row", 1000, 1003, 997, 4096, "float32", (32, 128, 128)) is None  # 3988 bytes
    assert tensor_maps.request("A", "row", 1000, 1024, 1000, 4100, "float32", (32, 128, 128)) is None  # base


def test_the_tma_builtin_describes_the_map_its_kernel_reads():
    launch = resolve(builtin_kernels()["tf32_wgmma_tma"], {}, H100_FIGURES, "builtin")
    assert launch.args[-1] == "A_map" and launch.tensor_maps == {"A": (32, 256, 128)}  # one copy: the whole A slab
    pairs = resolve(builtin_kernels()["tf32_wgmma_pairs"], {}, H100_FIGURES, "builtin")
    assert pairs.grid(4096, 8, 4096) == (2, 16, 1) and pairs.grid(1000, 1100, 1000) == (10, 4, 1)  # clusters of two


def test_a_tensor_map_parameter_named_as_its_matrix_is_refused_by_name():
    """A map named A would be handed the matrix itself: a fault on the GPU, and nothing said."""
    params = [["int", 4], ["int", 4], ["int", 4], ["CUtensorMap_st const*", 8]]
    with pytest.raises(kernel_args.ArgumentMismatch, match=re.escape("A is a tensor map, not a matrix: name it A_map")):
        kernel_args.plan("k", ("M", "N", "K", "A"), params, "bfloat16", "bfloat16")
    assert kernel_args.plan("k", ("M", "N", "K", "A_map"), params, "bfloat16", "bfloat16").passing[-1] == ("A_map", "ptr")


@pytest.mark.parametrize("host", [False, True], ids=["kernel", "launcher"])
def test_a_matrix_parameter_named_as_a_map_is_refused_by_name(host):
    """The other way round: h100_gemm's launcher takes `const __nv_bfloat16* A`; named A_map, a launcher was
    handed a map in host memory where it reads A, and nothing was said."""
    params = [["int", 4], ["int", 4], ["int", 4], ["__nv_bfloat16 const*", 8]]
    with pytest.raises(kernel_args.ArgumentMismatch, match=re.escape(
            "A_map points to __nv_bfloat16, a matrix's element: a tensor map is a CUtensorMap")):
        kernel_args.plan("k", ("M", "N", "K", "A_map"), params, "bfloat16", "bfloat16", host=host)
    assert kernel_args.plan("k", ("M", "N", "K", "A"), params, "bfloat16", "bfloat16", host=host).passing[-1] == ("A", "ptr")


MAP_PARAMS = [["int", 4], ["int", 4], ["int", 4], ["__nv_bfloat16*", 8]]


@pytest.mark.parametrize("spelled", ["CUtensorMap_st", "CUtensorMap_st const", None])  # None: extern "C", size only
def test_a_map_taken_by_value_is_passed_as_its_128_bytes(spelled):
    """`const __grid_constant__ CUtensorMap A_map`, as CUTLASS and most Hopper repositories take it."""
    roles = ("M", "N", "K", "C", "A_map", "B_map")
    params = [*MAP_PARAMS, [spelled, 128], ["CUtensorMap_st const*", 8]]
    plan = kernel_args.plan("k", roles, params, "bfloat16", "bfloat16")
    assert plan.passing[-2:] == (("A_map", "map"), ("B_map", "ptr"))
    assert kernel_args.maps_by_value(plan) == frozenset({"A"})
    encoded = bytes(range(128))
    (passed,) = kernel_args.value("map", encoded, None)  # one element: CuPy passes it by value, all 128 bytes
    assert passed.tobytes() == encoded and passed.dtype.itemsize == 128


def test_a_map_by_value_of_another_size_is_refused():
    with pytest.raises(kernel_args.ArgumentMismatch, match="A_map is a CUtensorMap of 64 bytes, not 128"):
        kernel_args.plan("k", ("M", "N", "K", "C", "A_map"), [*MAP_PARAMS, ["CUtensorMap_st", 64]], "bfloat16",
                         "bfloat16")


def test_c_may_be_reached_through_its_map_alone_and_its_box_is_in_the_outputs_type():
    args = ["M", "N", "K", "alpha", "A", "B", "beta", "C_map"]
    desc = described(args=args, tensor_maps={"C": {"box": [4, 64]}}, compute_mode="fp16", output="fp32")
    assert resolve(desc, {}, H100_FIGURES).tensor_maps == {"C": (4, 64, 0)}  # 4 FP32: 16 bytes, a TMA line
    with pytest.raises(ValueError, match=r"box \[4, 64\] of float16"):  # 4 FP16: 8 bytes, none
        resolve(described(args=args, tensor_maps={"C": {"box": [4, 64]}}, compute_mode="fp16"), {}, H100_FIGURES)


def test_a_map_by_value_refuses_the_sizes_the_tma_cannot_describe_even_beside_its_pointer():
    """By address, a kernel with A's pointer too gets address 0 at K = 997 and copies another way;
    by value no map can say "none", so that case is refused, saying why."""
    launch = resolve(described(args=ARGS, tensor_maps={"A": {"box": [32, 64]}}), {}, H100_FIGURES)
    assert tensor_maps.unreadable(launch, 1000, 1003, 997) is None
    why = tensor_maps.unreadable(launch, 1000, 1003, 997, by_value=frozenset({"A"}))
    assert why == ("k reaches A through A_map, which it takes by value (a map by address could be 0 here), and the TMA "
                   "cannot describe A at 1000x1003x997: a line of 997 elements is 3988 bytes, not a multiple of 16")
    assert tensor_maps.unreadable(launch, 1000, 1003, 1000, by_value=frozenset({"A"})) is None
    with pytest.raises(ValueError, match="^" + re.escape(why) + "$"):  # nothing to hand such a kernel
        tensor_maps.stand_in(launch, "A", 1000, 1003, 997, by_value=frozenset({"A"}))


def test_a_map_by_value_that_says_zeros_when_absent_runs_those_sizes_on_its_pointer():
    """cuBLAS and CUTLASS take their maps by value; a built-in does too and, where the TMA cannot
    describe A, reads 128 zero bytes as "no map" and copies A through its pointer. The case runs."""
    launch = resolve(described(args=ARGS, tensor_maps={"A": {"box": [32, 64], "zeros_when_absent": True}}), {},
                     H100_FIGURES)
    assert launch.zero_maps == frozenset({"A"})
    assert tensor_maps.unreadable(launch, 1000, 1003, 997, by_value=frozenset({"A"})) is None
    # What stands in for the map, by the same rule: zeros by value, address 0 (None) by address.
    assert tensor_maps.stand_in(launch, "A", 1000, 1003, 997, by_value=frozenset({"A"})) == bytes(128)
    assert tensor_maps.stand_in(launch, "A", 1000, 1003, 997) is None
    plain = resolve(described(args=ARGS, tensor_maps={"A": {"box": [32, 64]}}), {}, H100_FIGURES)
    assert plain.zero_maps == frozenset()  # the default: such a case is refused (the test above)


@pytest.mark.parametrize(("extra", "words"), [
    # A through its map alone: zeros would leave the kernel no way to A
    ({"args": ["M", "N", "K", "alpha", "B", "beta", "C", "A_map"]}, "A among args too"),
    # a launcher is handed its maps encoded, with no zeros for "none"
    ({"args": ARGS, "launcher": "run", "compiler": "nvcc", "files": {"k.cu": SOURCE, "run.cu": "void run() {}"}},
     "kernel's own parameter"),
])
def test_zeros_when_absent_is_refused_where_no_kernel_could_read_them(extra, words):
    with pytest.raises(ValidationError, match=f"tensor_maps.A.zeros_when_absent: .*{words}"):
        described(tensor_maps={"A": {"box": [32, 64], "zeros_when_absent": True}}, **extra)


def test_every_tma_builtin_takes_its_maps_by_value_with_zeros_for_none():
    """The built-ins read a map from their parameters (no global read for the first copy to wait
    for), and every size still runs: the maps say zeros_when_absent, the pointers are among args."""
    tma = {name: d for name, d in builtin_kernels().items() if d.tensor_maps}
    assert len(tma) >= 20
    for name, desc in tma.items():
        assert all(spec.zeros_when_absent for spec in desc.tensor_maps.values()), name
        launch = resolve(desc, {}, H100_FIGURES, "builtin")
        assert tensor_maps.unreadable(launch, 1000, 1003, 997, by_value=frozenset(desc.tensor_maps)) is None, name


def test_the_map_of_c_describes_c_in_its_layout():
    c = tensor_maps.request("C", "row", 1000, 1100, 1000, 4096, "float32", (16, 64, 0))
    assert (c.dims, c.line_bytes) == ((1100, 1000), 4400)
    column = tensor_maps.request("C", "column", 1000, 1100, 1000, 4096, "float32", (16, 64, 0))
    assert (column.dims, column.line_bytes) == ((1000, 1100), 4000)


@pytest.mark.parametrize("args", [
    ["M", "N", "K", "C", "A_map", "A_map", "B"],  # A's map twice, no pointer: still each name once
    ["M", "N", "K", "C", "B_map"],  # neither A nor its map
    ["M", "N", "K", "A_map", "B_map"],  # no C, neither its pointer nor its map
    ["M", "N", "K", "C", "a_map", "B"],  # a spelling the names do not have
])
def test_a_map_only_kernel_still_names_each_operand_once(args):
    with pytest.raises(ValidationError):
        described(args=args, tensor_maps={"A": {"box": [32, 64]}, "B": {"box": [32, 64]}})
