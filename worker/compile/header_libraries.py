"""Header libraries a kernel built by nvcc may name (`"libraries": ["cutlass"]`): the worker's own
pinned copy goes on nvcc's include path and into what the confined compile process may read,
and its version into the compiler's label, so every result says which CUTLASS it was built with
(and a verdict between two of them can tell a CUTLASS change from a kernel's).

CUTLASS comes from GEMMWATCH_CUTLASS_DIR (a CUTLASS checkout: include/, tools/util/include/ and examples/common/),
else from the nvidia-cutlass wheel, whose cutlass_library/source is such a checkout's copy. Only
its headers are used: the wheel is installed without its Python dependencies (Makefile, Dockerfile).
"""

import functools
import importlib.util
import re
from dataclasses import dataclass
from pathlib import Path

from core.description.kernel import Launch
from core.description.launch_checks import LAUNCHER_ADAPTERS, adapter_name
from worker.compile.compiled import CompileRefused

KNOWN = ("cutlass",)


@dataclass(frozen=True)
class HeaderLibrary:
    name: str
    version: str
    include_dirs: tuple[str, ...]

    @property
    def label(self) -> str:
        return f"CUTLASS {self.version}" if self.name == "cutlass" else f"{self.name} {self.version}"


def find(names, cfg) -> tuple[HeaderLibrary, ...]:
    """The worker's copy of each library named; CompileRefused saying how to get one that is missing."""
    return tuple(cutlass(cfg.cutlass_dir) for name in names if name == "cutlass")


@functools.cache
def cutlass(configured: Path | None) -> HeaderLibrary:
    root = Path(configured) if configured else _wheel_source()
    if root is None or not (root / "include" / "cutlass" / "version.h").is_file():
        where = f"GEMMWATCH_CUTLASS_DIR={configured} has no include/cutlass/version.h" if configured else \
            "no nvidia-cutlass wheel is installed"
        raise CompileRefused(f"the kernel names the library cutlass, and this worker has none ({where}): install "
                             "its headers with `pip install --no-deps 'nvidia-cutlass>=4.2'`, or set "
                             "GEMMWATCH_CUTLASS_DIR to a CUTLASS checkout")
    # examples/common too, as CUTLASS's own build gives its examples: a repository built on a copy of
    # one (bjmsong/hands-on-gemm's stream-K GEMM) includes its "helper.h" (CUTLASS_CHECK) from there.
    dirs = tuple(str(d) for d in (root / "include", root / "tools" / "util" / "include", root / "examples" / "common")
                 if d.is_dir())
    return HeaderLibrary("cutlass", _version(root / "include" / "cutlass" / "version.h"), dirs)


def _wheel_source() -> Path | None:
    spec = importlib.util.find_spec("cutlass_library")  # finds the package without importing it
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))) / "source"


def _version(header: Path) -> str:
    """CUTLASS_MAJOR.MINOR.PATCH as version.h defines them."""
    text = header.read_text(errors="replace")
    parts = [re.search(rf"#define\s+CUTLASS_{p}\s+(\d+)", text) for p in ("MAJOR", "MINOR", "PATCH")]
    return ".".join(m.group(1) for m in parts if m) or "unknown"


# gemmwatch's own launchers (core/description/launch_checks.LAUNCHER_ADAPTERS), each a header
# compiled after the repository's unit, named as the launcher is (gemmwatch::X is gemmwatch/X.h); the
# folder goes on the include path and into what the compile may read.
ADAPTER_DIR = Path(__file__).with_name("launcher_adapters")


def adapter_header(launcher: str | None) -> str | None:
    """The header (relative to ADAPTER_DIR) of the gemmwatch launcher a description names, else None."""
    name = adapter_name(launcher)
    return f"gemmwatch/{name.removeprefix('gemmwatch::')}.h" if name in LAUNCHER_ADAPTERS else None


# CuTe's element types by storage type, and its orders for the three tensors gemmwatch::cute_tensors makes:
# A (M, K) and C (M, N) are row-major where the matrix is; B is (N, K), so a K x N B stored by columns
# is that tensor's rows.
_CUTE_ELEMENTS = {"float32": "float", "float16": "cutlass::half_t", "bfloat16": "cutlass::bfloat16_t",
                  "float8_e4m3": "cutlass::float_e4m3_t"}
_CUTE_ORDER = {True: "cute::GenRowMajor", False: "cute::GenColMajor"}
# The macros gemmwatch/cute_tensors.h's cute_tensors_as_described reads, one each: nvcc splits a -D value at
# its commas.
CUTE_TYPE_MACROS = ("GEMMWATCH_CUTE_TYPE_A", "GEMMWATCH_CUTE_TYPE_B", "GEMMWATCH_CUTE_TYPE_C",
                    "GEMMWATCH_CUTE_ORDER_A", "GEMMWATCH_CUTE_ORDER_B", "GEMMWATCH_CUTE_ORDER_C")


def cute_tensor_types(launch: Launch) -> dict[str, str]:
    """gemmwatch::cute_tensors' template arguments after its launcher, by the -D macro that gives each
    (CUTE_TYPE_MACROS): the element types of A, B and C, then the order of each tensor, as the
    description's precision and layout give them."""
    precision, form = launch.precision, launch.form
    elements = [_CUTE_ELEMENTS[precision.input_type]] * 2 + [_CUTE_ELEMENTS[precision.output_type]]
    orders = [_CUTE_ORDER[form.a == "row"], _CUTE_ORDER[form.b != "row"], _CUTE_ORDER[form.c == "row"]]
    return dict(zip(CUTE_TYPE_MACROS, elements + orders))


# gemmwatch's stand-in for PyTorch's C++ API, by the build that brings it: a file PyTorch builds
# includes <torch/extension.h> and its launchers take torch::Tensor, and the worker has no libtorch.
# The folder goes on the include path of such a kernel's build, and into what the compile may read.
TORCH_STAND_IN_DIR = Path(__file__).with_name("torch_stand_in")
_BUILD_HEADERS = {"torch.utils.cpp_extension": TORCH_STAND_IN_DIR}


def build_headers(build: str | None) -> Path | None:
    """The folder of headers a build brings (the torch stand-in for PyTorch's), else None."""
    return _BUILD_HEADERS.get(build or "")


@functools.cache
def headers_text(folder: Path) -> str:
    """Every header of the folder, path and text: part of a build's cache key, so an edit rebuilds."""
    return "".join(f"{p.relative_to(folder)}\n{p.read_text()}" for p in sorted(folder.rglob("*.h")))
