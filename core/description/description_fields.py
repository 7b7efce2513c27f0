"""The parts a kernel description is made of (core/description/kernel_description.py): the names an
expression may read, a kernel's arguments in the repository's own words, and the small records of its
grid, tunables, tensor maps, operand layouts and Triton options. Each carries its own checks, so a part
that is wrong is refused by its field's name."""

import re
from typing import Annotated, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, StrictInt, StringConstraints, field_validator, model_validator

from core.description import kernel_expr

# Names an expression may read, beside the kernel's own tunables and defines.
PROBLEM_NAMES = ("M", "N", "K", "BATCH")
DEVICE_NAMES = ("SM_COUNT", "SMEM_PER_SM", "SMEM_PER_BLOCK", "REGS_PER_SM", "MAX_THREADS_PER_SM", "L2_BYTES", "CC")
RESERVED = frozenset(PROBLEM_NAMES + DEVICE_NAMES)

# The arguments a GEMM kernel may take, in the order it declares them (the default: cuBLAS's
# order, which most kernel repositories follow). Dimensions and leading dimensions are passed as
# 32-bit ints, alpha and beta as floats, A, B and C as pointers to the matrices in `layout`.
# A_map, B_map and C_map: a TMA tensor map over A, B or C (`tensor_maps`), by address or by value
# (`const __grid_constant__ CUtensorMap`), as the kernel declares it.
# D: where a kernel that reads C writes its result (D = alpha*A*B + beta*C, cuBLASLt's and CUTLASS's
# convention): gemmwatch passes its C for both, so the kernel computes in place, as cuBLASLt allows
# when C and D have one layout; a kernel that names D names C too.
# stream: a launcher's cudaStream_t (the stream the runner times on); launchers only.
# batch: the number of matrices of a batched call; stride_a, stride_b, stride_c: the elements
# between one matrix of the batch and the next (packed: rows x cols).
ArgName = Literal["M", "N", "K", "alpha", "A", "B", "beta", "C", "D", "lda", "ldb", "ldc", "A_map", "B_map", "C_map", "stream",
                  "batch", "stride_a", "stride_b", "stride_c", "scale_A", "scale_B"]
DEFAULT_ARGS: tuple[ArgName, ...] = ("M", "N", "K", "alpha", "A", "B", "beta", "C")
# FP8's block scales, A's then B's: FP32 arrays a kernel with `scales` takes (core/description/precision.py).
SCALE_ARGS: tuple[ArgName, ...] = ("scale_A", "scale_B")
# What names C among a kernel's arguments: its pointer, its tensor map, or D where C is read too.
C_ARGS: frozenset[str] = frozenset({"C", "C_map", "D"})


def names_no_c(args) -> bool:
    """Arguments that hand the kernel no C: a launcher that makes C itself and returns it (the
    description allows it for a launcher PyTorch builds; the worker hands it the case's C there)."""
    return not C_ARGS & set(args)
# A parameter that is none of the GEMM's own, said in the repository's words: "null", a pointer passed
# as nullptr (a debug buffer a runner passes when it times); "ignored", one the kernel never reads
# (a beta it leaves unused: zero in its type, null for a pointer; the form is then the one the other
# args imply); "=2", "=0.5", a constant of the parameter's own type; "=K * 4", an integer computed for
# each case, in the language of the description's other expressions (core/description/kernel_expr.py),
# from M, N, K, the GPU's figures and the kernel's constants (a byte stride its repository's main
# passes, say). Any of them may appear more than once.
FILLERS = ("null", "ignored")
CONSTANT_PATTERN = r"^=-?[0-9]{1,18}(\.[0-9]{1,18})?([eE][-+]?[0-9]{1,3})?$"
ArgConstant = Annotated[str, StringConstraints(pattern=CONSTANT_PATTERN)]
# Its form only here; what it may read is checked with the description's other expressions.
ARG_EXPRESSION_PATTERN = r"^=[A-Za-z0-9_ +*/%<>=!(),-]{1,300}$"
ArgExpression = Annotated[str, StringConstraints(pattern=ARG_EXPRESSION_PATTERN)]
# "zeros(int32, cdiv(M, 128) * cdiv(N, 128))": a workspace, a buffer of that many elements of that type
# (the count an expression as above) set to zero before each call, in its time, as the wrapper's
# `torch.zeros` of locks or partial sums is at home (a split-K kernel's per-tile locks, stream-K's).
# Each type a workspace may hold, with the NumPy dtype that carries its bits (bf16's are all zero at first, so
# uint16 serves) and Triton's pointer to it: the runner allocates by the one, the Triton build types by the other.
WORKSPACE_TYPES = {"int8": ("int8", "*i8"), "uint8": ("uint8", "*u8"), "int32": ("int32", "*i32"),
                   "uint32": ("uint32", "*u32"), "int64": ("int64", "*i64"), "float16": ("float16", "*fp16"),
                   "bfloat16": ("uint16", "*bf16"), "float32": ("float32", "*fp32")}
WORKSPACE_PATTERN = rf"^zeros\(({'|'.join(WORKSPACE_TYPES)}), ([A-Za-z0-9_ +*/%(),-]{{1,300}})\)$"
ArgWorkspace = Annotated[str, StringConstraints(pattern=WORKSPACE_PATTERN)]
Arg = ArgName | Literal["null", "ignored"] | ArgConstant | ArgExpression | ArgWorkspace


def workspace_of(arg: str) -> tuple[str, str] | None:
    """A workspace arg's element type and count expression ("int32", "cdiv(M, 128)"); None for any other arg."""
    found = re.fullmatch(WORKSPACE_PATTERN, arg)
    return (found.group(1), found.group(2)) if found else None


def hook_zeroes(config: dict, args) -> list[str] | None:
    """The args a @triton.autotune configuration's pre_hook zeroes before each launch, as the compile process read
    it (worker/compile/triton_module.pre_hook_of: {"zeroes": [positions among the kernel's plain parameters]});
    [] for a configuration without one, None for a hook that was not read so. A position past the args is
    named as such, an arg of no role gemmwatch zeroes."""
    hook = config.get("pre_hook")
    if not hook:
        return []
    if not isinstance(hook, dict) or "zeroes" not in hook:
        return None
    return [args[i] if i < len(args) else f"parameter {i}" for i in hook["zeroes"]]


def zeroed_by_runner(arg: str) -> bool:
    """An arg the runner itself sets to zero before each call, where asked: C (C_ARGS) where c_starts_zero, and a
    workspace, always."""
    return arg in C_ARGS or workspace_of(arg) is not None


def hook_zeroes_c(config: dict, args) -> bool:
    """Whether a configuration's pre_hook, as read, zeroes C: the runner then zeroes it before each call."""
    return any(arg in C_ARGS for arg in hook_zeroes(config, args) or ())


def is_filler(arg: str) -> bool:
    """A parameter the runner passes a value of its own for (FILLERS, "=constant", "=expression", a
    workspace "zeros(TYPE, COUNT)"): no role of the GEMM."""
    return arg in FILLERS or arg.startswith("=") or workspace_of(arg) is not None


def arg_refusal(arg: object) -> str | None:
    """Why an args entry is none of the forms an arg takes, in one sentence (the schema's union would
    say it three times, once per form); None for one it takes."""
    if not isinstance(arg, str):
        return f"{arg!r} is not a string"
    if arg in get_args(ArgName) or arg in FILLERS or re.fullmatch(CONSTANT_PATTERN, arg) \
            or re.fullmatch(ARG_EXPRESSION_PATTERN, arg) or workspace_of(arg):
        return None
    if arg.startswith("zeros"):
        return (f"{arg!r}: a workspace is zeros(TYPE, COUNT), TYPE one of {', '.join(WORKSPACE_TYPES)} and COUNT an "
                "integer expression over M, N, K, the GPU's figures and the kernel's constants (zeros(int32, "
                "cdiv(M, 128) * cdiv(N, 128)))")
    if arg.startswith("="):
        return (f"{arg!r}: after '=' comes a number (=2, =0.5) or an integer expression over M, N, K, the GPU's "
                "figures and the kernel's constants (=K * 4), in + - * // % and parentheses")
    return (f"{arg!r} is none of {' '.join(get_args(ArgName))}; a parameter that is none of the GEMM's is "
            '"null", "ignored", a constant ("=2") or an expression ("=K * 4") (docs/KERNELS.md, args)')


def integer_constant(arg: str) -> int | None:
    """The integer an "=n" arg writes out, with no point and no exponent ("=1", "=-2"); None for any
    other arg. "=1.0" is a float: Triton types a parameter by the Python value passed, 1 an i32 and
    1.0 an fp32, and a wrapper's 1.0 is read as "=1.0"."""
    return int(arg[1:]) if re.fullmatch(r"=-?[0-9]{1,18}", arg) else None


def is_expression(arg: str) -> bool:
    """An "=expression" arg, computed for each case (not a number written out)."""
    return arg.startswith("=") and re.fullmatch(CONSTANT_PATTERN, arg) is None


Identifier = Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")]
# A file of the kernel, by its path inside the kernels folder: plain components, no '.' or '..'
# (a file is found by resolving includes, never by climbing out of the folder).
_PLAIN_PATH = r"[A-Za-z0-9_][A-Za-z0-9_.+-]*(/[A-Za-z0-9_][A-Za-z0-9_.+-]*)*"
# A file's name may hold single spaces between its characters (salykova/sgemm.cu's kernels include
# "helper_cuda ptx.h"): a space is data in a path handed over as one argument, never a separator.
_FILE_COMPONENT = r"[A-Za-z0-9_][A-Za-z0-9_.+-]*( [A-Za-z0-9_.+-]+)*"
FilePath = Annotated[str, StringConstraints(pattern=rf"^{_FILE_COMPONENT}(/{_FILE_COMPONENT})*$", max_length=200)]
# A folder searched for includes: one of the kernel's folders, or "." for the kernels folder's root, as a
# repository's `-I .` (or LeetCUDA's `-I kernels/hgemm`, its folder) says it; the root is searched anyway.
IncludeDir = Annotated[str, StringConstraints(pattern=rf"^(\.|{_PLAIN_PATH})$", max_length=200)]
Expr = Annotated[str, StringConstraints(min_length=1, max_length=kernel_expr.MAX_LENGTH)]
Dim = StrictInt | Expr
# "sm_90a": the kernel is built for that target and runs on that compute capability only; "sm_80+":
# built for whichever GPU runs it, of compute capability 8.0 or later (an architecture's
# instructions, cp.async or mma.sync, that later GPUs keep).
Target = Annotated[str, StringConstraints(pattern=r"^sm_[0-9]{2,3}(a|\+)?$")]
# A C++ name a user writes to reach a function: namespaces, template arguments anywhere
# ("gemm::MMADirect<128, 64, __half>::Run"). Only these characters, so the name cannot end the
# expression it is pasted into (no parentheses, quotes, semicolons or comments); brackets balanced.
CALLABLE_PATTERN = r"^(::)?[A-Za-z_][A-Za-z0-9_:<>, +*-]*$"
# A launcher may add its parameter types, as C++ spells them, to say which of an overloaded name's
# functions is meant ("run_pingpong(void*, void*, void*, int, int, int)"): one pair of parentheses,
# at the end, around types alone (no parentheses inside: no function-pointer parameter).
LAUNCHER_PATTERN = r"^(::)?[A-Za-z_][A-Za-z0-9_:<>, +*-]*(\([A-Za-z0-9_:<>, *&]*\))?$"
# Bytes of all of one description's files together: a bound on the work a description can cause
# before any per-deployment limit (GEMMWATCH_MAX_SOURCE_BYTES, checked by the API) applies.
ABSOLUTE_MAX_BYTES = 4_000_000


class Tunable(BaseModel):
    model_config = ConfigDict(extra="forbid")

    values: list[StrictInt] = Field(min_length=1, max_length=16, description="the values an autotune job tries")
    default: StrictInt = Field(description="the value a bench job uses unless told otherwise")

    @model_validator(mode="after")
    def _default_is_a_value(self) -> "Tunable":
        if len(set(self.values)) != len(self.values):
            raise ValueError(f"values {self.values} repeat")
        if self.default not in self.values:
            raise ValueError(f"default {self.default} is not one of the values {self.values}")
        return self


class TileGrid(BaseModel):
    """One block per tile of C: the grid covers M x N with tiles of `tile` = [rows, cols]."""

    model_config = ConfigDict(extra="forbid")

    tile: list[Dim] = Field(min_length=2, max_length=2, description="[rows (along M), cols (along N)] of C per block")
    order: Literal["n_first", "m_first"] = Field(
        "n_first", description="n_first: blockIdx.x walks the tile columns (N), blockIdx.y the rows (M); "
                               "m_first: blockIdx.x walks the rows (M)")

    @field_validator("tile")
    @classmethod
    def _tile_ints_positive(cls, tile: list) -> list:
        if any(type(t) is int and not 1 <= t <= 65536 for t in tile):
            raise ValueError(f"tile {tile}: each of rows, cols must be in 1..65536")
        return tile


class ExprGrid(BaseModel):
    """A grid of any shape: x, y, z as expressions (a persistent grid: "SM_COUNT * 2")."""

    model_config = ConfigDict(extra="forbid")

    x: Dim
    y: Dim = 1
    z: Dim = 1

    @model_validator(mode="after")
    def _ints_launchable(self) -> "ExprGrid":
        """A grid of integers CUDA cannot launch is refused here, naming the field, not in the
        worker (issue 49, row 8: {"x": -5} was taken and failed the job with a traceback)."""
        for name, most in (("x", 2**31 - 1), ("y", 65535), ("z", 65535)):
            value = getattr(self, name)
            if type(value) is int and not 1 <= value <= most:
                raise ValueError(f"grid.{name} = {value}: CUDA launches 1..{most} blocks along {name}")
        return self


class TensorMap(BaseModel):
    """A TMA tensor map (Hopper's tensor memory accelerator) over one matrix as it lies in memory,
    made by the runner with cuTensorMapEncodeTiled (`A_map`, `B_map`, `C_map`), passed by address or
    by value as the kernel's parameter is declared."""

    model_config = ConfigDict(extra="forbid")

    box: list[Dim] = Field(min_length=2, max_length=2,
                           description="the box one copy moves: elements along the matrix's contiguous dimension "
                                       "(K for a row-major A, N for a row-major B), then lines across it; each 1..256")
    swizzle: Literal[0, 32, 64, 128] = Field(0, description="the shared-memory swizzle span in bytes (0: none); the "
                                                           "box's contiguous side may be at most this many bytes")
    zeros_when_absent: bool = Field(False, description="for a map taken by value (`const __grid_constant__ "
                                                       "CUtensorMap`): where the TMA cannot describe the matrix (a line "
                                                       "not a multiple of 16 bytes), pass 128 zero bytes, which the "
                                                       "kernel reads as \"no map\" and reaches the matrix through its "
                                                       "pointer (among args too); without it such a case is refused")


class BlockScales(BaseModel):
    """FP8 scales per block (core/description/precision.py): A's per row and 128-deep slab of K, B's per
    128 x 128 block or per column and slab, as DeepSeek-V3's recipe and cuBLASLt's block scaling have them."""

    model_config = ConfigDict(extra="forbid")

    A: Literal["1x128"]
    B: Literal["128x128", "1x128"]


class OperandLayouts(BaseModel):
    """Each operand's layout of its own: {"A": "row", "B": "col", "C": "row"} is B column-major
    beside a row-major A and C (what cuBLAS on row-major data calls TN)."""

    model_config = ConfigDict(extra="forbid")

    A: Literal["row", "col", "column"] = "row"
    B: Literal["row", "col", "column"] = "row"
    C: Literal["row", "col", "column"] = "row"


class SizeMultiple(BaseModel):
    """What each size must be a multiple of for the kernel to run there: a kernel that reads and
    writes whole tiles with no bounds checks ({"M": 128, "N": 256, "K": 64})."""

    model_config = ConfigDict(extra="forbid")

    M: StrictInt = Field(1, ge=1, le=65536)
    N: StrictInt = Field(1, ge=1, le=65536)
    K: StrictInt = Field(1, ge=1, le=65536)

    def misses(self, m: int, n: int, k: int) -> list[str]:
        """The sizes of (m, n, k) that are not such multiples, as "M 1000 (not a multiple of 128)"."""
        return [f"{name} {size} (not a multiple of {step})"
                for name, size, step in (("M", m, self.M), ("N", n, self.N), ("K", k, self.K)) if size % step]


# A Triton kernel's string tl.constexpr, as its repository passes one (the tutorial's
# ACTIVATION="leaky_relu", or "" for none): a word, no quotes or spaces, so it stays data.
ConstexprText = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_.+-]{0,64}$")]

# A value of a helion.Config: a number, a flag, a word ("persistent_blocked", "tensor_descriptor"), or a
# list of them, or a list of such lists (block_sizes [64, 128, 32], loop_orders [[1, 0]]).
HelionScalar = StrictInt | float | bool | ConstexprText
HelionValue = HelionScalar | Annotated[list[HelionScalar | Annotated[list[HelionScalar], Field(max_length=16)]],
                                       Field(max_length=32)]


class TritonOptions(BaseModel):
    """How a Triton kernel is compiled: its warps (the block is 32 of them), pipeline stages and the
    tl.constexpr values that are words, not numbers."""

    model_config = ConfigDict(extra="forbid")

    num_warps: Literal[1, 2, 4, 8, 16, 32] = Field(4, description="warps per program (block of 32 x num_warps threads)")
    num_stages: int = Field(3, ge=1, le=8, description="software pipeline stages of its loops")
    config: int | None = Field(None, ge=0, le=255, description=(
        "for a kernel under @triton.autotune: which of its configurations to run (by position in its list); "
        "left out, the worker runs the autotune once per case outside the timing and keeps the choice"))
    size_constexprs: list[Literal["M", "N", "K"]] = Field(default_factory=list, max_length=3, description=(
        "tl.constexpr parameters that are the problem's sizes, named as the sizes (DeepSeek-V3's fp8_gemm_kernel "
        'takes `N: tl.constexpr, K: tl.constexpr`): ["N", "K"]. Each case compiles the kernel with its own '
        "values, as Triton's launcher compiles it anew for each new value"))
    string_constexprs: dict[Identifier, ConstexprText | None] = Field(default_factory=dict, max_length=16, description=(
        'tl.constexpr parameters whose value is a word, compiled in as Triton\'s own launcher would: '
        '{"ACTIVATION": "leaky_relu"}; a Triton type as the file spells it, {"acc_dtype": "tl.float32"}, is that '
        'type; null is None, {"input_precision": null} (integers go in defines)'))
