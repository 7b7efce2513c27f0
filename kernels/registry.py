"""Every built-in variant, described as data: source, entry point, launch geometry, tunables.

A launch is fully described by a `LaunchSpec`: the CUDA source, the entry function, the
thread-block shape and the C tile each block computes (the grid follows from M and N), and
the -D options. Built-in variants resolve to one through `KernelSpec.resolve`; user kernels
(a later `sources` field) are meant to arrive already in this shape, so the runner has one
path for both.

Geometry values are ints or the name of a tunable, so a tile size is stated once.

Shared device code lives in prelude files (common.cuh, ...) that `resolve` prepends to the
kernel's own file, each part behind a #line marker so compiler messages name the right file and
line. Kernels never #include our files: NVRTC gets no filesystem include path, and
LaunchSpec.source stays one self-contained translation unit.
"""

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

KERNEL_DIR = Path(__file__).resolve().parent

# The vendor baseline; timed beside every variant and requestable on its own.
CUBLAS = "cublas"

# Prelude files, prepended in the order a KernelSpec lists them.
COMMON = "common.cuh"  # guarded loads, the alpha/beta epilogue, register-tile helpers
TILE128 = "tile128.cuh"  # the 128x128 block-tile ladder's slab loaders, fragments, pipeline
GUIDE_MATRIX = "guide_matrix.cuh"  # the CUDA guide's strided Matrix view

Dim = int | str

COMPUTE_MODES = ("fp32", "tf32")


@dataclass(frozen=True)
class Tunable:
    name: str
    values: tuple[int, ...]
    default: int


def tail_pieces(tail: int, wave: int, max_pieces: int = 16) -> int:
    """Pieces per tile of a last partial wave of `tail` tiles (tail_split_k.cu's tail_pieces, the
    same integer arithmetic, so that the grid and the kernel agree): the p that makes
    ceil(tail * p / wave) rounds of 1/p of a tile shortest, with a small charge per piece."""
    best, best_cost = 1, None
    for p in range(1, max_pieces + 1):
        cost = -(-tail * p // wave) * (720720 // p) + 2880 * p
        if best_cost is None or cost < best_cost:
            best, best_cost = p, cost
    return best


@dataclass(frozen=True)
class LaunchSpec:
    """What the runner needs to compile and launch one kernel (picklable, no file access)."""

    variant: str
    source: str
    entry: str
    block: tuple[int, int, int]
    tile: tuple[int, int]  # rows and columns of C computed by one block
    defines: dict[str, int] = field(default_factory=dict)
    compute_mode: str = "fp32"  # "fp32", or "tf32": tensor-core inputs rounded to TF32 (10-bit mantissa)
    # "registry": our own source; "job": brought by a job, so hostile until proven otherwise
    # (compiled only where the compiler is confined, its compile log filtered).
    origin: str = "registry"
    # The one GPU target the kernel is built for when it uses instructions of that target only
    # ("sm_90a": wgmma, setmaxnreg); None: built for whatever GPU runs it.
    arch: str | None = None
    # Bytes of dynamic shared memory per block (above 48 KiB the runner raises the kernel's limit).
    dynamic_smem: int = 0
    # Tail-split kernels: blocks per wave (see tail_pieces); 0: one block per C tile, 2-D grid.
    wave: int = 0

    def grid(self, m: int, n: int) -> tuple[int, int, int]:
        tiles_n, tiles_m = -(-n // self.tile[1]), -(-m // self.tile[0])
        if self.wave:
            tiles = tiles_m * tiles_n
            tail = tiles % self.wave
            return (tiles - tail + tail * tail_pieces(tail, self.wave), 1, 1)
        return (tiles_n, tiles_m, 1)

    def compile_options(self) -> tuple[str, ...]:
        return ("-std=c++17", *(f"-D{k}={v}" for k, v in sorted(self.defines.items())))

    def not_applicable_on(self, compute_capability: str) -> str | None:
        """Why this kernel cannot run on a GPU of that compute capability ("9.0" or "90"), or None."""
        if self.arch is None:
            return None
        needed = arch_compute_capability(self.arch)
        have = compute_capability if "." in compute_capability else f"{compute_capability[:-1]}.{compute_capability[-1:]}"
        if have == needed:
            return None
        return (f"not applicable: {self.variant} is built for {self.arch} and runs only on compute capability "
                f"{needed}; this GPU has {have}")


def arch_compute_capability(arch: str) -> str:
    """'sm_90a' -> '9.0', 'sm_100a' -> '10.0': the one compute capability an arch-specific target runs on."""
    match = re.fullmatch(r"sm_(\d+)(\d)a?", arch)
    if match is None:
        raise ValueError(f"not a GPU target: {arch!r}")
    return f"{match.group(1)}.{match.group(2)}"


@dataclass(frozen=True)
class KernelSpec:
    name: str
    technique: str
    source_file: str | None
    entry: str
    block: tuple[Dim, Dim, Dim]
    tile: tuple[Dim, Dim]
    tunables: tuple[Tunable, ...] = ()
    seed: str | None = None
    prelude: tuple[str, ...] = (COMMON,)
    # "fp32": true FP32 arithmetic, checked against cuBLAS FP32. "tf32": inputs rounded to TF32 for
    # the tensor cores; to be checked with a TF32 tolerance and compared with cuBLAS TF32.
    compute_mode: str = "fp32"
    # See LaunchSpec.arch: a kernel that needs one target (e.g. "sm_90a") declares it here.
    arch: str | None = None
    # Dynamic shared memory in bytes, from the resolved tunables (None: the kernel uses none).
    dynamic_smem: Callable[[dict[str, int]], int] | None = None
    # Tail-split kernels (tail_split_k.cu): the blocks of one wave, from the resolved tunables; the
    # grid then has extra blocks for the pieces of the last partial wave's tiles. None: one per C tile.
    wave: Callable[[dict[str, int]], int] | None = None
    # -D values fixed for this variant (not tunables): a step that is another file's code with one
    # switch on (tail_split_k_overlap is tail_split_k.cu with LAST_K_AFTER_BARRIER=1).
    fixed_defines: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.compute_mode not in COMPUTE_MODES:
            raise ValueError(f"{self.name}: compute_mode {self.compute_mode!r} not in {COMPUTE_MODES}")

    def defaults(self) -> dict[str, int]:
        return {t.name: t.default for t in self.tunables}

    def check_params(self, params: dict[str, int] | None) -> dict[str, int]:
        """Merge params over the defaults; a name or value outside the registry is a ValueError."""
        known = {t.name: t for t in self.tunables}
        merged = self.defaults()
        for name, value in (params or {}).items():
            if name not in known:
                raise ValueError(f"{self.name} has no tunable {name!r}; tunables: {sorted(known) or 'none'}")
            if value not in known[name].values:
                raise ValueError(f"{self.name}: {name}={value} not allowed; allowed: {list(known[name].values)}")
            merged[name] = value
        return merged

    def resolve(self, params: dict[str, int] | None = None) -> LaunchSpec:
        if self.source_file is None:
            raise ValueError(f"{self.name} is a library call, not a kernel to compile")
        values = self.check_params(params)

        def dim(d: Dim) -> int:
            return values[d] if isinstance(d, str) else d

        return LaunchSpec(
            variant=self.name,
            source=self.source(),
            entry=self.entry,
            block=tuple(dim(d) for d in self.block),  # type: ignore[arg-type]
            tile=tuple(dim(d) for d in self.tile),  # type: ignore[arg-type]
            defines={**self.fixed_defines, **values},
            compute_mode=self.compute_mode,
            arch=self.arch,
            dynamic_smem=self.dynamic_smem(values) if self.dynamic_smem else 0,
            wave=self.wave(values) if self.wave else 0,
        )

    def source(self) -> str:
        """The prelude files, then the kernel's own file, as one translation unit."""
        if self.source_file is None:
            raise ValueError(f"{self.name} is a library call, not a kernel to compile")
        parts = [*self.prelude, self.source_file]
        return "".join(f'#line 1 "{part}"\n{(KERNEL_DIR / part).read_text()}\n' for part in parts)

    def describe(self) -> dict:
        return {
            "name": self.name,
            "technique": self.technique,
            "seed": self.seed,
            "source_file": self.source_file,
            "entry": self.entry,
            "compute_mode": self.compute_mode,
            "arch": self.arch,
            "tunables": [{"name": t.name, "values": list(t.values), "default": t.default} for t in self.tunables],
        }


SEED_000 = "000_3aaa2eae4ca2accc.txt"
SEED_TEXTBOOK = "001_adac3a76413eb491.txt"  # openmlsys textbook: the FP32 SGEMM optimisation ladder
SEED_GUIDE = "002_3f42798b53ca6e9c.txt"  # CUDA programming guide's Matrix / GetSubMatrix kernels
SEED_SWIZZLE = "003_6ba4e7f2604c6f00.txt"  # shared-memory bank conflicts: XOR swizzle vs padding
SEED_PITCHED = "004_d0a690938e8c7a2e.txt"  # TILE kernel with transposed B; register-staged A^T kernel

def _tf32_wgmma_smem(values: dict[str, int]) -> int:
    """tf32_wgmma.cu's kSmemBytes: STAGES slabs of A (BM x 32 floats) and B (32 x 136 floats),
    two 8-byte mbarriers per stage, and 1 KiB to align the ring to the 128-byte swizzle's period."""
    return values["STAGES"] * (values["BM"] * 32 * 4 + 32 * 136 * 4) + 16 * values["STAGES"] + 1024


def _tail_split_wave(values: dict[str, int]) -> int:
    """tail_split_k.cu's WAVE: blocks resident at once on 132 SMs, two per SM where the tile's
    registers allow it (its MIN_BLOCKS: 4 x 8 outputs per thread or fewer, or 8 x 8 at BK=8)."""
    tm, tn = values["BM"] // 16, values["BN"] // 16
    return 132 * (2 if tm * tn <= 32 or (tm == 8 and tn == 8 and values["BK"] == 8) else 1)


def _tail_split(name: str, technique: str, fixed_defines: dict[str, int] | None = None) -> KernelSpec:
    """A build of tail_split_k.cu (past the seeds: it builds on warp_tile_large and the textbook
    ladder); the steps share its tile, tunables and grid, and differ by fixed -D switches."""
    return KernelSpec(
        name=name,
        technique=technique,
        source_file="tail_split_k.cu",
        entry="sgemm_tail_split_k",
        block=(256, 1, 1),
        tile=("BM", "BN"),
        tunables=(
            Tunable("BM", (64, 128), 128),
            Tunable("BN", (128, 256), 256),
            Tunable("BK", (8, 16), 16),
            # k-step of a slab at which the next slab's global loads go out (the kernel says why)
            Tunable("LDG_STEP", (2, 4), 4),
        ),
        seed=SEED_TEXTBOOK,
        prelude=(COMMON, TILE128),
        wave=_tail_split_wave,
        fixed_defines=fixed_defines or {},
    )


def _tile128(name: str, technique: str, seed: str) -> KernelSpec:
    """A step of the 128x128 ladder (smem_block_tile ... warp_tile's siblings): they share the
    block shape, C tile, BK tunable and the tile128.cuh prelude, and differ in technique only."""
    return KernelSpec(
        name=name,
        technique=technique,
        source_file=f"{name}.cu",
        entry=f"sgemm_{name}",
        block=(16, 16, 1),
        tile=(128, 128),
        tunables=(Tunable("BK", (8, 16), 8),),
        seed=seed,
        prelude=(COMMON, TILE128),
    )


VARIANTS: dict[str, KernelSpec] = {
    spec.name: spec
    for spec in (
        KernelSpec(
            name=CUBLAS,
            technique="vendor baseline: cuBLAS SGEMM through cupy.matmul, true FP32 (TF32 off)",
            source_file=None,
            entry="cupy.matmul",
            block=(0, 0, 0),
            tile=(0, 0),
        ),
        KernelSpec(
            name="naive",
            technique="one thread per C element, 32x32 thread block, operands straight from global memory",
            source_file="naive.cu",
            entry="sgemm_naive",
            block=("BLOCK", "BLOCK", 1),
            tile=("BLOCK", "BLOCK"),
            tunables=(Tunable("BLOCK", (8, 16, 32), 32),),
            seed=SEED_000,
        ),
        KernelSpec(
            name="smem_tiled",
            technique="32x32 shared-memory tiles of A and B, one C element per thread, any M, N, K",
            source_file="smem_tiled.cu",
            entry="sgemm_smem_tiled",
            block=("TILE", "TILE", 1),
            tile=("TILE", "TILE"),
            tunables=(Tunable("TILE", (8, 16, 32), 32),),
            seed=SEED_000,
        ),
        KernelSpec(
            name="guide_global_strided",
            technique="one thread per C element through strided Matrix {width, height, stride} views "
            "built in the kernel, operands from global memory (the CUDA guide's first kernel)",
            source_file="guide_global_strided.cu",
            entry="sgemm_guide_global_strided",
            block=("BLOCK_SIZE", "BLOCK_SIZE", 1),
            tile=("BLOCK_SIZE", "BLOCK_SIZE"),
            tunables=(Tunable("BLOCK_SIZE", (8, 16, 32), 16),),
            seed=SEED_GUIDE,
            prelude=(COMMON, GUIDE_MATRIX),
        ),
        KernelSpec(
            name="guide_smem_submatrix_16",
            technique="16x16 shared-memory tiles walked as GetSubMatrix views clipped at the edges, "
            "one C element per thread (the CUDA guide's shared-memory kernel)",
            source_file="guide_smem_submatrix_16.cu",
            entry="sgemm_guide_smem_submatrix_16",
            block=(16, 16, 1),
            tile=(16, 16),
            seed=SEED_GUIDE,
            prelude=(COMMON, GUIDE_MATRIX),
        ),
        KernelSpec(
            name="naive_16x16_alpha_beta",
            technique="one thread per C element in a 16x16 block with the textbook's threadIdx.x -> row "
            "mapping (uncoalesced), C read only when beta != 0",
            source_file="naive_16x16_alpha_beta.cu",
            entry="sgemm_naive_16x16_alpha_beta",
            block=(16, 16, 1),
            tile=(16, 16),
            tunables=(Tunable("COALESCED", (0, 1), 0),),
            seed=SEED_TEXTBOOK,
        ),
        KernelSpec(
            name="float4_thread_tile_4x4",
            technique="4x4 C elements per thread from 128-bit float4 global loads, no shared memory, "
            "scalar fallback for unaligned rows and edges",
            source_file="float4_thread_tile_4x4.cu",
            entry="sgemm_float4_thread_tile_4x4",
            block=(16, 16, 1),
            tile=(64, 64),
            seed=SEED_TEXTBOOK,
        ),
        KernelSpec(
            name="thread_tile_8x8",
            technique="8x8 C elements per thread (2x2 quadrants of 4x4) from float4 global loads, "
            "no shared memory",
            source_file="thread_tile_8x8.cu",
            entry="sgemm_thread_tile_8x8",
            block=(16, 16, 1),
            tile=(128, 128),
            seed=SEED_TEXTBOOK,
        ),
        _tile128(
            "smem_block_tile",
            "128 x BK slabs of A and B staged in shared memory by the whole block, 8x8 register "
            "tile per thread read from shared memory",
            seed=SEED_TEXTBOOK,
        ),
        _tile128(
            "smem_a_transposed",
            "smem_block_tile with the A slab stored transposed (As[k][m]) so each thread's A "
            "fragment is two float4 shared loads",
            seed=SEED_TEXTBOOK,
        ),
        _tile128(
            "smem_prefetch_registers",
            "smem_a_transposed with shared-memory fragments double-buffered in registers, "
            "loaded one k-step ahead of the FMAs",
            seed=SEED_TEXTBOOK,
        ),
        _tile128(
            "global_prefetch_double_buffer",
            "next slab's global loads issued into registers before computing the current one, "
            "stored afterwards into the other of two shared buffers (one barrier per slab)",
            seed=SEED_TEXTBOOK,
        ),
        _tile128(
            "smem_padding",
            "global_prefetch_double_buffer with the transposed-A store bank conflict removed "
            "by padding each shared k-row by 4 floats (keeps float4 alignment)",
            seed=SEED_SWIZZLE,
        ),
        _tile128(
            "smem_swizzle_xor",
            "global_prefetch_double_buffer with the transposed-A store bank conflict removed "
            "by XOR-swizzling 16-byte chunks per k-row (no padding)",
            seed=SEED_SWIZZLE,
        ),
        KernelSpec(
            name="pitched_b_transposed_tile",
            technique="TILE x TILE shared tiles addressed through byte pitches, B transposed while "
            "staged (SubB[x][y]); SKEW=1 pads away its bank conflicts",
            source_file="pitched_b_transposed_tile.cu",
            entry="sgemm_pitched_b_transposed_tile",
            block=("TILE", "TILE", 1),
            tile=("TILE", "TILE"),
            tunables=(Tunable("TILE", (16, 32), 16), Tunable("SKEW", (0, 1), 0)),
            seed=SEED_PITCHED,
        ),
        KernelSpec(
            name="register_staged_at",
            technique="global -> register -> shared staging issued before the barrier, A transposed "
            "into padded shared memory, (TILE/16)^2 interleaved outputs per thread",
            source_file="register_staged_at.cu",
            entry="sgemm_register_staged_at",
            block=(16, 16, 1),
            tile=("TILE", "TILE"),
            tunables=(Tunable("TILE", (32, 64, 128), 64),),
            seed=SEED_PITCHED,
        ),
        KernelSpec(
            name="warp_tile",
            technique="2x4 warps of 64x32 C sub-tiles, 8x4 lanes of 8x8 per warp, on the double-buffered, "
            "swizzled, register-prefetched 128x128 pipeline",
            source_file="warp_tile.cu",
            entry="sgemm_warp_tile",
            block=(256, 1, 1),
            tile=(128, 128),
            tunables=(Tunable("BK", (8, 16), 8),),
            seed=SEED_TEXTBOOK,  # past the seeds: builds on the textbook ladder
            prelude=(COMMON, TILE128),
        ),
        KernelSpec(
            name="cp_async_multistage",
            technique="cp.async 16-byte copies (4-byte zero-fill fallback) into a STAGES-deep shared "
            "ring, warp-tiled 128x128 blocks",
            source_file="cp_async_multistage.cu",
            entry="sgemm_cp_async_multistage",
            block=(256, 1, 1),
            tile=(128, 128),
            tunables=(Tunable("STAGES", (2, 3, 4), 4),),
            seed=SEED_TEXTBOOK,  # past the seeds: builds on the textbook ladder
        ),
        KernelSpec(
            name="warp_tile_large",
            technique="warp_tile's double-buffered, swizzled pipeline with larger tunable block tiles "
            "(default 128x256, 8x16 outputs per thread, BK=16), unguarded slab loads for blocks inside C, "
            "grouped block rasterisation",
            source_file="warp_tile_large.cu",
            entry="sgemm_warp_tile_large",
            block=(256, 1, 1),
            tile=("BM", "BN"),
            tunables=(
                Tunable("BM", (64, 128), 128),
                Tunable("BN", (128, 256), 256),
                Tunable("BK", (8, 16), 16),
                Tunable("GROUP_M", (1, 8), 8),
                Tunable("FMA_ORDER", (0, 1), 0),
            ),
            seed=SEED_TEXTBOOK,  # past the seeds: builds on warp_tile and the textbook ladder
            prelude=(COMMON, TILE128),
        ),
        _tail_split(
            "tail_split_k",
            "warp_tile_large's 128x256 tile and pipeline; whole waves of tiles one block each, the "
            "tiles of the last partial wave cut along K into pieces (as many as balance them over the SMs), "
            "finished through C in k order behind per-tile flags, beta applied once, no workspace",
        ),
        # tail_split_k.cu with LAST_K_AFTER_BARRIER=1: the file's header explains the step
        _tail_split(
            "tail_split_k_overlap",
            "tail_split_k with each slab's last k-step of FFMAs moved behind the barrier and the "
            "next slab's first shared-memory fragment loads, so the FFMAs cover those loads' latency",
            fixed_defines={"LAST_K_AFTER_BARRIER": 1},
        ),
        KernelSpec(
            name="tf32_mma_sync",
            technique="TF32 tensor cores through inline-PTX mma.sync m16n8k8 (inputs rounded with "
            "cvt.rna.tf32), 2x4 warps of 64x32 C sub-tiles on a double-buffered 128x128 x BK "
            "shared-memory pipeline, FP32 accumulation",
            source_file="tf32_mma_sync.cu",
            entry="sgemm_tf32_mma_sync",
            block=(256, 1, 1),
            tile=(128, 128),
            tunables=(Tunable("BK", (8, 16), 16),),
            seed=SEED_TEXTBOOK,  # past the seeds: builds on the textbook ladder
            compute_mode="tf32",
        ),
        KernelSpec(
            name="tf32_wgmma",
            technique="Hopper wgmma.mma_async (sm_90a) on TF32: C^T = B^T A^T so A is read K-major from "
            "128-byte-swizzled shared memory by the tensor cores and B^T comes from registers; a "
            "warp-specialised cp.async producer fills a STAGES-deep mbarrier ring, two consumer "
            "warpgroups own BM x 64 of C each, setmaxnreg moves registers to them",
            source_file="tf32_wgmma.cu",
            entry="sgemm_tf32_wgmma",
            block=(384, 1, 1),
            tile=("BM", 128),
            tunables=(
                Tunable("BM", (128, 256), 256),
                Tunable("STAGES", (3, 4), 4),
                Tunable("GROUP_M", (1, 8), 8),
            ),
            seed=SEED_TEXTBOOK,  # past the seeds: builds on tf32_mma_sync and the textbook ladder
            compute_mode="tf32",
            arch="sm_90a",
            dynamic_smem=_tf32_wgmma_smem,
        ),
    )
}


def variant_names() -> list[str]:
    return list(VARIANTS)
