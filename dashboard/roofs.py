"""The GPU's roofs, as the overview's peak line and the roofline draw them.

Compute: SMs x the precision's dense flops per SM per clock (core/description/precision.py: FP32 lanes x 2,
an FMA being two flops; tensor cores per compute capability) x the maximum SM clock, as NVML
reports it. The runner's env.peak is the same arithmetic (worker/measure/runner.py peak()).

Memory: bytes per second = 2 x the maximum memory clock x the bus width / 8. NVML reports the
memory clock at half the data rate (HBM and GDDR move data on both edges): an H100 SXM's
2619 MHz x 2 x 5120 bits / 8 is 3.35 TB/s, its data sheet's figure; an A100's 1593 MHz makes 2.04.

Arithmetic intensity of a GEMM: its 2MNK flops over the fewest bytes it must move, A and B read
once and C written once (beta = 0 leaves C unread) in the precision's types. A kernel that reads
its operands from DRAM more than once sits under this point, never right of it.
"""

from dataclasses import dataclass

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from core.records.models import Gpu, Result
from core.description.precision import INPUT_TYPE, TYPE_BYTES, Precision, flops_per_sm_per_clock
from core.results.env_reading import gpu_of

@dataclass(frozen=True)
class Peak:
    gflops: float | None
    how: str  # the arithmetic, or why there is no number


@dataclass(frozen=True)
class Bandwidth:
    gbs: float | None  # GB/s (1e9 bytes)
    how: str


def peak(sm_count: int | None, compute_capability: str | None, max_sm_clock_mhz: float | None,
         precision: str = "fp32") -> Peak:
    label = precision.upper()
    per_clock = flops_per_sm_per_clock(compute_capability, precision)
    if not sm_count:
        return Peak(None, f"{label} peak unknown: the GPU's SM count was not recorded")
    if not max_sm_clock_mhz:
        return Peak(None, f"{label} peak unknown: no maximum SM clock recorded for this GPU (env.gpu.max_sm_clock_mhz)")
    if per_clock is None:
        return Peak(None, f"{label} peak unknown: no {label} rate known for compute capability {compute_capability}")
    gflops = sm_count * per_clock * max_sm_clock_mhz / 1e3
    rate = f"{per_clock // 2} lanes × 2" if precision == "fp32" else f"{per_clock} flops per clock"
    return Peak(gflops, f"{label} peak {gflops / 1e3:,.1f} TFLOPS = {sm_count} SMs × {rate} × {max_sm_clock_mhz:g} MHz")


def bandwidth(memory_bus_bits: int | None, max_mem_clock_mhz: int | None) -> Bandwidth:
    if not (memory_bus_bits and max_mem_clock_mhz):
        return Bandwidth(None, "memory roof unknown: the worker that measured these results did not record the "
                               "memory bus width and clock (env.gpu.memory_bus_bits, max_mem_clock_mhz)")
    gbs = 2 * max_mem_clock_mhz * 1e6 * memory_bus_bits / 8 / 1e9
    return Bandwidth(gbs, f"memory {gbs / 1e3:,.2f} TB/s = 2 × {max_mem_clock_mhz} MHz × {memory_bus_bits} bits / 8")


def intensity(m: int, n: int, k: int, compute_mode: str, output_type: str | None = None) -> float:
    """Flops per byte of the fewest bytes the GEMM moves (the module's docstring)."""
    inputs = TYPE_BYTES[INPUT_TYPE[compute_mode]]
    out = TYPE_BYTES.get(output_type or Precision(compute_mode).output_type, 4)  # FP8 writes BF16 by default
    return 2 * m * n * k / (inputs * (m * k + k * n) + out * m * n)


def gpu_roofs(db: Session, gpu_name: str, result_id: int, precision: str) -> tuple[Peak, Bandwidth]:
    """SM count and compute capability are on the GPU row; clocks and the bus only in a result's env."""
    sm_count, cc = db.execute(
        select(func.max(Gpu.sm_count), func.max(Gpu.compute_capability)).where(Gpu.name == gpu_name)
    ).one()
    gpu = gpu_of(db.scalar(select(Result.env).where(Result.id == result_id))) or {}
    return (peak(sm_count, cc, gpu.get("max_sm_clock_mhz"), precision),
            bandwidth(gpu.get("memory_bus_bits"), gpu.get("max_mem_clock_mhz")))
