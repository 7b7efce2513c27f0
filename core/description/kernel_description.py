"""A kernel, described once: the one schema every path carries (docs/KERNELS.md).

A `KernelDescription` is what a kernel engineer writes in a kernels folder's `gemmwatch.json`
(this project's own `kernels/` is one), what `POST /api/jobs` takes in `sources`, what a job's
plan keeps in the kernel store for later confirmations, and what the A/B runner thaws. Its JSON
(`model_dump(mode="json")`) is the one serialised form; its JSON Schema is published at
`GET /api/kernels/schema`. On a GPU it becomes a `Launch` (core/description/kernel.py).
"""

import itertools
import math
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError, ValidationInfo, field_validator, model_validator

from core.description import compile_flags, gemm_form, kernel_expr, kernel_includes
from core.description.gemm_form import Accumulate, Epilogue, GemmForm
from core.description.inputs import DESCRIPTION as inputs_text, SIGNED, Inputs
from core.description.kernel_includes import IncludeRefused
from core.description.precision import OUTPUT_MODES, OUTPUT_TYPES, ComputeMode, Precision
from core.description.timing_modes import TimingMode
from core.description.problem_size import read_dims
from core.description.source_guard import SourceRefused
from core.description.kernel_expr import ExprError
from core.description.description_fields import (ABSOLUTE_MAX_BYTES, CALLABLE_PATTERN, DEFAULT_ARGS, DEVICE_NAMES,
                                                 LAUNCHER_PATTERN, PROBLEM_NAMES, RESERVED, Arg, Dim, ExprGrid, FilePath, Identifier, IncludeDir,
                                                 BlockScales, HelionValue, OperandLayouts, SizeMultiple, Target, TensorMap, TileGrid,
                                                 TritonOptions, Tunable, arg_refusal, hook_zeroes_c, is_expression, workspace_of,
                                                 is_filler, names_no_c)
from core.description import launch_checks, wrapper_call


# Files a description carries, its source and headers together: a repository's GEMM with every header
# of its own it reaches, a header library of its own included (ThunderKittens' Hopper GEMM reaches 122
# files, 1.5 MB), short of CUTLASS's thousands (`libraries`). The bytes are bounded apart
# (ABSOLUTE_MAX_BYTES, and a deployment's GEMMWATCH_MAX_SOURCE_BYTES a job).
MAX_FILES = 256


def _output_instead(compute_mode: str, output: str) -> str:
    """What to say to a kernel whose `output` its precision has no baseline for."""
    if Precision(compute_mode).output_type == OUTPUT_TYPES[output]:
        return f'writes {output.upper()} already (leave output as "input")'
    return f"has no cuBLAS GEMM writing {output.upper()} to be timed beside"


class KernelDescription(BaseModel):
    """One kernel: its files, entry, launch geometry, target, compute mode and constants."""

    model_config = ConfigDict(extra="forbid", title="gemmwatch kernel description")

    name: Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_]{0,59}$")] = Field(
        description="variant name (snake_case); a built-in's name means this commit's version of it")
    files: dict[FilePath, str] = Field(
        min_length=1, max_length=MAX_FILES,
        description="every file the kernel compiles from, by path in its folder: the source and the headers it "
                    "includes with #include \"...\" (resolved from the including file's folder, then `include_dirs`)")
    source: FilePath = Field(description="the file compiled as the translation unit (one of `files`)")
    units: list[FilePath] = Field(default_factory=list, max_length=16,
                                  description="with a `launcher`: the repository's other translation units (a "
                                              "utils.cu whose functions the launcher calls), by path in `files`; "
                                              "nvcc builds each and links them into the launcher's library beside "
                                              "`source`, as the repository's own build links its files")
    include_dirs: list[IncludeDir] = Field(default_factory=list, max_length=16,
                                         description="folders of `files` searched for #include <...> and, after the "
                                                     "including file's folder, #include \"...\"")
    entry: Annotated[str, StringConstraints(pattern=CALLABLE_PATTERN, max_length=200)] | None = Field(
        None, description='the __global__ function, or a template instantiation such as "sgemm<BM, BN, 8>" or '
                          '"gemm<cfg::Tile<cute::half_t, 128>>" (the kernel\'s defines and tunables are macros there); '
                          "with a launcher, optional: the kernel whose resources (registers, shared memory, spills) the "
                          "result shows")
    launcher: Annotated[str, StringConstraints(pattern=LAUNCHER_PATTERN, max_length=200)] | None = Field(
        None, description='the repository\'s own host launcher, any name C++ reaches a function by: "run_sgemm_tiled", '
                          '"launch_gemm<float>", "ns::Gemm<128, __half>::Run" (a static member), a name brought in '
                          "by a using-declaration, an extern \"C\" function (nvcc only), and one of an overloaded name's "
                          'functions by its parameter types ("run_pingpong(void*, void*, void*, int, int, int)"): '
                          "the runner calls it, in a "
                          "confined process of the case's own, and times every kernel it launches as one GEMM; "
                          "`args` are then its parameters (stream included), it sets its own grid, block, shared "
                          "memory and cluster (no `block` or `grid`), and `entry`, where given, is the kernel whose "
                          "resources the result shows")
    timing: TimingMode | None = Field(
        None, description="the timing mode that matches the runner this kernel is timed by at home (README, "
                          '"Which timing mode"): cold (nvbench\'s cold samples), hot (do_bench, a loop of '
                          "launches), burst (a few back-to-back launches after a pause: a repository's own quick "
                          "runner), sustained; none: the job's, else the worker's GEMMWATCH_TIMING_MODE")
    inputs: Inputs = Field(SIGNED, description=inputs_text)
    args: list[Arg] = Field(default_factory=lambda: list[Arg](DEFAULT_ARGS), min_length=2, max_length=24,
                                description="the kernel's parameters in order; M, N, K, lda, ldb, ldc as int, alpha and "
                                            "beta as float, A, B, C as pointers; A_map, B_map, C_map: the matrix's "
                                            "tensor map (`tensor_maps`), by address (0 where the TMA cannot describe "
                                            "the matrix: a line not a multiple of 16 bytes) or by value "
                                            "(`const __grid_constant__ CUtensorMap`: such a case is refused, or given 128 "
                                            "zero bytes where the map says `zeros_when_absent`); "
                                            "with a `launcher`, its parameters in order, `stream` among them, each "
                                            "passed in the type its library declares (a scalar by pointer: a host one); "
                                            '"null" (a pointer passed as nullptr: a debug buffer), "ignored" (a '
                                            'parameter never read: zero in its type), "=2" (a constant in its type)')
    tensor_maps: dict[Literal["A", "B", "C"], TensorMap] = Field(
        default_factory=dict, description="TMA tensor maps the kernel takes (sm_90 and later), by matrix; each needs "
                                          "its A_map, B_map or C_map in args. A Triton kernel's X_map is a host "
                                          "TensorDescriptor over X: its block shape is the box (contiguous side "
                                          "first, as for a CUDA map; it may read the kernel's constexprs), no swizzle")
    layout: Literal["row", "column"] | OperandLayouts = Field(
        "row", description='how A (M x K), B (K x N) and C (M x N) lie in memory: all alike ("row", "column"), or '
                           'each its own ({"A": "row", "B": "col", "C": "row"}); leading dimensions and batch '
                           "strides are packed")
    epilogue: Epilogue | None = Field(
        None, description="alpha_beta: C = alpha·A·B + beta·C; alpha_only: C = alpha·A·B; ab_only: C = A·B (C only "
                          "written). Default: the one args imply (alpha and beta among them, alpha alone, neither); "
                          "alpha and beta are passed in the type the kernel's binary declares, by value or pointer")
    accumulate: Accumulate = Field(
        "fp32", description='what the products are summed in: "fp32", or "fp16" (fp16 kernels: half WMMA '
                            "accumulators, mma .f16.f16.f16.f16, a half sum), checked with FP16 accumulation's bound "
                            "(core/description/precision.py) and timed beside cuBLAS with CUBLAS_COMPUTE_16F; with "
                            '"output": "fp32" (FP16 partial sums added into an FP32 C) beside CUBLAS_COMPUTE_32F, '
                            "the one cuBLAS GEMM writing FP32 from FP16")
    block: list[Dim] | None = Field(None, min_length=1, max_length=3,
                                    description="threads per block [x, y, z] (a kernel's; a launcher sets its own)")
    grid: TileGrid | ExprGrid | None = Field(None, description="the kernel's grid (a launcher sets its own)")
    dynamic_smem: Dim = Field(0, description="bytes of dynamic shared memory per block")
    target: Target | None = Field(None, description='a GPU target the kernel needs, e.g. "sm_90a" for wgmma; '
                                                     "none: built for whatever GPU runs it")
    compiler: Literal["nvrtc", "nvcc"] = Field(
        "nvrtc", description="nvrtc: device code only, compiled in memory; nvcc: the file as the repository builds "
                             "it, host code (launchers, host headers) included, with `flags`")
    language: Literal["cuda", "triton", "helion"] = Field(
        "cuda", description='cuda: C++ built by NVRTC or nvcc; triton: `source` is a Python file and `entry` a '
                            "@triton.jit function in it, compiled ahead of time in the confined compile process "
                            "(its module imported there only); `args` names its parameters that are not "
                            "tl.constexpr, in order; each tl.constexpr gets its value from `defines` or `tunables`; "
                            "`block` is left out (32 x `triton.num_warps` threads); helion: `source` is a Python "
                            "file and `wrapper` a @helion.kernel function in it that takes A and B and returns C: "
                            "for each case Helion writes its Triton code in the confined compile process (torch on "
                            "its meta device, no GPU), with the config in `helion` or the one the kernel pins, and "
                            "that code is read by its wrapper, compiled, checked and timed as a Triton kernel")
    triton: TritonOptions | None = Field(None, description="a Triton kernel's num_warps and num_stages")
    helion: dict[Identifier, HelionValue] | None = Field(
        None, max_length=32,
        description='a Helion kernel\'s helion.Config, as Helion prints it: {"block_sizes": [128, 256, 64], '
                    '"num_warps": 8, "num_stages": 3}; left out, the one config its @helion.kernel(config=...) pins. '
                    "gemmwatch does not run Helion's autotuner (minutes a shape): run it at home and give its choice")
    wrapper: Annotated[str, StringConstraints(min_length=1, max_length=wrapper_call.MAX_LENGTH)] | None = Field(
        None, description="a Triton kernel given by the repository's Python wrapper instead of entry, args and grid: "
                          "the function of `source` that takes A and B and returns C (`matmul`, called as "
                          "`matmul(a, b)`), or the call a user makes at home where it wants more, a and b standing "
                          "for the matrices and every other value a literal or a name of the file "
                          "(`group_m_matmul(a, b, block_size_m=256, dtype_acc=tl.float32)`, "
                          "`matmul(mode='group_m')(a, b)`). The worker "
                          "calls it once, confined, on stand-ins whose sizes are names, and reads the one "
                          "@triton.jit launch it makes: the kernel, which parameter is which matrix, size or "
                          "stride, its tl.constexpr values and its grid; that kernel is then compiled, checked and "
                          "timed as if so described (the wrapper's own Python is not in the time)")
    c_starts_zero: bool = Field(
        False, description="C is set to zero before each call, the fill timed with the kernel, as its own caller "
                           "does for a kernel that adds into C (split-K pieces added atomically into a C its wrapper "
                           "allocates with torch.zeros); read off a wrapper's launch, else given")
    sizes: list[Annotated[str, StringConstraints(pattern=r"^[1-9][0-9]{0,5}(x[1-9][0-9]{0,5}x[1-9][0-9]{0,5})?$")]] | None = Field(
        None, min_length=1, max_length=16,
        description='the only sizes the kernel runs at, "MxNxK" or "4096" for a cube, where its sizes are compiled '
                    "in (a Helion kernel's Triton code under static_shapes, a kernel with #define N 4096): a case at "
                    "another size is not run, and says so. A wrapper whose launch passes no size and a grid of "
                    "fixed numbers is refused without it")
    size_multiple: SizeMultiple | None = Field(
        None, description='what each size must be a multiple of, {"M": 128, "N": 256, "K": 64}, for a kernel that '
                          "reads and writes whole tiles with no bounds checks: a case at another size is not run, "
                          "and says so (its result and CI verdict \"not applicable\"), where it would write past C")
    libraries: list[Literal["cutlass"]] = Field(
        default_factory=list, max_length=4,
        description='header libraries the worker provides, pinned, for an nvcc kernel: "cutlass" puts CUTLASS\'s '
                    "include/, tools/util/include/ and examples/common/ on the include path (its version is in the "
                    "result's compiler)")
    flags: list[Annotated[str, StringConstraints(max_length=64)]] = Field(
        default_factory=list, max_length=48,
        description="nvcc's code-generation flags, as the repository's build passes them (-O3, --use_fast_math, "
                    "-maxrregcount=128, -Xptxas -v, ...; core/description/compile_flags.py lists what is allowed)")
    build: Literal["torch.utils.cpp_extension"] | None = Field(
        None, description="the tool the repository builds the kernel with, where that tool passes nvcc flags of its own "
                          "before the repository's: torch.utils.cpp_extension (load, CUDAExtension) puts PyTorch's "
                          "COMMON_NVCC_FLAGS first (-D__CUDA_NO_HALF_OPERATORS__ and the other three, "
                          "--expt-relaxed-constexpr) and -std=c++17 last unless `flags` name a standard; `flags` are "
                          "then its extra_cuda_cflags. nvcc only (core/description/compile_flags.py)")
    compute_mode: ComputeMode = Field(
        "fp32", description="the inputs and the math (core/description/precision.py). fp32: FP32 A and B, timed beside cuBLAS "
                            "FP32; tf32: FP32 A and B rounded to TF32 on the tensor cores, beside cuBLAS TF32; "
                            "fp16, bf16: A and B in that type (__half, __nv_bfloat16), FP32 accumulate, beside "
                            "cuBLAS in the same precision; fp8: A and B in E4M3 (__nv_fp8_e4m3) with per-tensor "
                            "scales folded into alpha, FP32 accumulate, C in BF16, beside cuBLASLt FP8")
    output: Literal["input", "fp32", "fp16"] = Field(
        "input", description='the type of C: "input" (the type of A and B; BF16 for fp8), "fp32" (for fp16, bf16 '
                             'and fp8) or "fp16" (for fp8: an FP16 C, beside cuBLASLt FP8 writing FP16)')
    scales: Literal["tensor"] | BlockScales = Field(
        "tensor", description='FP8\'s scales: "tensor" (one per matrix, folded into alpha), or per block as '
                              'DeepSeek-V3\'s recipe has them, {"A": "1x128", "B": "128x128"} (or B "1x128"): '
                              "the kernel takes scale_A, FP32 [M, ceil(K/128)], and scale_B, FP32 "
                              "[ceil(N/128), ceil(K/128)] (or [N, ceil(K/128)]), each row-major, among its args, "
                              "beside cuBLASLt's block-scaled FP8 GEMM")
    tolerance: float | None = Field(None, gt=0, le=0.1, allow_inf_nan=False,
                                    description="largest relative Frobenius error against the FP32 product of the same "
                                                "inputs (default: 1e-4 for fp32, 2e-3 for tf32; for fp16 and bf16 "
                                                "2 u_out + 2 K u_fp32, for fp8 2 u_out + 2 (K/32) 2^-14, "
                                                "core/description/precision.py says why)")
    defines: dict[Identifier, Dim] = Field(default_factory=dict, max_length=64,
                                           description="-D NAME=value; a value may be an expression of the GPU's "
                                                       "figures, the tunables and other defines")
    tunables: dict[Identifier, Tunable] = Field(default_factory=dict, max_length=16,
                                                description="-D values an autotune job sweeps")
    technique: Annotated[str, StringConstraints(max_length=2000)] | None = Field(
        None, description="what the kernel does, in a sentence")
    seed: Annotated[str, StringConstraints(max_length=200)] | None = Field(
        None, description="where the technique comes from")

    @field_validator("args", mode="before")
    @classmethod
    def _each_arg_said_once(cls, args: object) -> object:
        """An arg none of the forms take, refused in one sentence naming what it may be."""
        if isinstance(args, list):
            for i, arg in enumerate(args):
                if (why := arg_refusal(arg)) is not None:
                    raise ValueError(f"args.{i}: {why}")
        return args

    @field_validator("files", mode="before")
    @classmethod
    def _few_enough_files(cls, files: object) -> object:
        """Too many files said with what the count is and what to do, not the bare limit."""
        if isinstance(files, dict) and len(files) > MAX_FILES:
            raise ValueError(f"the kernel reaches {len(files)} files (its source, its units and every file their "
                             f"#includes lead to), more than the {MAX_FILES} a description carries; a header library "
                             'gemmwatch pins is named in `libraries` ("cutlass": CUTLASS and CuTe) instead of carried')
        return files

    @field_validator("files")
    @classmethod
    def _no_byte_order_mark(cls, files: dict) -> dict:
        """A byte-order mark that an editor put at the start of a file is not part of the kernel:
        NVRTC reads it as an unrecognized token. Dropped before the source guard reads the text,
        so what the guard judges is what NVRTC compiles."""
        return {path: text.removeprefix("\ufeff") for path, text in files.items()}

    @field_validator("flags")
    @classmethod
    def _flags_allowed(cls, flags: list) -> list:
        """Every refused flag named at once (a Makefile's line often holds several)."""
        compile_flags.check_flags(flags)
        return flags

    @property
    def build_flags(self) -> compile_flags.Flags:
        """The flags as the worker builds with them (core/description/compile_flags.py)."""
        return compile_flags.parse(self.nvcc_flags)

    @property
    def nvcc_flags(self) -> list[str]:
        """The flags as nvcc gets them: the build tool's own around the repository's (`build`)."""
        return compile_flags.with_build(self.build, self.flags)

    @property
    def returns_c(self) -> bool:
        """A launcher PyTorch builds whose args name no C: it makes C itself (torch::empty) and returns
        it, as most bindings do; the worker hands it the case's C there (docs/KERNELS.md)."""
        return self.launcher is not None and self.build == "torch.utils.cpp_extension" and names_no_c(self.args)

    @property
    def effective_target(self) -> str | None:
        """The target the description names, else the one its flags name (-arch=sm_90a)."""
        return self.target or self.build_flags.target

    @field_validator("wrapper")
    @classmethod
    def _wrapper_call(cls, value: str | None) -> str | None:
        if value is not None:
            wrapper_call.plan(value)  # a call gemmwatch cannot follow is refused here, saying what of it
        return value

    @field_validator("launcher", "entry")
    @classmethod
    def _brackets_balanced(cls, name: str | None, info: ValidationInfo) -> str | None:
        """A name pasted into C++ (the entry's address unit, NVRTC's name expression, the launcher's
        call) with its template brackets closed, so that it stays one name there."""
        depth = 0
        for ch in name or "":
            depth += (ch == "<") - (ch == ">")
            if depth < 0:
                break
        if depth != 0:
            raise ValueError(f"{info.field_name} {name!r}: its template brackets < > do not balance")
        return name

    @field_validator("block")
    @classmethod
    def _block_ints_in_range(cls, block: list | None) -> list | None:
        if block is None:
            return None
        ints = [b for b in block if type(b) is int]
        if any(b < 1 or b > 1024 for b in ints) or (len(ints) == len(block) and math.prod(ints) > 1024):
            raise ValueError(f"block {block}: each dimension >= 1 and at most 1024 threads in all")
        return block

    def _check_constant_names(self) -> None:
        """Defines, tunables and a Triton kernel's word constexprs are one set of names, the kernel's
        constants: none is named like what the problem and the GPU give an expression, none gets two
        values."""
        kinds = {"defines": set(self.defines), "tunables": set(self.tunables),
                 "triton.string_constexprs": set(self.triton.string_constexprs) if self.triton else set()}
        clash = set().union(*kinds.values()) & RESERVED
        if clash:
            raise ValueError(f"{', '.join(sorted(clash))}: reserved for the problem and the GPU "
                             f"({', '.join(sorted(RESERVED))}); name the constant otherwise")
        for (first, a), (second, b) in itertools.combinations(kinds.items(), 2):
            if a & b:
                raise ValueError(f"{', '.join(sorted(a & b))}: in both {first} and {second}; give each constant "
                                 "one value")

    @model_validator(mode="after")
    def _consistent(self) -> "KernelDescription":
        if self.source not in self.files:
            raise ValueError(f"source {self.source!r} is not among the files ({', '.join(sorted(self.files))})")
        size = sum(len(text.encode()) for text in self.files.values())
        if size > ABSOLUTE_MAX_BYTES:
            raise ValueError(f"the files hold {size} bytes; at most {ABSOLUTE_MAX_BYTES}")
        self._check_constant_names()
        if self.flags and self.compiler != "nvcc":
            raise ValueError('flags are nvcc\'s: set "compiler": "nvcc" (an NVRTC build takes `defines`)')
        if self.build and self.compiler != "nvcc" and self.language == "cuda":
            raise ValueError(f'build {self.build}: that tool builds with nvcc: set "compiler": "nvcc"')
        flag_target = self.build_flags.target
        if self.target and flag_target and flag_target != self.target:
            raise ValueError(f"target {self.target} and the flags' {flag_target} differ: give one (the flags' -arch "
                             "or -gencode is the kernel's target when `target` is left out)")
        launch_checks.check_triton(self)
        if self.libraries and self.compiler != "nvcc":
            raise ValueError(f"libraries {self.libraries}: a library's headers are for a kernel nvcc builds "
                             '("compiler": "nvcc")')
        launch_checks.check_launcher(self)
        launch_checks.check_scales(self)
        if self.output != "input" and self.compute_mode not in OUTPUT_MODES[self.output]:
            modes = OUTPUT_MODES[self.output]
            named = " and ".join(filter(None, (", ".join(modes[:-1]), modes[-1])))
            raise ValueError(f'output "{self.output}" is for {named} kernels; a kernel in {self.compute_mode} '
                             f"{_output_instead(self.compute_mode, self.output)}")
        # A, B and C each by its pointer, its tensor map or both (a TMA kernel may read an operand,
        # or write C, through its map alone).
        roles = self.roles
        if len(set(roles)) != len(roles):
            raise ValueError(f"args {self.args}: each name once (null, ignored and =constants may repeat)")
        if "D" in roles and "C" not in roles:
            raise ValueError('args: "D" is where a kernel that reads C writes; a kernel that only writes its '
                             'result calls it "C"')
        missing = [x for x in ("A", "B", "C") if x not in self.args and f"{x}_map" not in self.args]
        if missing == ["C"] and self.returns_c:
            missing = []
            if self.form.layout("C") != "row":
                raise ValueError("layout: a C the launcher makes (torch::empty) is a contiguous row-major tensor: "
                                 'C is "row"')
        if missing:
            raise ValueError(f"args {self.args}: A, B and C each as its pointer (A, B, C) or its tensor map (A_map, "
                             f"B_map, C_map, with tensor_maps); missing {', '.join(missing)}")
        maps_in_args = {a.removesuffix("_map") for a in self.args if a.endswith("_map")}
        if maps_in_args != set(self.tensor_maps):
            raise ValueError(f"args name the tensor maps of {sorted(maps_in_args) or 'no matrix'} and tensor_maps "
                             f"describes {sorted(self.tensor_maps) or 'none'}: each map in both")
        for matrix, spec in self.tensor_maps.items():
            if spec.zeros_when_absent and (matrix not in self.args or self.language != "cuda" or self.launcher):
                why = ("a kernel's own parameter: a Triton descriptor or a launcher's map has no zeros for \"none\""
                       if matrix in self.args else
                       f"{matrix} among args too: where the TMA cannot describe {matrix}, the kernel reaches it "
                       "through its pointer")
                raise ValueError(f"tensor_maps.{matrix}.zeros_when_absent: {why}")
        self.form  # the layouts, epilogue and accumulate fit each other and the rest (core/description/gemm_form.py)
        if math.prod(len(t.values) for t in self.tunables.values()) > 4096:
            raise ValueError("the tunables make more than 4096 combinations")
        for value, where in self.expressions():
            try:
                if self.language == "helion" and where.startswith("args"):
                    raise ExprError(f"{value!r}: a Helion kernel's args are read off the code Helion writes")
                if self.language == "triton" and where.startswith(("grid", "tensor_maps")):
                    # A Triton grid (and a descriptor's block) reads its @triton.autotune configuration's
                    # values as well ("cdiv(M, BLOCK_SIZE_M)"), known only once its file is read: the names are
                    # checked when the case runs, its form (operators, cdiv/min/max) here, whoever wrote it
                    # (a wrapper's too).
                    if isinstance(value, str):
                        kernel_expr.parse(value)
                    continue
                kernel_expr.check(value, self.known_names(where))
            except ExprError as exc:
                raise ValueError(f"{where}: {exc}") from None
        define_order(self.defines)  # a define that reads itself, through others or not, is refused
        if self.language == "cuda":  # a Triton kernel's Python is read by nothing but its confined compile
            try:  # layer 1 of 3 against a hostile source (docs/SECURITY.md), and where each #include leads
                kernel_includes.resolve(self.files, self.source, self.include_dirs, compiler=self.compiler,
                                        units=self.units)
            except (SourceRefused, IncludeRefused) as refusal:
                raise ValueError(f"source refused: {refusal}") from None
        return self

    # -- expressions ----------------------------------------------------------------
    @property
    def roles(self) -> list[str]:
        """The args that name a role of the GEMM's (fillers left out)."""
        return [a for a in self.args if not is_filler(a)]

    def expressions(self) -> list[tuple[Any, str]]:
        """(value, field) for every int-or-expression field, to check the names each may read."""
        grid = ([] if self.grid is None else [(d, "grid.tile") for d in self.grid.tile]
                if isinstance(self.grid, TileGrid)
                else [(self.grid.x, "grid.x"), (self.grid.y, "grid.y"), (self.grid.z, "grid.z")])
        return ([(b, "block") for b in self.block or []] + grid + [(self.dynamic_smem, "dynamic_smem")]
                + [(v, f"defines.{k}") for k, v in self.defines.items()]
                + [(d, f"tensor_maps.{x}.box") for x, t in self.tensor_maps.items() for d in t.box]
                + [(a[1:], f"args.{i}") for i, a in enumerate(self.args) if is_expression(a)]
                + [(w[1], f"args.{i}") for i, a in enumerate(self.args) if (w := workspace_of(a))])

    def known_names(self, where: str) -> set[str]:
        """What an expression in this field may read: the GPU's figures and the kernel's constants
        everywhere; M, N and K only where they vary per case (grid, dynamic shared memory, an args
        expression), never in a -D or the block, which are fixed when the kernel is compiled."""
        known = set(DEVICE_NAMES) | set(self.tunables) | set(self.defines)
        if where.startswith(("grid", "dynamic_smem", "args")):
            known |= set(PROBLEM_NAMES)
        return known

    # -- tunables ---------------------------------------------------------------------
    def defaults(self) -> dict[str, int]:
        return {name: t.default for name, t in self.tunables.items()}

    def check_tunables(self, chosen: dict[str, int] | None) -> dict[str, int]:
        """The chosen values over the defaults; a name or value outside the tunables is a ValueError."""
        merged = self.defaults()
        for name, value in (chosen or {}).items():
            if name not in self.tunables:
                raise ValueError(f"{self.name} has no tunable {name!r}; tunables: {sorted(self.tunables) or 'none'}")
            if type(value) is not int or value not in self.tunables[name].values:
                raise ValueError(f"{self.name}: {name}={value!r} not allowed; allowed: {self.tunables[name].values}")
            merged[name] = value
        return merged

    def chosen_tunables(self, explicit: dict[str, int] | None, tuned: dict[str, int] | None) -> dict[str, int]:
        """A bench case's tunables: the job's own (wrong ones are a ValueError), else a configuration
        tuned for this GPU and size where this version of the kernel still has those tunables and
        values (an older kernel's tuning is passed over, not an error), else the defaults."""
        if explicit:
            return self.check_tunables(explicit)
        try:
            return self.check_tunables(tuned)
        except ValueError:
            return self.defaults()

    def configurations(self) -> list[dict[str, int]]:
        """Every combination of the tunables, the defaults first ({} for a kernel without any)."""
        names = list(self.tunables)
        combos = [dict(zip(names, vs)) for vs in itertools.product(*(self.tunables[n].values for n in names))]
        default = self.defaults()
        return [default] + [c for c in combos if c != default]

    @property
    def precision(self) -> Precision:
        return Precision(self.compute_mode, self.output, self.accumulate, scaled=self.form.epilogue != "ab_only",
                         scales=self.scales_key)

    @property
    def scales_key(self) -> str:
        """`scales` as the precision names it: "tensor", or "1x128,128x128" (A's block, then B's)."""
        return self.scales if isinstance(self.scales, str) else f"{self.scales.A},{self.scales.B}"

    @property
    def form(self) -> GemmForm:
        return gemm_form.form_of(self.layout, self.epilogue, self.accumulate, self.roles, self.compute_mode,
                                 self.output)

    @property
    def fixed_sizes(self) -> set[tuple[int, int, int]] | None:
        """The sizes its `sizes` allows, as (M, N, K); None where it runs at any."""
        if self.sizes is None:
            return None
        return {dims for dims in (read_dims(text) for text in self.sizes) if dims is not None}

    def size_refusal(self, m: int, n: int, k: int) -> str | None:
        """Why the kernel does not run at m×n×k by its own description (`sizes`, `size_multiple`), as a
        case's "not applicable" reason; None where it runs there."""
        here = f"this case is {m}×{n}×{k}"
        fixed = self.fixed_sizes
        if fixed is not None and (m, n, k) not in fixed:
            at = ", ".join("×".join(map(str, size)) for size in sorted(fixed))
            return (f"not applicable: {self.name} runs at {at} only (its sizes are compiled in: its description's "
                    f"sizes); {here}")
        misses = self.size_multiple.misses(m, n, k) if self.size_multiple is not None else []
        if misses:
            return (f"not applicable: {self.name} runs only where each size is a multiple of its tile (its "
                    f"description's size_multiple); {here}: {', '.join(misses)}")
        return None

    def with_wrapper_call(self, call: dict[str, Any]) -> "KernelDescription":
        """The kernel this description's `wrapper` launches, described as a user would by hand: the
        launch the worker read off it (worker/compile/triton_wrapper.py: entry, args, defines, grid, Triton
        options) in place of the wrapper; a ValueError naming what of it does not fit."""
        self._check_wrapper_c_type(call.get("c_type"))
        data = self.model_dump(mode="json", exclude_none=True, exclude={"wrapper", "args", "entry", "grid"})
        # What the user set (a pinned config) over what the wrapper passed (num_warps=8).
        read = call.get("triton") or {}
        own = self.triton.model_dump(exclude_unset=True) if self.triton else {}
        options = {**read, **own}
        if read.get("string_constexprs") or own.get("string_constexprs"):  # word by word, the user's last
            options["string_constexprs"] = {**read.get("string_constexprs", {}), **own.get("string_constexprs", {})}
        sized = any(arg in PROBLEM_NAMES or arg in ("lda", "ldb", "ldc") for arg in call["args"]) or not all(
            str(g).isdigit() for g in call["grid"].values())
        if not sized and self.sizes is None:
            raise ValueError(f"{self.name}: its wrapper {self.wrapper} launches {call['entry']} with no size among its "
                             "arguments and a grid of fixed numbers, so its sizes are compiled in (as Helion's "
                             'static_shapes compiles them): say at which sizes it runs, "sizes": ["4096"]')
        data.update(entry=call["entry"], args=call["args"], grid=call["grid"],
                    defines={**call.get("defines", {}), **self.defines}, **({"triton": options} if options else {}),
                    **({"c_starts_zero": True} if call.get("c_starts_zero") else {}))
        try:
            return KernelDescription.model_validate(data)
        except ValidationError as exc:
            raise ValueError(f"{self.name}: the launch its wrapper {self.wrapper} makes does not fit a description:\n"
                             f"{explain(exc, self.name)}") from None

    def _check_wrapper_c_type(self, torch_type: str | None) -> None:
        """The C the wrapper makes is the C this description times, where gemmwatch can write that type:
        a wrapper making an FP16 C for an FP8 kernel, described with FP8's default BF16 C, would be
        timed storing another type than it does at home. A type no `output` gives (an FP8 C, or an
        FP16 C for BF16 inputs, which no cuBLAS call writes) is left to the description's own."""
        wrote = {"float8_e4m3fn": "float8_e4m3"}.get(torch_type or "", torch_type)
        if wrote is None or wrote == self.precision.output_type:
            return
        fitting = [o for o in ("input", *OUTPUT_MODES) if (o == "input" or self.compute_mode in OUTPUT_MODES[o])
                   and Precision(self.compute_mode, o).output_type == wrote]
        if fitting:
            raise ValueError(f'{self.name}: its wrapper {self.wrapper} makes C in {torch_type}, and this description\'s '
                             f"C is {self.precision.output_type} (compute_mode {self.compute_mode}, output "
                             f'"{self.output}"): say "output": "{fitting[0]}" to time the kernel as the wrapper runs it')

    def with_triton_config(self, config: dict) -> "KernelDescription":
        """The description with one @triton.autotune configuration (as triton_build.describe lists it):
        its values as defines, its warps and stages; its other Triton options (the word and size
        constexprs) kept."""
        defines = {**self.defines, **{name: int(value) for name, value in config["kwargs"].items()}}
        options = (self.triton or TritonOptions.model_validate({})).model_copy(
            update={"num_warps": config["num_warps"], "num_stages": config["num_stages"]})
        # Its pre_hook zeroes C before each launch (a split-K configuration): the runner does, in its time.
        return self.model_copy(update={"defines": defines, "triton": options,
                                       "c_starts_zero": self.c_starts_zero or hook_zeroes_c(config, self.args)})

    def with_helion_code(self, code: str, dims: tuple[int, int, int]) -> "KernelDescription":
        """A Helion kernel as the Triton code Helion wrote for one case of M x N x K: a Triton kernel given
        by its wrapper (the @helion.kernel function's name, which the code keeps), at that size alone
        (Helion's static_shapes compiles it in), its file beside the kernel's own."""
        generated = f"{self.source.removesuffix('.py')}_helion_{'x'.join(map(str, dims))}.py"
        data = self.model_dump(mode="json", exclude_none=True, exclude={"helion", "files", "sizes"})
        data.update(language="triton", source=generated, files={generated: code}, sizes=["x".join(map(str, dims))])
        try:
            return KernelDescription.model_validate(data)
        except ValidationError as exc:
            raise ValueError(f"{self.name}: the Triton code Helion wrote for {self.wrapper} at "
                             f"{'x'.join(map(str, dims))} does not fit a description:\n{explain(exc, self.name)}") from None

    def summary(self) -> dict[str, Any]:
        """What GET /api/variants says of a kernel."""
        return {"name": self.name, "technique": self.technique or "", "seed": self.seed, "source_file": self.source,
                "entry": self.entry, "compute_mode": self.compute_mode, "form": self.form.key(),
                "precision": self.precision.label(), "target": self.effective_target,
                "tunables": [{"name": n, "values": t.values, "default": t.default} for n, t in self.tunables.items()]}


def explain(exc: ValidationError, who: str) -> str:
    """A description's validation errors, one line each: who, which field, why."""
    lines = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err["loc"]) or "(the kernel)"
        lines.append(f"{who}: {where}: {err['msg'].removeprefix('Value error, ')}")
    return "\n".join(lines)


def define_order(defines: dict[str, Any]) -> list[str]:
    """The defines in an order where each comes after those it reads; a cycle is a ValueError."""
    reads = {name: (kernel_expr.names(v) & set(defines)) if type(v) is not int else set() for name, v in defines.items()}
    order: list[str] = []
    done: set[str] = set()
    while len(order) < len(defines):
        ready = [n for n in defines if n not in done and reads[n] <= done]
        if not ready:
            stuck = sorted(n for n in defines if n not in done)
            raise ValueError(f"defines {', '.join(stuck)} read each other in a cycle")
        order += ready
        done |= set(ready)
    return order
