"""Issue 50: a Triton kernel given by its repository's Python wrapper (`"wrapper": "matmul"`), read in the
confined compile process for the one launch it makes (worker/compile/triton_wrapper.py) and then compiled,
checked and timed as that kernel described by hand. Real Triton and the real confined process; the CPU
double stands in for the GPU (tests/test_gpu_triton.py runs a wrapper on the GPU)."""

import json
import os
import re
from pathlib import Path

import numpy
import pytest
from pydantic import ValidationError

from core.description import kernel_expr
from core.description.kernel import resolve
from core.description.description_fields import WORKSPACE_TYPES, workspace_of
from core.description.kernel_description import KernelDescription
from core.description.kernel_folder import load_folder
from core.records.db import upgrade_database
from core.settings import Settings
from tests.conftest import make_client, make_settings, wait_for_job
from tests.fake_gpu import H100_FIGURES, CpuRunner
from worker.arguments import kernel_args
from worker.compile import compiler
from worker.compile.compiled import CompileRefused
from worker.measure.cases import Case, KernelChoice, TimingPolicy

pytest.importorskip("triton")
FIXTURES = Path(__file__).parent / "fixtures"
REPO = FIXTURES / "triton_wrapper_repo"
POLICY = TimingPolicy.from_settings(Settings(GEMMWATCH_CASE_TIME_CAP_S=0.3, GEMMWATCH_MIN_TIME_S=0))


def wrapped(wrapper: str, **changes) -> KernelDescription:
    return KernelDescription.model_validate({
        "name": f"wrapped_{re.sub(r'[^a-z_]', '', wrapper.lower())[:40]}", "language": "triton",
        "source": "wrappers.py", "wrapper": wrapper,
        "files": {"wrappers.py": (REPO / "wrappers.py").read_text()}, "compute_mode": "fp16", **changes})


@pytest.fixture
def runner(tmp_path, monkeypatch, shared_kernel_cache):
    monkeypatch.setenv("GEMMWATCH_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("GEMMWATCH_KERNEL_CACHE_DIR", str(shared_kernel_cache))
    return CpuRunner()


def grid_at(desc: KernelDescription, **scope: int) -> int:
    return kernel_expr.evaluate(desc.grid.x, scope)


def test_the_tutorial_shaped_wrapper_reads_as_the_description_written_by_hand(runner):
    """tests/fixtures/triton_script_repo's kernel, described by hand there, and by its own `matmul` here."""
    script = FIXTURES / "triton_script_repo"
    by_hand = load_folder(script)[0]
    desc = KernelDescription.model_validate({**wrapped("matmul").model_dump(mode="json", exclude_none=True),
                                             "source": "matmul_script.py",
                                             "files": {"matmul_script.py": (script / "matmul_script.py").read_text()}})
    read = desc.with_wrapper_call(runner.device.wrapper_call(desc))
    assert (read.entry, read.args, read.form) == (by_hand.entry, by_hand.args, by_hand.form)
    for m, n, bm, bn in [(96, 80, 64, 64), (4096, 4096, 128, 64), (1000, 1003, 32, 32), (1, 7, 64, 32)]:
        scope = {"M": m, "N": n, "K": 64, "BLOCK_M": bm, "BLOCK_N": bn}
        assert grid_at(read, **scope) == grid_at(by_hand, **scope)


def test_a_wrapper_with_its_checks_and_torch_s_names_imported_reads_as_the_plain_one(runner):
    """gau-nernst/learn-cuda's `matmul(a: Tensor, b: Tensor)`: `from torch import Tensor` (refused, as every
    torch import is here) gives the stand-in's Tensor, so the wrapper is still defined, and its
    `assert a.is_cuda` holds. Its launch is the plain wrapper's."""
    plain = wrapped("matmul").with_wrapper_call(runner.device.wrapper_call(wrapped("matmul")))
    checked = wrapped("checked_matmul").with_wrapper_call(runner.device.wrapper_call(wrapped("checked_matmul")))
    assert (checked.entry, checked.args, checked.defines, checked.form) == (plain.entry, plain.args, plain.defines,
                                                                            plain.form)
    assert grid_at(checked, M=1000, N=1003, BLOCK_M=64, BLOCK_N=64) == grid_at(plain, M=1000, N=1003, BLOCK_M=64,
                                                                               BLOCK_N=64) == 16 * 16
    # and it is checked and timed as that kernel, on the double
    out = runner.run_case(Case(0, checked.name, 96, 80, 72, seed=3, kernel=KernelChoice(wrapped("checked_matmul"), {}, "job")),
                          POLICY)
    assert out.verified, out.error


def test_a_wrapper_s_constexprs_options_and_a_persistent_grid_over_the_sms(runner):
    read = wrapped("persistent_matmul").with_wrapper_call(runner.device.wrapper_call(wrapped("persistent_matmul")))
    assert read.entry == "scaled_matmul" and read.args[:6] == ["A", "B", "C", "M", "N", "K"]
    assert read.defines == {"BLOCK_M": 128, "BLOCK_N": 64, "BLOCK_K": 32, "PROGRAMS": "SM_COUNT"}
    assert (read.triton.num_warps, read.triton.num_stages) == (8, 2)
    assert grid_at(read, M=4096, N=4096, SM_COUNT=132) == 132  # min(SMs, tiles)
    assert grid_at(read, M=256, N=128, SM_COUNT=132) == 4


def test_an_fp8_wrapper_with_float_scales_and_an_fp16_c_reads_and_is_verified(runner, monkeypatch):
    """FP8 inference's wrapper (pytorch-labs/applied-ai's split-K FP8 kernels are this shape): E4M3 in,
    an FP16 C from torch.zeros added into atomically, the per-tensor scales passed as the floats 1.0.
    The floats are read as constants Triton types fp32, as it types a Python float; a "=1" would be an
    i32, and the kernel would multiply its sums by the bits of an integer."""
    from worker.compile import triton_build

    desc = wrapped("split_k_fp8", compute_mode="fp8", output="fp16")
    call = runner.device.wrapper_call(desc)
    assert call["args"][-2:] == ["=1.0", "=1.0"] and call["c_starts_zero"] is True
    read = desc.with_wrapper_call(call)
    assert read.precision.label() == "fp8->fp16" and read.form.key() == "rrr+ab"
    types = triton_build.types(resolve(read, {}, H100_FIGURES, "job"))
    assert types[:3] == ["*fp8e4nv", "*fp8e4nv", "*fp16"] and types[-2:] == ["fp32", "fp32"]
    assert types[3:6] == ["i32", "i32", "i32"] and types[7] == "i32"  # M, N, K and the unit stride "=1"
    monkeypatch.setenv("FAKE_GPU_COMPUTE_CAPABILITY", "9.0")  # FP8's tensor cores
    runner = CpuRunner()
    for size in [(64, 64, 512), (100, 103, 997)]:
        out = runner.run_case(Case(0, desc.name, *size, 7, KernelChoice(desc, {}, "job")), POLICY)
        assert out.verified and out.env["precision"]["output"] == "float16", out.error
        assert out.env["launch"]["c_starts_zero"] is True
    # The cubin's parameters are known by their sizes alone: the two 4-byte scales go as fp32 1.0s (as the int
    # 1, their bits would be 1.4e-45 and C all but zero on a GPU, which the CPU double would not show).
    assert [how for role, how in runner.device.compiled[-1].plan.passing if role == "=1.0"] == ["f32", "f32"]


def test_a_wrapper_s_c_type_is_the_c_timed_where_an_output_gives_it(runner, monkeypatch):
    """An FP8 wrapper making an FP16 C, described with FP8's default BF16 C, would be timed storing
    another type than it does at home: refused, naming the output that fits, before anything is compiled.
    Where no output gives the wrapper's type, the description's own C stands (as before)."""
    fp8 = wrapped("split_k_fp8", compute_mode="fp8")
    call = runner.device.wrapper_call(fp8)
    assert call["c_type"] == "float16"
    with pytest.raises(ValueError, match=r'makes C in float16, and this description\'s C is bfloat16 \(compute_mode '
                                         r'fp8, output "input"\): say "output": "fp16"'):
        fp8.with_wrapper_call(call)
    monkeypatch.setenv("FAKE_GPU_COMPUTE_CAPABILITY", "9.0")
    with pytest.raises(ValueError, match='say "output": "fp16"'):  # the case fails with that reason, as any unread wrapper
        CpuRunner().run_case(Case(0, fp8.name, 64, 64, 256, 7, KernelChoice(fp8, {}, "job")), POLICY)
    # an FP16 C for BF16 inputs: no output writes it (no cuBLAS call to time it beside); BF16's C stands
    bf16 = wrapped("persistent_matmul", compute_mode="bf16")
    assert bf16.with_wrapper_call(runner.device.wrapper_call(bf16)).precision.output_type == "bfloat16"
    assert wrapped("matmul").with_wrapper_call(runner.device.wrapper_call(wrapped("matmul"))).output == "input"


def test_a_wrapper_that_makes_c_with_torch_zeros_has_c_zeroed_before_each_call(runner):
    """torch.zeros, not torch.empty: the launch read off it says C starts at zero, and so does the
    description it becomes (the runner then zeroes C before each call, in its time)."""
    zeroed = runner.device.wrapper_call(wrapped("zeroed_matmul"))
    assert zeroed["c_starts_zero"] is True
    assert "c_starts_zero" not in runner.device.wrapper_call(wrapped("matmul"))
    assert wrapped("zeroed_matmul").with_wrapper_call(zeroed).c_starts_zero
    assert not wrapped("matmul").with_wrapper_call(runner.device.wrapper_call(wrapped("matmul"))).c_starts_zero


@pytest.mark.parametrize("wrapper", ["matmul", "persistent_matmul"])
def test_a_wrapped_kernel_is_checked_and_timed_as_the_kernel_it_launches(runner, wrapper):
    desc = wrapped(wrapper)
    for m, n, k in [(96, 80, 64), (100, 130, 70)]:
        out = runner.run_case(Case(0, desc.name, m, n, k, 3, KernelChoice(desc, {}, "job")), POLICY)
        assert out.verified and out.gflops, out.error
        assert out.env["launch"]["entry"] == "scaled_matmul"


def test_a_word_constexpr_is_read_off_the_wrapper_and_compiled_in_as_that_word(runner, tmp_path):
    # Triton's tutorial passes ACTIVATION="" (or "leaky_relu"): a word, not a number, compiled in.
    desc = wrapped("matmul_with_activation")
    read = desc.with_wrapper_call(runner.device.wrapper_call(desc))
    assert read.triton.string_constexprs == {"ACTIVATION": ""}
    assert read.defines == {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32}
    out = runner.run_case(Case(0, desc.name, 96, 80, 64, 3, KernelChoice(desc, {}, "job")), POLICY)
    assert out.verified and out.gflops, out.error  # without the word, Triton refuses: "ACTIVATION ... no value"
    # The word reaches the compiler: "relu" builds another kernel than "", and a word over a define is refused.
    cfg = Settings(GEMMWATCH_KERNEL_CACHE_DIR=str(tmp_path), GEMMWATCH_COMPILE_TIMEOUT_S="300")
    cubins, keys = [], []
    for word in ("", "relu"):
        chosen = read.model_copy(update={"triton": read.triton.model_copy(update={"string_constexprs": {"ACTIVATION": word}})})
        launch = resolve(chosen, {}, H100_FIGURES, "job")
        cubins.append(compiler.compile_launch(launch, "9.0", cfg).cubin_path.read_bytes())
        keys.append(kernel_args.loaded_key(launch))
    assert cubins[0] != cubins[1] and keys[0] != keys[1]  # two cubins, and a device keeps them apart
    twice = {**read.model_dump(mode="json", exclude_none=True), "triton": {"string_constexprs": {"BLOCK_M": "64"}}}
    with pytest.raises(ValidationError, match="BLOCK_M: in both defines and triton.string_constexprs"):  # by hand
        KernelDescription.model_validate(twice)
    with pytest.raises(ValueError, match="BLOCK_M: in both defines and triton.string_constexprs"):  # over the wrapper's
        wrapped("matmul_with_activation", triton={"string_constexprs": {"BLOCK_M": "64"}}).with_wrapper_call(
            runner.device.wrapper_call(desc))


def test_a_word_that_could_be_code_is_refused_where_the_wrapper_is_read(runner):
    desc = wrapped("matmul_with_quoted_activation")
    with pytest.raises(ValueError, match="triton.string_constexprs.ACTIVATION: String should match pattern"):
        desc.with_wrapper_call(runner.device.wrapper_call(desc))


@pytest.mark.parametrize(("wrapper", "said"), [
    ("twice", "made 2 Triton launches"),
    ("nothing_launched", "made 0 Triton launches"),
    ("size_as_number", "uses the size M as a number"),
    ("launch_by_size", r"the launch launch_by_size\(a, b\) makes depends on its sizes: where M > 1024 taken as True "
                       "it differs from where M > 1024 taken as False"),
    ("c_not_returned", "does not return the C it allocated"),
    ("no_such_wrapper", "no_such_wrapper is not a name of the file"),
])
def test_what_cannot_be_read_as_one_launch_is_refused_in_the_job_s_terms(runner, wrapper, said):
    with pytest.raises(CompileRefused, match=said) as refused:
        runner.device.wrapper_call(wrapped(wrapper))
    assert f"{wrapper} in wrappers.py" in str(refused.value)


def test_a_wrapper_that_compares_a_size_but_launches_the_same_either_way_is_read(runner):
    """Each outcome of `M > 1024` is tried; both make matmul's launch, so that is the wrapper's launch."""
    assert runner.device.wrapper_call(wrapped("branch_with_one_launch")) == runner.device.wrapper_call(
        wrapped("matmul"))


def test_a_wrapper_s_own_error_says_on_which_outcome_of_its_comparisons_it_came(runner):
    """NotImplementedError where M > 4096 is taken as True: the error, and the outcome that led to it."""
    with pytest.raises(CompileRefused, match=r"(?s)calling refuses_large\(a, b\) in wrappers.py failed:.*"
                                             r"NotImplementedError: M over 4096 is not tiled\n\(where M > 4096 taken "
                                             r"as True\)"):
        runner.device.wrapper_call(wrapped("refuses_large"))


def test_a_workspace_the_wrapper_makes_beside_c_is_the_kernel_s_zeroed_before_each_call(runner):
    """alfin3/triton-kernel-opt's lock-per-tile split-K: `locks = torch.zeros(cdiv(M, 64) * cdiv(N, 64),
    dtype=torch.int32)` beside C is read as the workspace arg "zeros(int32, ...)", the count an expression of the
    sizes. Each call of the case meets it at zero, though every call leaves it dirty (the double's kernel fills
    it, as a kernel's partial sums would)."""
    call = runner.device.wrapper_call(wrapped("locked_split_k"))
    kind, count = workspace_of(call["args"][3])
    assert kind == "int32" and call["c_starts_zero"] is True
    assert kernel_expr.evaluate(count, {"M": 1000, "N": 1003}) == 16 * 16
    assert kernel_expr.evaluate(count, {"M": 64, "N": 65}) == 2
    desc = wrapped("locked_split_k")
    for m, n, k in [(96, 80, 64), (100, 130, 70)]:
        out = runner.run_case(Case(0, desc.name, m, n, k, 3, KernelChoice(desc, {}, "job")), POLICY)
        assert out.verified and out.gflops, out.error
        assert "zeros(int32" in out.env["launch"]["params"][3], out.env["launch"]["params"]
    # One case's call, made three times as a timing loop makes it: each meets the workspace at zero.
    run_variant, _ = runner.calls(Case(0, desc.name, 100, 130, 70, 3, KernelChoice(desc, {}, "job")))
    for _ in range(3):
        run_variant()
    met = [seen for kernel in runner.device.compiled for seen in kernel.workspaces_met]
    assert len(met) > 4 and {(size, dtype) for size, dtype, _ in met} == {(2 * 2, "int32"), (2 * 3, "int32")}
    assert not any(dirty for _, _, dirty in met), "a call met its workspace as the call before left it"


def test_a_workspace_made_by_torch_empty_is_refused(runner):
    with pytest.raises(CompileRefused, match="makes a tensor beside C with torch.empty"):
        runner.device.wrapper_call(wrapped("locks_left_uncleared"))


@pytest.mark.parametrize(("arg", "said"), [
    ("zeros(int16, M)", "a workspace is zeros.TYPE, COUNT., TYPE one of int8"),
    ("zeros(int32, os.getpid())", "a workspace is zeros"),
    ("zeros(int32, Q * 2)", "args.3.*Q"),
])
def test_a_workspace_arg_gemmwatch_cannot_give_is_refused_at_the_door(arg, said):
    with pytest.raises(ValidationError, match=said):
        KernelDescription.model_validate({
            "name": "locked", "language": "triton", "source": "wrappers.py", "entry": "split_k_locked",
            "files": {"wrappers.py": (REPO / "wrappers.py").read_text()}, "compute_mode": "fp16",
            "args": ["A", "B", "C", arg, "M", "N", "K", "lda", "=1", "ldb", "=1", "ldc", "=1"],
            "defines": {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "SPLIT_K": 4},
            "grid": {"x": "cdiv(M, 64) * cdiv(N, 64)", "y": "4"}, "c_starts_zero": True})


def test_each_workspace_type_is_allocated_and_typed_at_its_own_width_and_the_confined_copy_names_the_same():
    """One table gives each workspace type its storage and its Triton pointer; the confined process keeps its own
    list (it imports no core module), which must not drift from the table."""
    from worker.compile import triton_wrapper
    assert triton_wrapper._WORKSPACE_TYPES == tuple(WORKSPACE_TYPES)
    for kind, (storage, pointer) in WORKSPACE_TYPES.items():
        assert numpy.dtype(storage).itemsize * 8 == int(re.sub(r"\D", "", pointer)), kind
        assert pointer.lstrip("*").rstrip("0123456789") in ("i", "u", "fp", "bf"), kind
        assert (pointer[1] == "u") == kind.startswith("uint"), kind


def test_a_launcher_is_handed_no_workspace():
    with pytest.raises(ValidationError, match="a workspace is the runner's, handed to a kernel it launches"):
        KernelDescription.model_validate({"name": "l", "source": "k.cu", "files": {"k.cu": "x"}, "launcher": "run",
                                          "compiler": "nvcc", "args": ["A", "B", "C", "zeros(int32, M)", "M", "N", "K"]})


def test_a_workspace_past_gemmwatch_s_bound_fails_its_case_saying_so(runner):
    by_hand = wrapped("locked_split_k").with_wrapper_call(runner.device.wrapper_call(wrapped("locked_split_k")))
    huge = by_hand.model_copy(update={"args": [*by_hand.args[:3], "zeros(int32, M * N * K * 1024)", *by_hand.args[4:]]})
    with pytest.raises(ValueError, match=r"the workspace zeros\(int32, M \* N \* K \* 1024\) has 503316480 elements at "
                                         r"96x80x64; gemmwatch gives 1 to 268,435,456 of int32 \(1 GiB\)"):
        runner.run_case(Case(0, huge.name, 96, 80, 64, 3, KernelChoice(huge, {}, "job")), POLICY)


def test_a_case_of_a_wrapper_that_cannot_be_read_fails_with_that_reason(runner):
    desc = wrapped("twice")
    with pytest.raises(CompileRefused, match="twice in wrappers.py: twice.a, b. made 2 Triton launches"):
        runner.run_case(Case(0, desc.name, 64, 64, 64, 3, KernelChoice(desc, {}, "job")), POLICY)


def test_a_wrapper_that_wants_more_than_a_and_b_is_named_by_the_call_made_at_home(runner):
    """alfin3/triton-kernel-opt's wrappers take their tiles, C's type and launch options, none defaulted:
    the description gives the call as its README writes it, a and b standing for the matrices, every other
    value a literal or a name of the file (torch.float16). What the call passes is what the launch carries."""
    desc = wrapped("tiled_matmul(a, b, 128, 64, block_k=32, dtype_out=torch.float16, relu=True, num_stages=4, "
                   "num_warps=8)")
    call = runner.device.wrapper_call(desc)
    assert call["defines"] == {"BLOCK_M": 128, "BLOCK_N": 64, "BLOCK_K": 32}
    assert call["triton"] == {"num_warps": 8, "num_stages": 4, "string_constexprs": {"ACTIVATION": "relu"}}
    assert call["c_type"] == "float16"
    other = runner.device.wrapper_call(wrapped("tiled_matmul(a, b, 64, 32, 16, torch.float16, False, 2, 4)"))
    assert other["defines"] == {"BLOCK_M": 64, "BLOCK_N": 32, "BLOCK_K": 16}
    assert other["triton"] == {"num_warps": 4, "num_stages": 2, "string_constexprs": {"ACTIVATION": ""}}
    read = desc.with_wrapper_call(call)
    assert read.entry == "scaled_matmul" and read.args[:3] == ["A", "B", "C"]
    # checked and timed as the kernel it launches (without relu: its C would not be A·B)
    for m, n, k in [(96, 80, 64), (100, 130, 70)]:
        out = runner.run_case(Case(0, desc.name, m, n, k, 3, KernelChoice(wrapped(
            "tiled_matmul(a, b, 64, 64, 32, torch.float16, False, 3, 4)"), {}, "job")), POLICY)
        assert out.verified and out.gflops, out.error


def test_a_wrapper_a_class_makes_is_named_by_both_calls(runner):
    """`Matmul(mode="wide")(a, b)`: the instance's __call__ is the wrapper, its defaults as at home."""
    wide = runner.device.wrapper_call(wrapped("Matmul(mode='wide')(a, b, block_k=64)"))
    assert wide["defines"] == {"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 64}
    square = runner.device.wrapper_call(wrapped("Matmul()(a, b)"))
    assert square["defines"] == {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32}
    with pytest.raises(CompileRefused, match=r"(?s)calling Matmul\(mode='tall'\)\(a, b\) in wrappers.py failed:.*"
                                             r"NotImplementedError: mode 'tall': one of \['square', 'wide'\]"):
        runner.device.wrapper_call(wrapped("Matmul(mode='tall')(a, b)"))


@pytest.mark.parametrize(("call", "said"), [
    ("missing(a, b)", "missing is not a name of the file"),
    ("tiled_matmul(a, b, 64, 64, 32, torch.float99, False, 3, 4)", "torch.float99"),
    ("tiled_matmul(a, b, 64, 64, 32, tl.no_such_type, False, 3, 4)", "tl has no no_such_type"),
    ("tiled_matmul(a, b, 64, 64, 32)", r"missing 4 required positional arguments"),
])
def test_a_call_the_file_cannot_answer_is_refused_naming_what(runner, call, said):
    with pytest.raises(CompileRefused, match=said):
        runner.device.wrapper_call(wrapped(call))


@pytest.mark.parametrize(("call", "said"), [
    ("tiled_matmul(a)", "a and b .the matrices. each once, in the last call's arguments"),
    ("tiled_matmul(a, b, a)", "a and b .the matrices. each once"),
    ("Matmul(a)(b)", "a and b .the matrices. each once, in the last call's arguments"),
    ("tiled_matmul(a, b, *tiles)", r"not \*args or \*\*kwargs"),
    ("tiled_matmul(a, b, block_m=__import__('os').getpid())", "a wrapper's argument is a literal"),
    ("tiled_matmul(a, b, dtype_out=torch.__class__)", "a name with a double underscore is not followed"),
    ("torch.__class__.__subclasses__()(a, b)", "a name with a double underscore is not followed"),
    ("tiled_matmul(a, b, dtype_out=a.dtype)", "a and b are passed as they are"),
    ("(lambda a, b: a)(a, b)", "a dotted name of the wrapper's file"),
    ("tiled_matmul(a, b", "neither a function's name nor a Python call"),
    ("tiled_matmul", None),
    ("f(a, b, x=" + "1" * 1000 + ")", "at most 1000"),
])
def test_a_wrapper_call_gemmwatch_cannot_follow_is_refused_at_the_door(call, said):
    """The call is parsed, never evaluated, when the job is posted: a try past the guard (a call inside an
    argument, a dunder, a lambda) is refused there, saying what of it; a plain name is still f(a, b)."""
    if said is None:
        assert wrapped(call).wrapper == call
        return
    with pytest.raises(ValidationError, match=said):
        wrapped(call)


def test_the_confined_process_follows_no_dunder_even_in_a_plan_it_is_handed():
    """core/description/wrapper_call.py refuses the text; the compile process, handed a plan, refuses too."""
    import types

    from worker.compile import triton_wrapper

    module = types.ModuleType("job")
    module.torch = triton_wrapper.Torch([])
    with pytest.raises(triton_wrapper.Unsupported, match="double underscore"):
        triton_wrapper._named(module, ["torch", "__class__"])
    assert triton_wrapper._named(module, ["torch", "float16"]) == "float16"


def test_a_helion_kernel_is_named_not_called():
    with pytest.raises(ValidationError, match="a Helion kernel is named, not called"):
        KernelDescription.model_validate({"name": "h", "language": "helion", "source": "m.py", "files": {"m.py": "x"},
                                          "wrapper": "matmul(a, b)", "compute_mode": "fp16"})


def test_a_description_names_a_wrapper_or_the_kernel_never_both():
    with pytest.raises(ValidationError, match="entry, grid: the worker reads them off matmul's launch"):
        wrapped("matmul", entry="scaled_matmul", grid={"x": "1"})
    with pytest.raises(ValidationError, match="wrapper: a Python wrapper for a Triton kernel"):
        KernelDescription.model_validate({"name": "k", "source": "k.cu", "files": {"k.cu": "x"}, "entry": "k",
                                          "block": [16, 16], "grid": {"tile": [16, 16]}, "wrapper": "matmul"})
    with pytest.raises(ValidationError, match="a wrapper's C is the row-major M x N matrix it allocates"):
        wrapped("matmul", layout={"A": "row", "B": "row", "C": "col"})


def test_a_kernels_folder_with_wrappers_through_the_api_and_a_worker(tmp_path, pg_url, redis_url, start_worker,
                                                                    shared_kernel_cache):
    cfg = make_settings(tmp_path, pg_url, redis_url)
    upgrade_database(cfg)
    client = make_client(cfg)
    start_worker(cfg, GEMMWATCH_KERNEL_CACHE_DIR=str(shared_kernel_cache))
    sources = [d.model_dump(mode="json", exclude_none=True) for d in load_folder(REPO)]
    resp = client.post("/api/jobs", json={"sources": sources, "sizes": [[96, 80, 64]]})
    assert resp.status_code == 202, resp.text
    job = wait_for_job(client, resp.json()["id"])
    assert job["status"] == "succeeded", job["error"]
    assert sorted(r["variant"] for r in job["results"] if r["verified"]) == ["wrapped_matmul_fp16",
                                                                               "wrapped_persistent_fp16"]


@pytest.mark.parametrize(("wrapper", "said"), [("forged_grid", "grid.x"), ("forged_role", "args")])
def test_a_size_forged_from_the_stand_in_s_class_is_refused_where_it_is_read(runner, wrapper, said, tmp_path):
    """A try past the guard: the wrapper builds its own 'size' (the stand-in's class, by type()) holding code
    for the grid, or a role gemmwatch has none of. What it recorded is data; the description's rules refuse
    it (a grid expression calls no function but cdiv/min/max, an argument is one of the known roles), and
    nothing ran."""
    desc = wrapped(wrapper)
    with pytest.raises(ValueError, match=said) as refused:
        desc.with_wrapper_call(runner.device.wrapper_call(desc))
    assert "the launch its wrapper" in str(refused.value)
    assert not Path("/tmp/gemmwatch-forged").exists()
    with pytest.raises(ValueError):
        runner.run_case(Case(0, desc.name, 64, 64, 64, 3, KernelChoice(desc, {}, "job")), POLICY)


def test_a_hand_written_triton_grid_is_held_to_the_expression_language_at_the_door():
    """The same rule for a grid written by hand: its names wait for the file, its form does not."""
    with pytest.raises(ValidationError, match="grid.x: .*the functions are cdiv"):
        KernelDescription.model_validate({"name": "t", "language": "triton", "source": "k.py", "files": {"k.py": "x"},
                                          "entry": "k", "args": ["A", "B", "C", "M", "N", "K"],
                                          "grid": {"x": "__import__('os').getpid()"}})


# Triton's own tutorials, files unchanged (not vendored: .devkit/repos/triton-tutorials or $TRITON_TUTORIALS
# holds 03-matrix-multiplication.py and 09-persistent-matmul.py as Triton ships them).
TUTORIALS = Path(os.environ.get("TRITON_TUTORIALS", Path(__file__).resolve().parent.parent / ".devkit" / "repos"
                                / "triton-tutorials"))


@pytest.mark.skipif(not (TUTORIALS / "09-persistent-matmul.py").is_file(),
                    reason=f"Triton's tutorials are not here ({TUTORIALS}): they are not vendored into the tests")
@pytest.mark.parametrize(("name", "wrapper"), [("tutorial_matmul_fp16", "matmul"),
                                               ("persistent_matmul_fp16", "matmul_persistent"),
                                               ("persistent_matmul_fp8", "matmul_persistent")])
def test_triton_s_tutorials_read_through_their_own_wrappers_as_their_manifest_describes_them(runner, name, wrapper):
    manifest = json.loads((FIXTURES.parent.parent / "docs" / "examples" / "triton-lang-triton.gemmwatch.json").read_text())
    kernel = next(k for k in manifest["kernels"] if k["name"] == name)
    file = kernel["source"].rsplit("/", 1)[-1]
    by_hand = KernelDescription.model_validate({**kernel, "source": file, "files": {file: (TUTORIALS / file).read_text()}})
    given = by_hand.model_dump(mode="json", exclude_none=True, exclude={"entry", "args", "grid", "defines", "triton"})
    desc = KernelDescription.model_validate({**given, "wrapper": wrapper})
    read = desc.with_wrapper_call(runner.device.wrapper_call(desc))
    assert (read.entry, read.args, read.defines, read.form) == (by_hand.entry, by_hand.args, by_hand.defines, by_hand.form)
    words = (by_hand.triton.string_constexprs if by_hand.triton else {})
    assert (read.triton.string_constexprs if read.triton else {}) == words
    for m, n, bm, bn in [(4096, 4096, 128, 256), (1000, 1003, 64, 64), (8192, 1024, 128, 128)]:
        scope = {"M": m, "N": n, "K": 64, "BLOCK_SIZE_M": bm, "BLOCK_SIZE_N": bn, "SM_COUNT": 132}
        assert grid_at(read, **scope) == grid_at(by_hand, **scope)


HELION = FIXTURES / "helion_generated"


def helion_generated(wrapper: str, **changes) -> KernelDescription:
    """Triton code as Helion generates it (tests/fixtures/helion_generated), given by its wrapper."""
    return KernelDescription.model_validate({
        "name": f"helion_{wrapper}", "language": "triton", "source": "matmul.py", "wrapper": wrapper,
        "files": {"matmul.py": (HELION / "matmul.py").read_text()}, "compute_mode": "fp16", **changes})


def test_helion_s_generated_code_is_read_through_its_launcher_as_one_launch(runner):
    """`_launcher(kernel, grid, *args, num_warps=...)`, the launcher's default imported from helion.runtime
    (never loaded: a stand-in launches as kernel[grid] does); its hints, unevaluated under the file's
    `from __future__ import annotations`, name types it never imports."""
    call = runner.device.wrapper_call(helion_generated("matmul_dynamic"))
    assert call["entry"] == "_helion_matmul_dynamic"
    assert call["args"] == ["A", "B", "C", "M", "N", "K", "lda", "=1", "ldb", "=1", "ldc", "=1"], call["args"]
    assert call["triton"] == {"num_warps": 4, "num_stages": 2}
    read = helion_generated("matmul_dynamic").with_wrapper_call(call)
    assert [grid_at(read, M=m, N=n, K=64) for m, n in [(64, 64), (100, 33)]] == [4, 8]
    for m, n, k in [(64, 64, 64), (100, 130, 70)]:
        out = runner.run_case(Case(0, "helion_matmul_dynamic", m, n, k, 3,
                                   KernelChoice(helion_generated("matmul_dynamic"), {}, "job")), POLICY)
        assert out.verified and out.gflops, out.error


def test_a_kernel_with_its_sizes_compiled_in_needs_them_named_and_runs_at_those_alone(runner):
    """Helion's static_shapes: no size among the launch's arguments, a grid of numbers. Without "sizes" it
    is refused with the reason; with them a case at that size is checked and timed, one at any other is
    not run (at 96 x 96 x 96 this kernel would read and write past its 64 x 64 matrices)."""
    plain = helion_generated("matmul")
    call = runner.device.wrapper_call(plain)
    assert (call["args"], call["grid"]["x"]) == (["A", "B", "C"], "4")
    with pytest.raises(ValueError, match=r'sizes are compiled in .*"sizes": \["4096"\]'):
        plain.with_wrapper_call(call)
    with pytest.raises(ValueError, match="sizes are compiled in"):
        runner.run_case(Case(0, plain.name, 64, 64, 64, 3, KernelChoice(plain, {}, "job")), POLICY)
    fixed = helion_generated("matmul", sizes=["64"])
    out = runner.run_case(Case(0, fixed.name, 64, 64, 64, 3, KernelChoice(fixed, {}, "job")), POLICY)
    assert out.verified and out.gflops, out.error
    other = runner.run_case(Case(0, fixed.name, 96, 96, 96, 3, KernelChoice(fixed, {}, "job")), POLICY)
    assert other.not_applicable and other.gflops is None and not other.verified
    assert "runs at 64×64×64 only" in other.error and "96×96×96" in other.error


def test_a_case_at_a_size_the_kernel_does_not_run_at_never_reads_its_wrapper(runner):
    """Not applicable is decided from the description alone: a wrapper that cannot be read (here, one
    the file lacks) fails the case at the size it runs at, and is never called at another."""
    missing = helion_generated("no_such_wrapper", sizes=["64"])
    skipped = runner.run_case(Case(0, missing.name, 96, 96, 96, 3, KernelChoice(missing, {}, "job")), POLICY)
    assert skipped.not_applicable and "runs at 64×64×64 only" in skipped.error
    with pytest.raises(Exception, match="no_such_wrapper"):
        runner.run_case(Case(0, missing.name, 64, 64, 64, 3, KernelChoice(missing, {}, "job")), POLICY)


@pytest.mark.parametrize(("sizes", "fixed"), [(["4096"], {(4096, 4096, 4096)}),
                                              (["1000x1003x997", "8"], {(1000, 1003, 997), (8, 8, 8)})])
def test_a_description_s_sizes_are_cubes_or_m_x_n_x_k(sizes, fixed):
    assert helion_generated("matmul", sizes=sizes).fixed_sizes == fixed
    assert helion_generated("matmul").fixed_sizes is None


@pytest.mark.parametrize("sizes", [[], ["0"], ["64x64"], ["64x64x64x2"], ["-1"], ["1234567"], ["64 x 64 x 64"]])
def test_a_size_that_is_not_one_is_refused_by_the_schema(sizes):
    with pytest.raises(ValidationError, match="sizes"):
        helion_generated("matmul", sizes=sizes)
