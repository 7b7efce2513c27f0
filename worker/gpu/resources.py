"""What a compiled kernel asks of an SM, and how many of its blocks fit: theoretical occupancy.

The maths follows the CUDA occupancy calculator (cuda_occupancy.h): registers are allocated per
warp in units of 256 and split evenly over the SM's 4 sub-partitions; shared memory per block is
the static + dynamic size plus the 1 KiB the runtime reserves per block (cc >= 8.0), rounded up to
the 128-byte allocation unit; then the thread and block limits per SM. Pure Python, so it is tested
against known H100 figures without a GPU; the runner feeds it the loaded function's attributes.
"""

import math
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class SmLimits:
    regs_per_sm: int = 65536
    smem_per_sm: int = 233472  # 228 KiB: the largest carveout, which the driver picks when a kernel needs it
    max_threads_per_sm: int = 2048
    max_blocks_per_sm: int = 32
    warp_size: int = 32
    reg_alloc_unit: int = 256  # registers, per warp
    smem_alloc_unit: int = 128  # bytes
    smem_reserved_per_block: int = 1024
    sub_partitions: int = 4
    max_regs_per_thread: int = 255


H100 = SmLimits()


def occupancy(threads_per_block: int, regs_per_thread: int, smem_per_block: int, sm: SmLimits = H100) -> dict:
    """Blocks of this kernel resident on one SM, and which resource stops the next one."""
    warps = math.ceil(threads_per_block / sm.warp_size)
    by_threads = sm.max_threads_per_sm // sm.warp_size // warps if warps else 0
    if regs_per_thread > 0:
        regs_per_warp = math.ceil(regs_per_thread * sm.warp_size / sm.reg_alloc_unit) * sm.reg_alloc_unit
        warps_per_partition = (sm.regs_per_sm // sm.sub_partitions) // regs_per_warp
        by_registers = warps_per_partition * sm.sub_partitions // warps
    else:
        by_registers = sm.max_blocks_per_sm
    smem = math.ceil((smem_per_block + sm.smem_reserved_per_block) / sm.smem_alloc_unit) * sm.smem_alloc_unit
    by_smem = sm.smem_per_sm // smem
    limits = {"registers": by_registers, "shared memory": by_smem, "threads": by_threads,
              "blocks": sm.max_blocks_per_sm}
    # Ties name the scarcer hardware resource first (registers, then shared memory).
    limited_by = min(limits, key=lambda name: limits[name])
    blocks = limits[limited_by]
    max_warps = sm.max_threads_per_sm // sm.warp_size
    return {"blocks_per_sm": blocks, "limited_by": limited_by, "warps_per_sm": blocks * warps,
            "occupancy": blocks * warps / max_warps, "limits": limits}


def describe(attrs: dict, block: tuple[int, ...] | None, dynamic_smem: int = 0, sm: SmLimits = H100) -> dict:
    """The result's `env["resources"]`: the function's attributes and its occupancy (none where the
    block is a launcher's own, unknown here)."""
    threads = math.prod(block) if block is not None else None
    static_smem = int(attrs.get("shared_size_bytes", 0))
    out = {
        "registers_per_thread": int(attrs.get("num_regs", 0)),
        "static_smem_bytes": static_smem,
        "dynamic_smem_bytes": dynamic_smem,
        "local_bytes_per_thread": int(attrs.get("local_size_bytes", 0)),
        "max_threads_per_block": int(attrs.get("max_threads_per_block", 0)),
        "threads_per_block": threads,
    }
    if threads is not None:
        out.update(occupancy(threads, out["registers_per_thread"], static_smem + dynamic_smem, sm))
    return out


# CUfunction_attribute values (cuda.h), stable since CUDA 2.x.
_FUNC_ATTRS = {"max_threads_per_block": 0, "shared_size_bytes": 1, "const_size_bytes": 2,
               "local_size_bytes": 3, "num_regs": 4}


def function_attributes(function) -> dict:
    """The loaded CUfunction's attributes: CuPy 14's RawKernel reports them itself (same names as
    CUfunction_attribute); an older CuPy's module Function goes through the driver API."""
    if hasattr(function, "attributes"):
        found = function.attributes
        return {name: found[name] for name in _FUNC_ATTRS if name in found}
    from cupy.cuda import driver  # CuPy is optional (gemmwatch[gpu]): imported only where a GPU is used

    return {name: driver.funcGetAttribute(code, function.ptr) for name, code in _FUNC_ATTRS.items()}


def sm_limits(device) -> SmLimits:
    """This GPU's limits from its device attributes; the H100 values where an attribute is missing."""
    a = device.attributes
    return SmLimits(
        regs_per_sm=a.get("MaxRegistersPerMultiprocessor", H100.regs_per_sm),
        smem_per_sm=a.get("MaxSharedMemoryPerMultiprocessor", H100.smem_per_sm),
        max_threads_per_sm=a.get("MaxThreadsPerMultiProcessor", H100.max_threads_per_sm),
        max_blocks_per_sm=a.get("MaxBlocksPerMultiprocessor", H100.max_blocks_per_sm),
        warp_size=a.get("WarpSize", H100.warp_size),
        smem_reserved_per_block=a.get("ReservedSharedMemoryPerBlock", H100.smem_reserved_per_block),
    )


def for_function(function, block: tuple[int, ...] | None, device, dynamic_smem: int = 0) -> dict:
    return describe(function_attributes(function), block, dynamic_smem, sm_limits(device)) | {"sm": asdict(sm_limits(device))}

