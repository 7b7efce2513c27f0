"""TMA tensor maps for the kernels that take them (a description's `tensor_maps`, args A_map, B_map, C_map).

A tensor map tells Hopper's tensor memory accelerator how a matrix lies in global memory and
which box one copy moves between it and shared memory, with which swizzle. It is made on the host
by the driver (cuTensorMapEncodeTiled) and is opaque, 128 bytes. A kernel takes it one of two ways,
and the runner passes it as the kernel's parameter is declared (worker/arguments/kernel_args.py):
- by address (`const void*`, `const CUtensorMap*`): the runner puts the map in global memory; the
  kernel reads it there after `fence.proxy.tensormap::generic.acquire`, since the map was written
  through the ordinary memory path;
- by value (`const __grid_constant__ CUtensorMap`, as CUTLASS and most Hopper repositories do):
  the 128 bytes go in the kernel's parameters.

The TMA needs the matrix's base 16-byte aligned and its line (row of a row-major matrix) a
multiple of 16 bytes. Where either fails (odd K or N) there is no map: a kernel taking it by
address gets address 0 and must copy another way, so every size still runs. A kernel that reaches
a matrix through its map alone (its pointer not among the args), or that takes the map by value
(no value says "none"), has no other way: such a case is refused, saying why (`unreadable`).
"""

import ctypes
from dataclasses import dataclass
from functools import cache

from core.description.precision import TYPE_BYTES

# CUtensorMapDataType, CUtensorMapSwizzle and CUtensorMapL2promotion (cuda.h, CUDA 12 and 13).
# E4M3 as bytes (UINT8): the TMA only moves them, the kernel reads them as E4M3.
_DATA_TYPE = {"float32": 7, "float16": 6, "bfloat16": 9, "float8_e4m3": 0}
_SWIZZLE = {0: 0, 32: 1, 64: 2, 128: 3}
_L2_PROMOTION_128B = 2
MAP_BYTES = 128


@dataclass(frozen=True)
class MapRequest:
    """What cuTensorMapEncodeTiled is asked for: a 2-D matrix, contiguous dimension first."""

    address: int
    data_type: str
    dims: tuple[int, int]  # elements along the contiguous dimension, lines
    line_bytes: int
    box: tuple[int, int]
    swizzle: int


def request(matrix: str, layout: str, m: int, n: int, k: int, address: int, data_type: str,
            box: tuple[int, int, int]) -> MapRequest | None:
    """The map of A (M x K), B (K x N) or C (M x N) as `layout` stores it, or None where the TMA
    cannot describe it (a base not 16-byte aligned, a line not a multiple of 16 bytes)."""
    inner, outer = _as_stored(matrix, layout, m, n, k)
    line_bytes = inner * TYPE_BYTES[data_type]
    if address % 16 or line_bytes % 16:
        return None
    return MapRequest(address, data_type, (inner, outer), line_bytes, (box[0], box[1]), box[2])


@cache
def _driver():
    lib = ctypes.CDLL("libcuda.so.1")
    lib.cuTensorMapEncodeTiled.restype = ctypes.c_int
    return lib


def host_map(encoded: bytes = bytes(MAP_BYTES)) -> tuple[ctypes.Array, int]:
    """A map's 128 bytes in host memory, 64-byte aligned as CUtensorMap is: the buffer (keep it
    alive while the address is used) and the address."""
    raw = ctypes.create_string_buffer(MAP_BYTES + 64)
    at = (ctypes.addressof(raw) + 63) & ~63
    ctypes.memmove(at, encoded, MAP_BYTES)
    return raw, at


def encode(req: MapRequest) -> bytes:
    """The 128-byte map, from the driver; a RuntimeError with the driver's code if it refuses."""
    raw, at = host_map()  # the driver writes the map there
    dims = (ctypes.c_uint64 * 2)(*req.dims)
    strides = (ctypes.c_uint64 * 1)(req.line_bytes)  # bytes between lines; the first dimension's is implied
    box = (ctypes.c_uint32 * 2)(*req.box)
    element_strides = (ctypes.c_uint32 * 2)(1, 1)
    code = _driver().cuTensorMapEncodeTiled(
        ctypes.c_void_p(at), _DATA_TYPE[req.data_type], 2, ctypes.c_void_p(req.address), dims, strides, box,
        element_strides, 0, _SWIZZLE[req.swizzle], _L2_PROMOTION_128B, 0)  # no interleave; zeros out of bounds
    if code != 0:
        raise RuntimeError(f"cuTensorMapEncodeTiled refused the map of {req} (CUresult {code})")
    return ctypes.string_at(at, MAP_BYTES)


# A Triton kernel's host TensorDescriptor (`X_map` in its args) is five parameters in its cubin: the
# map by value, then the matrix's shape and strides as Triton's launcher passes them (lines, then
# the contiguous side; i32 shapes, i64 strides).
DESCRIPTOR_PARTS = ("shape0", "shape1", "stride0", "stride1")
_SWIZZLE_BYTES = {code: span for span, code in _SWIZZLE.items()}


def descriptor_roles(map_role: str) -> tuple[str, ...]:
    """The parameters a Triton kernel's descriptor `A_map` becomes: A_map, A_map.shape0, ... A_map.stride1."""
    return (map_role, *(f"{map_role}.{part}" for part in DESCRIPTOR_PARTS))


def descriptor_values(launch, m: int, n: int, k: int, batch: int = 1) -> dict[str, int]:
    """The shape and strides a Triton kernel's descriptors are given, as the matrices lie (packed):
    [lines, contiguous extent] and [line length, 1], as TensorDescriptor.from_tensor gives them."""
    if batch != 1:
        raise ValueError(f"{launch.entry} takes its matrices as 2-D TensorDescriptors, which span one matrix: "
                         "it cannot run a batch")
    out = {}
    for matrix in launch.tensor_maps:
        inner, outer = _as_stored(matrix, launch.form.layout(matrix), m, n, k)
        out.update(zip(descriptor_roles(f"{matrix}_map")[1:], (outer, inner, inner, 1)))
    return out


def triton_box(meta: dict) -> tuple[int, int, int]:
    """The box and swizzle Triton compiled a descriptor's loads for (its `tensordesc_meta` entry:
    block_size [lines, contiguous], the CUtensorMapSwizzle code), as (contiguous, lines, swizzle bytes)."""
    lines, inner = meta["block_size"][-2:]
    return int(inner), int(lines), _SWIZZLE_BYTES[int(meta["swizzle"])]


def _as_stored(matrix: str, layout: str, m: int, n: int, k: int) -> tuple[int, int]:
    """A (M x K), B (K x N) or C (M x N) as `layout` stores it: (elements along a line, lines)."""
    rows, cols = {"A": (m, k), "B": (k, n), "C": (m, n)}[matrix]
    return (cols, rows) if layout == "row" else (rows, cols)


def data_type(launch, matrix: str) -> str:
    """The type of the elements the map of `matrix` moves: C's is the output's."""
    return launch.precision.output_type if matrix == "C" else launch.precision.input_type


def absent(launch, m: int, n: int, k: int) -> list[str]:
    """The matrices whose map the TMA cannot describe at this size (a line not a multiple of 16 bytes;
    device allocations are aligned far past 16 bytes, so only the line can fail here): the kernel gets
    address 0 or zeros for them and reaches them another way, or the case is refused (unreadable)."""
    return [matrix for matrix, box in launch.tensor_maps.items()
            if request(matrix, launch.form.layout(matrix), m, n, k, 0, data_type(launch, matrix), box) is None]


def stand_in(launch, matrix: str, m: int, n: int, k: int, by_value: frozenset[str] = frozenset()) -> bytes | None:
    """What the kernel is handed for the map of `matrix` where the TMA cannot describe it at this size,
    the one rule for it: address 0 (None) for a map taken by address, 128 zero bytes for one taken by
    value whose description says `zeros_when_absent`; with its pointer among the args, the kernel then
    copies that matrix its other way. A ValueError, saying why, where no value can say "no map": the
    kernel reaches the matrix through its map alone, or takes the map by value with no such promise,
    or is a launcher handed its maps encoded (by_value: the matrices whose maps are by value or a
    launcher's)."""
    alone = matrix not in launch.args
    if not alone and matrix not in by_value:
        return None
    if not alone and matrix in launch.zero_maps:
        return bytes(MAP_BYTES)
    kind = data_type(launch, matrix)
    line = _as_stored(matrix, launch.form.layout(matrix), m, n, k)[0]
    how = (f"through its tensor map alone ({matrix}_map, no {matrix} among its args)" if alone else
           f"through {matrix}_map, which a launcher is handed encoded, with no value for \"none\""
           if launch.launcher else
           f"through {matrix}_map, which it takes by value (a map by address could be 0 here)")
    raise ValueError(f"{launch.launcher or launch.entry} reaches {matrix} {how}, and the TMA cannot describe {matrix} "
                     f"at {m}x{n}x{k}: a line of {line} elements is {line * TYPE_BYTES[kind]} bytes, not a multiple of 16")


def unreadable(launch, m: int, n: int, k: int, by_value: frozenset[str] = frozenset()) -> str | None:
    """Why this case cannot run (stand_in's reason for the first matrix the TMA cannot describe and
    the kernel has no other way to), else None."""
    for matrix in absent(launch, m, n, k):
        try:
            stand_in(launch, matrix, m, n, k, by_value)
        except ValueError as why:
            return str(why)
    return None
