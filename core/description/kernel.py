"""A kernel on one GPU: its description (core/description/kernel_description.py) resolved into a `Launch`.

`resolve` turns a description, a choice of tunables and the GPU's own figures (`DeviceFigures`,
read from the device) into a `Launch`: every -D value, the block shape and the target fixed,
the grid and dynamic shared memory still expressions of M, N and K.
"""

import math
import re
from dataclasses import dataclass, field
from typing import Any

from core.description import kernel_expr
from core.description.gemm_form import GemmForm
from core.description.description_fields import TensorMap, TileGrid
from core.description.kernel_description import KernelDescription, define_order
from core.description.kernel_expr import ExprError
from core.description.precision import TYPE_BYTES, Precision


@dataclass(frozen=True)
class DeviceFigures:
    """The GPU's own figures, read from the device (never constants): what a description's
    expressions see as SM_COUNT, SMEM_PER_SM, ..."""

    sm_count: int
    smem_per_sm: int
    smem_per_block: int  # the most a block may opt in to
    regs_per_sm: int
    max_threads_per_sm: int
    l2_bytes: int
    compute_capability: str  # "9.0"
    max_sm_clock_mhz: int = 0  # NVML's top SM clock, for the peak (core/description/precision.py); 0: unknown

    def scope(self) -> dict[str, int]:
        return {"SM_COUNT": self.sm_count, "SMEM_PER_SM": self.smem_per_sm, "SMEM_PER_BLOCK": self.smem_per_block,
                "REGS_PER_SM": self.regs_per_sm, "MAX_THREADS_PER_SM": self.max_threads_per_sm,
                "L2_BYTES": self.l2_bytes, "CC": int(self.compute_capability.replace(".", ""))}


@dataclass(frozen=True)
class Launch:
    """A description made concrete for one GPU and one choice of tunables: what the runner
    compiles (files, source, entry, -D values, target) and launches (block; grid and dynamic
    shared memory per M, N, K). Picklable; no file access."""

    variant: str
    files: dict[str, str]
    source: str
    include_dirs: tuple[str, ...]
    entry: str | None  # None: a launcher's case that names no kernel of its
    args: tuple[str, ...]
    form: GemmForm
    block: tuple[int, int, int] | None  # None: a launcher sets its own
    grid_exprs: tuple[Any, ...] | None  # ("tile", rows, cols, order) or ("xyz", x, y, z); None: a launcher's own
    dynamic_smem_expr: Any
    defines: dict[str, int]
    scope: dict[str, int] = field(repr=False)  # the GPU's figures and every named constant
    target: str | None = None
    compiler: str = "nvrtc"
    flags: tuple[str, ...] = ()
    build: str | None = None  # the tool whose own flags `flags` already hold (torch.utils.cpp_extension)
    compute_mode: str = "fp32"
    output: str = "input"
    scales: str = "tensor"  # FP8's scales (core/description/precision.py): "tensor" or a block recipe
    tolerance: float | None = None  # the description's own; None: the runner's default for the precision
    # Per matrix ("A", "B", "C"): (box elements along its contiguous dimension, box lines, swizzle bytes).
    tensor_maps: dict[str, tuple[int, int, int]] = field(default_factory=dict)
    # The matrices whose map, taken by value, is 128 zero bytes where the TMA cannot describe them.
    zero_maps: frozenset[str] = frozenset()
    c_starts_zero: bool = False  # C zeroed before each call, in its time (a kernel that adds into C)
    launcher: str | None = None  # the repository's host launcher the runner calls (nvcc), else None
    units: tuple[str, ...] = ()  # the launcher library's other translation units (paths in files)
    libraries: tuple[str, ...] = ()  # header libraries of the worker's on the include path ("cutlass")
    language: str = "cuda"  # "triton": source is Python, entry a @triton.jit function
    num_stages: int = 3  # a Triton kernel's pipeline stages
    # A Triton kernel's tl.constexprs that are words, types ("tl.float32") or None.
    string_constexprs: dict[str, str | None] = field(default_factory=dict)
    # A Triton kernel's per-case specialization of its args, as Triton's own launcher makes it: "1"
    # (the value 1, compiled in), "D" (divisible by 16: a pointer's alignment, a size), "" (neither).
    specialization: tuple[str, ...] = ()
    # A Triton kernel under @triton.heuristics: each arg's value in this case (an integer or a float; None for a
    # matrix), which its heuristics read as Triton's launcher hands them the call's arguments.
    arg_values: tuple[int | float | None, ...] = ()
    # "builtin": this project's own kernels/; "job": brought by a job, so hostile until proven
    # otherwise (compiled only where the compiler is confined, its compile log filtered).
    origin: str = "job"

    def grid(self, m: int, n: int, k: int, batch: int = 1) -> tuple[int, int, int] | None:
        """A tile grid walks a batch along z, one matrix per z; an expression grid says where it goes (BATCH).
        None: the launcher's own."""
        scope = {**self.scope, "M": m, "N": n, "K": k, "BATCH": batch}
        if self.grid_exprs is None:
            return None
        if self.grid_exprs[0] == "tile":
            _, rows, cols, order = self.grid_exprs
            tiles_m = -(-m // kernel_expr.evaluate(rows, scope))
            tiles_n = -(-n // kernel_expr.evaluate(cols, scope))
            grid = (tiles_n, tiles_m, batch) if order == "n_first" else (tiles_m, tiles_n, batch)
        else:
            x, y, z = (kernel_expr.evaluate(e, scope) for e in self.grid_exprs[1:])
            grid = (x, y, z)
        if not (1 <= grid[0] < 2**31 and 1 <= grid[1] <= 65535 and 1 <= grid[2] <= 65535):
            raise ValueError(f"{self.variant}: grid {grid} at {m}x{n}x{k} is outside what CUDA launches "
                             "(x 1..2^31-1, y and z 1..65535)")
        return grid

    def dynamic_smem(self, m: int, n: int, k: int, batch: int = 1) -> int:
        smem = kernel_expr.evaluate(self.dynamic_smem_expr, {**self.scope, "M": m, "N": n, "K": k, "BATCH": batch})
        if smem < 0:
            raise ValueError(f"{self.variant}: dynamic shared memory {smem} < 0")
        return smem

    @property
    def tile(self) -> tuple[int, int] | None:
        """Rows and columns of C per block, where the grid is one block per tile."""
        if self.grid_exprs is None or self.grid_exprs[0] != "tile":
            return None
        return (kernel_expr.evaluate(self.grid_exprs[1], self.scope), kernel_expr.evaluate(self.grid_exprs[2], self.scope))

    @property
    def precision(self) -> Precision:
        return Precision(self.compute_mode, self.output, self.form.accumulate, scaled=self.form.epilogue != "ab_only",
                         scales=self.scales)

    def compile_options(self) -> tuple[str, ...]:
        return ("-std=c++17", *(f"-D{k}={v}" for k, v in sorted(self.defines.items())))

    def not_applicable_on(self, compute_capability: str) -> str | None:
        """Why this kernel cannot run on a GPU of that compute capability ("9.0" or "90"), or None."""
        return target_refusal(self.variant, self.target, compute_capability)

    @property
    def build_target(self) -> str | None:
        """The target the compiler is given: the description's own, or the GPU's where it names a
        minimum ("sm_80+")."""
        if self.target is None or self.target.endswith("+"):
            return None
        return self.target


def target_compute_capability(target: str) -> str:
    """'sm_90a' -> '9.0', 'sm_100a' -> '10.0', 'sm_80+' -> '8.0': the compute capability a target is
    built for (for a minimum, the least it runs on)."""
    match = re.fullmatch(r"sm_(\d+)(\d)(a|\+)?", target)
    if match is None:
        raise ValueError(f"not a GPU target: {target!r}")
    return f"{match.group(1)}.{match.group(2)}"


def dotted(compute_capability: str) -> str:
    """'90' or '9.0' -> '9.0'."""
    cc = compute_capability
    return cc if "." in cc else f"{cc[:-1]}.{cc[-1:]}"


def target_refusal(variant: str, target: str | None, compute_capability: str) -> str | None:
    """Why a kernel built for `target` cannot run on a GPU of this compute capability, or None."""
    if target is None:
        return None
    needed, have = target_compute_capability(target), dotted(compute_capability)
    if target.endswith("+"):
        if tuple(map(int, have.split("."))) >= tuple(map(int, needed.split("."))):
            return None
        return (f"not applicable: {variant} needs compute capability {needed} or later ({target}); this GPU has "
                f"{have}")
    if have == needed:
        return None
    return (f"not applicable: {variant} is built for {target} and runs only on compute capability {needed}; this "
            f"GPU has {have}")


def resolve(desc: KernelDescription, tunables: dict[str, int] | None, device: DeviceFigures,
            origin: str = "job", dims: tuple[int, int, int] | None = None) -> Launch:
    """The description with these tunables on this GPU; a ValueError names what does not fit. dims: the
    case's M, N and K, for a Triton kernel that takes sizes as tl.constexpr (triton.size_constexprs),
    compiled in as those values."""
    values = desc.check_tunables(tunables)
    scope = {**device.scope(), **values}
    try:
        for name in define_order(desc.defines):
            scope[name] = kernel_expr.evaluate(desc.defines[name], scope)
        block = [kernel_expr.evaluate(b, scope) for b in desc.block] if desc.block is not None else None
        if desc.language == "triton":  # Triton's program: num_warps warps of 32 threads
            block = [32 * (desc.triton.num_warps if desc.triton else 4)]
    except ExprError as exc:
        raise ValueError(f"{desc.name}: {exc}") from None
    if block is not None:
        block += [1] * (3 - len(block))
        if min(block) < 1 or math.prod(block) > 1024:
            raise ValueError(f"{desc.name}: block {block} with {values or 'no tunables'}: each dimension >= 1 and at "
                             "most 1024 threads in all")
    grid = (None if desc.grid is None else ("tile", *desc.grid.tile, desc.grid.order)
            if isinstance(desc.grid, TileGrid) else ("xyz", desc.grid.x, desc.grid.y, desc.grid.z))
    defines = {name: scope[name] for name in desc.defines} | values
    if desc.triton and desc.triton.size_constexprs and dims is not None:
        defines |= {name: dims["MNK".index(name)] for name in desc.triton.size_constexprs}
    precision = desc.precision
    maps: dict[str, tuple[int, int, int]] = {
        matrix: tensor_map_box(desc.name, matrix, t, scope,
                               precision.output_type if matrix == "C" else precision.input_type)
        for matrix, t in desc.tensor_maps.items()}
    return Launch(
        variant=desc.name, files=dict(desc.files), source=desc.source, include_dirs=tuple(desc.include_dirs),
        entry=desc.entry, args=tuple(desc.args), form=desc.form,
        block=tuple(block) if block is not None else None,  # type: ignore[arg-type]
        grid_exprs=grid, dynamic_smem_expr=desc.dynamic_smem, defines=defines, scope=scope, target=desc.effective_target,
        compiler=desc.compiler, flags=tuple(desc.nvcc_flags), build=desc.build, compute_mode=desc.compute_mode, output=desc.output, scales=desc.scales_key, tolerance=desc.tolerance, origin=origin,
        launcher=desc.launcher, units=tuple(desc.units), libraries=tuple(desc.libraries), language=desc.language,
        num_stages=desc.triton.num_stages if desc.triton else 3,
        string_constexprs=dict(desc.triton.string_constexprs) if desc.triton else {},
        tensor_maps=maps, c_starts_zero=desc.c_starts_zero,
        zero_maps=frozenset(matrix for matrix, t in desc.tensor_maps.items() if t.zeros_when_absent),
    )


def tensor_map_box(variant: str, matrix: str, spec: TensorMap, scope: dict[str, int], data_type: str
                   ) -> tuple[int, int, int]:
    """The map's box on this GPU, checked against what cuTensorMapEncodeTiled accepts: each side
    1..256 elements, the contiguous side a multiple of 16 bytes and within the swizzle span."""
    try:
        inner, outer = (kernel_expr.evaluate(d, scope) for d in spec.box)
    except ExprError as exc:
        raise ValueError(f"{variant}: tensor_maps.{matrix}.box: {exc}") from None
    span = inner * TYPE_BYTES[data_type]
    if not (1 <= inner <= 256 and 1 <= outer <= 256) or span % 16 or (spec.swizzle and span > spec.swizzle):
        raise ValueError(f"{variant}: tensor_maps.{matrix}.box [{inner}, {outer}] of {data_type}: each side 1..256, "
                         f"the first a multiple of 16 bytes" + (f" and at most the swizzle's {spec.swizzle}"
                                                                if spec.swizzle else ""))
    return inner, outer, spec.swizzle
