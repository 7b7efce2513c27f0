"""Nsight Compute's raw page, as `ncu --csv --page raw --print-units base
--print-metric-instances values` prints it, read into one typed record per profiled kernel.

What ncu prints (tests/fixtures/profiles/*.ncu.csv.gz): the program's own output and ncu's
`==PROF==`/`==WARNING==` notes first, then the CSV header (`"ID","Process ID",...`), one row of
units, then one row per kernel launch. Numbers carry thousands separators ("2,745,376"); a launch
attribute repeats its value in brackets ("255 (255)"); an instanced metric prints its aggregate,
then its instances' values in brackets ("2,367,056,548 (2,148,433,920; 100,674,816; ...)").
Some cells are words ("PolicySpread", "no data", "nan").

Only a fixed, documented set of metrics is kept (METRICS below, the one table that names them);
a metric the recording lacks is None, never an error. Input that is not ncu's CSV at all is an
NcuParseError that says what was missing.

Every metric is a hardware counter. Nsight Compute's `sass__*` and `smsp__sass_*` metrics are
counted by patching the kernel's SASS, which costs a replay of its own and a slower kernel: on the
H100 they took a confirmed pair's profile from 6.0-6.9 s to 9.7-11.6 s at 4096^3
(docs/BENCHMARKS.md). The executed instruction mix by class comes from the counters of the same
names without `sass` (MIX); spills are read as local-memory instructions executed (LDL/STL in MIX)
beside the cubin's stack frame and the main loop's LDL/STL (core/profile/sass_stats.py).
"""

from __future__ import annotations

import csv
import io
import math
import re
from dataclasses import dataclass, field


class NcuParseError(ValueError):
    """The text is not Nsight Compute's raw CSV page (or has no kernel in it)."""


@dataclass(frozen=True)
class MetricSpec:
    key: str  # our name, used in the diff's JSON
    label: str  # what people read
    metric: str  # ncu's metric name
    unit: str  # the unit the value is kept in (ncu's base unit)
    higher_is_better: bool | None  # None: neither direction is better by itself


# The fixed metric set (issue 39). Every metric here is in the recorded raw page.
METRICS: tuple[MetricSpec, ...] = (
    MetricSpec("duration", "duration", "gpu__time_duration.sum", "ns", False),
    MetricSpec("gpc_cycles", "GPC cycles elapsed", "gpc__cycles_elapsed.avg", "cycle", False),
    MetricSpec("sm_cycles_active", "SM cycles active", "sm__cycles_active.avg", "cycle", False),
    MetricSpec("sm_clock", "SM clock", "gpc__cycles_elapsed.avg.per_second", "Hz", True),
    MetricSpec("dram_clock", "DRAM clock", "dram__cycles_elapsed.avg.per_second", "Hz", True),
    MetricSpec("sm_throughput", "SM throughput", "sm__throughput.avg.pct_of_peak_sustained_elapsed", "%", True),
    MetricSpec("memory_throughput", "memory throughput",
               "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed", "%", True),
    MetricSpec("dram_throughput", "DRAM throughput", "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed", "%", True),
    MetricSpec("issue_active", "issue active", "smsp__issue_active.avg.pct_of_peak_sustained_active", "%", True),
    MetricSpec("achieved_occupancy", "achieved occupancy", "sm__warps_active.avg.pct_of_peak_sustained_active", "%", True),
    MetricSpec("theoretical_occupancy", "theoretical occupancy", "sm__maximum_warps_per_active_cycle_pct", "%", True),
    MetricSpec("registers", "registers", "launch__registers_per_thread", "register/thread", None),
    MetricSpec("shared_mem_per_block", "shared memory per block", "launch__shared_mem_per_block_allocated", "byte", None),
    MetricSpec("l1_hit_rate", "L1 hit rate", "l1tex__t_sector_hit_rate.pct", "%", True),
    MetricSpec("l2_hit_rate", "L2 hit rate", "lts__t_sector_hit_rate.pct", "%", True),
    MetricSpec("dram_read_bytes", "DRAM bytes read", "dram__bytes_read.sum", "byte", False),
    MetricSpec("dram_write_bytes", "DRAM bytes written", "dram__bytes_write.sum", "byte", False),
    MetricSpec("bank_conflicts", "shared bank conflicts", "l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum", "", False),
    MetricSpec("shared_wavefronts", "shared wavefronts", "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum", "", False),
    MetricSpec("instructions", "instructions executed", "smsp__inst_executed.sum", "inst", False),
    MetricSpec("warp_latency", "warp cycles per issued instruction",
               "smsp__average_warp_latency_per_inst_issued.ratio", "cycle", False),
    MetricSpec("fma_pipe", "FMA pipe (FFMA)", "sm__inst_executed_pipe_fma.avg.pct_of_peak_sustained_active", "%", None),
    MetricSpec("hmma_pipe", "tensor pipe (HMMA)",
               "sm__inst_executed_pipe_tensor_op_hmma.avg.pct_of_peak_sustained_active", "%", None),
    MetricSpec("gmma_pipe", "tensor pipe (GMMA)",
               "sm__inst_executed_pipe_tensor_op_gmma.avg.pct_of_peak_sustained_active", "%", None),
)

# The executed instruction mix by class: warp-level instruction counts of the per-operation hardware
# counters (FFMA/HMMA/GMMA: their pipes' shares are in METRICS above, their static counts in the
# SASS). LDL and STL executed are where a spill shows at run time.
MIX: tuple[MetricSpec, ...] = (
    MetricSpec("LDS", "shared loads (LDS)", "smsp__inst_executed_op_shared_ld.sum", "inst", False),
    MetricSpec("LDSM", "shared matrix loads (LDSM)", "smsp__inst_executed_op_ldsm.sum", "inst", False),
    MetricSpec("STS", "shared stores (STS)", "smsp__inst_executed_op_shared_st.sum", "inst", False),
    MetricSpec("LDG", "global loads (LDG)", "smsp__inst_executed_op_global_ld.sum", "inst", False),
    MetricSpec("STG", "global stores (STG)", "smsp__inst_executed_op_global_st.sum", "inst", False),
    MetricSpec("LDGSTS", "async copies (LDGSTS)", "smsp__inst_executed_op_ldgsts.sum", "inst", False),
    MetricSpec("LDL", "local loads (LDL)", "smsp__inst_executed_op_local_ld.sum", "inst", False),
    MetricSpec("STL", "local stores (STL)", "smsp__inst_executed_op_local_st.sum", "inst", False),
    MetricSpec("TMA", "TMA loads", "smsp__inst_executed_op_tma_ld.sum", "inst", False),
)

# Which resource bounds the blocks per SM: the smallest of these launch limits is the limiter.
OCCUPANCY_LIMITS: dict[str, str] = {
    "registers": "launch__occupancy_limit_registers",
    "shared memory": "launch__occupancy_limit_shared_mem",
    "warps": "launch__occupancy_limit_warps",
    "blocks": "launch__occupancy_limit_blocks",
    "barriers": "launch__occupancy_limit_barriers",
}

STALL_RE = re.compile(r"^smsp__average_warps_issue_stalled_(\w+?)_per_issue_active\.ratio$")
# "selected" is the cycle a warp issues in, not a stall: kept out of the reasons.
NOT_A_STALL = frozenset({"selected"})

_NUMBER = re.compile(r"^[+-]?(\d{1,3}(,\d{3})+|\d+)(\.\d+)?([eE][+-]?\d+)?$")


def parse_number(cell: str | None) -> float | None:
    """The number a cell opens with ("2,745,376", "255 (255)", "-0.00"); None for a word, an
    empty cell, "nan" or "no data"."""
    if cell is None:
        return None
    head = cell.strip().split(" (", 1)[0].strip()
    if not _NUMBER.match(head):
        return None
    value = float(head.replace(",", ""))
    return value if math.isfinite(value) else None


@dataclass
class KernelProfile:
    """One profiled kernel launch: the fixed metric set, stall reasons, mix and limiter."""

    index: int  # the row's position among the kernel rows (a multi-kernel launch has several)
    name: str
    block: str
    grid: str
    values: dict[str, float | None]  # METRICS key -> value in the spec's unit
    stalls: dict[str, float]  # reason -> warp cycles stalled per issued instruction
    mix: dict[str, float | None]  # MIX key -> executed warp instructions
    occupancy_limits: dict[str, float | None]
    raw: dict[str, str] = field(default_factory=dict, repr=False)

    @property
    def occupancy_limiter(self) -> str | None:
        """The resource that allows the fewest blocks per SM; where several tie, all of them
        ("registers + shared memory"), since easing one alone would not raise occupancy."""
        known = {k: v for k, v in self.occupancy_limits.items() if v is not None}
        if not known:
            return None
        fewest = min(known.values())
        return " + ".join(k for k, v in known.items() if v == fewest)

    def top_stalls(self, n: int = 3) -> list[tuple[str, float]]:
        return sorted(self.stalls.items(), key=lambda kv: -kv[1])[:n]

    def value(self, key: str) -> float | None:
        return self.values.get(key)


def _csv_start(lines: list[str]) -> int:
    for i, line in enumerate(lines):
        if line.startswith('"ID",') and '"Kernel Name"' in line:
            return i
    notes = [ln for ln in lines if ln.startswith("==ERROR==")]
    hint = f" (ncu said: {notes[0]})" if notes else ""
    raise NcuParseError(f'no Nsight Compute CSV header ("ID",...,"Kernel Name",...) in the input{hint}')


def parse_ncu_csv(text: str) -> list[KernelProfile]:
    """Every kernel row of ncu's raw CSV page, in the order ncu printed them."""
    if not isinstance(text, str):
        raise NcuParseError("ncu output must be text")
    lines = text.splitlines()
    start = _csv_start(lines)
    try:
        rows = list(csv.reader(io.StringIO("\n".join(lines[start:]))))
    except csv.Error as exc:
        raise NcuParseError(f"ncu CSV unreadable: {exc}") from exc
    header = rows[0]
    body = [r for r in rows[1:] if r]
    # The units row has no launch ID; a recording without --print-units has none at all.
    if body and body[0] and not body[0][0].strip().isdigit():
        body = body[1:]
    if not body:
        raise NcuParseError("ncu CSV has a header but no kernel rows (was any kernel profiled?)")
    profiles = []
    for n, row in enumerate(body):
        if len(row) != len(header):
            raise NcuParseError(f"ncu CSV row {n + 1} has {len(row)} cells, the header {len(header)}")
        profiles.append(_profile(n, dict(zip(header, row))))
    return profiles


def _profile(index: int, cells: dict[str, str]) -> KernelProfile:
    stalls = {}
    for name, cell in cells.items():
        match = STALL_RE.match(name)
        if match and match.group(1) not in NOT_A_STALL:
            value = parse_number(cell)
            if value is not None:
                stalls[match.group(1)] = value
    return KernelProfile(
        index=index,
        name=cells.get("Kernel Name", "").strip() or f"kernel {index}",
        block=cells.get("Block Size", ""),
        grid=cells.get("Grid Size", ""),
        values={s.key: parse_number(cells.get(s.metric)) for s in METRICS},
        stalls=stalls,
        mix={s.key: parse_number(cells.get(s.metric)) for s in MIX},
        occupancy_limits={k: parse_number(cells.get(m)) for k, m in OCCUPANCY_LIMITS.items()},
        raw=cells,
    )
