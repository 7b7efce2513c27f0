"""Every built-in variant, described as data: source, entry point, launch geometry, tunables.

A launch is fully described by a `LaunchSpec`: the CUDA source, the entry function, the
thread-block shape and the C tile each block computes (the grid follows from M and N), and
the -D options. Built-in variants resolve to one through `KernelSpec.resolve`; user kernels
(a later `sources` field) are meant to arrive already in this shape, so the runner has one
path for both.

Geometry values are ints or the name of a tunable, so a tile size is stated once.
"""

from dataclasses import dataclass, field
from pathlib import Path

KERNEL_DIR = Path(__file__).resolve().parent

# The vendor baseline; timed beside every variant and requestable on its own.
CUBLAS = "cublas"

Dim = int | str


@dataclass(frozen=True)
class Tunable:
    name: str
    values: tuple[int, ...]
    default: int


@dataclass(frozen=True)
class LaunchSpec:
    """What the runner needs to compile and launch one kernel (picklable, no file access)."""

    variant: str
    source: str
    entry: str
    block: tuple[int, int, int]
    tile: tuple[int, int]  # rows and columns of C computed by one block
    defines: dict[str, int] = field(default_factory=dict)

    def grid(self, m: int, n: int) -> tuple[int, int, int]:
        return (-(-n // self.tile[1]), -(-m // self.tile[0]), 1)

    def compile_options(self) -> tuple[str, ...]:
        return ("-std=c++17", *(f"-D{k}={v}" for k, v in sorted(self.defines.items())))


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
            source=(KERNEL_DIR / self.source_file).read_text(),
            entry=self.entry,
            block=tuple(dim(d) for d in self.block),  # type: ignore[arg-type]
            tile=tuple(dim(d) for d in self.tile),  # type: ignore[arg-type]
            defines=values,
        )

    def describe(self) -> dict:
        return {
            "name": self.name,
            "technique": self.technique,
            "seed": self.seed,
            "source_file": self.source_file,
            "entry": self.entry,
            "tunables": [{"name": t.name, "values": list(t.values), "default": t.default} for t in self.tunables],
        }


SEED_000 = "000_3aaa2eae4ca2accc.txt"

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
    )
}


def variant_names() -> list[str]:
    return list(VARIANTS)
