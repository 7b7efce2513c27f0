"""One compared quantity of a profile diff (core/profile/profile_diff.py), and how much it weighs.

The score of a candidate cause is weight × magnitude × direction:

- magnitude: how much of the kernel the change touches, as a fraction, per kind of row:
  `relative`  |head − base| / |base| (registers, occupancy, clocks, instruction counts, bytes);
  `points`    |head − base| / 100 for a rate already in % (cache hit rates);
  `stall`     |Δ| / base warp cycles per issued instruction: a stall reason's share of a warp's
              time per instruction (so 0.16 → 0.21 of 2.41 is 2 %, not the 31 % it is relatively);
  `share`     |Δ| / a named total (an executed instruction class over all instructions executed,
              bank conflicts over shared wavefronts, a main-loop class over the loop's length);
  `appear`    local memory (spills) going from none to some, or back, is 1 (saturated): its cost
              is latency on the critical path, which no share of instruction counts shows.
  Every magnitude is capped at 1; under NOISE (0.2 %) a row counts as unchanged.
- weight (WEIGHTS): how directly the row can cost time. Spills 3; clocks, occupancy and stall
  reasons 2 (time = cycles / clock; stalls are cycles); instruction counts, the main loop's
  contents and its barrier placement 1.5; registers, shared memory, caches, DRAM bytes, bank
  conflicts 1; static whole-function counts 0.5 (not weighted by execution); throughputs and pipe
  shares 0.25 (symptoms: they fall with any slowdown); a warp "not selected" 0.5 (it had a
  ready warp beside it: not a cause of waiting).
- direction (core/profile/profile_diff.py): 1 when the row moved the way that explains the effect, 0.25
  when it moved the other way (kept, but ranked low), 1 when the row has no better direction or the
  effect is unknown.
"""

from __future__ import annotations

from dataclasses import dataclass

NOISE = 0.002
COUNTER_EVIDENCE = 0.25
SUMMARY_CAUSES = 3

WEIGHTS = {
    "spill": 3.0, "clock": 2.0, "occupancy": 2.0, "stall": 2.0, "instructions": 1.5,
    "main_loop": 1.5, "barrier_placement": 1.5, "registers": 1.0, "shared_memory": 1.0,
    "cache": 1.0, "dram": 1.0, "bank_conflicts": 1.0, "static_counts": 0.5,
    "not_selected": 0.5, "throughput": 0.25,
}

# ncu METRICS key -> (group, weight key, magnitude kind); "effect" and "context" rows are not ranked.
NCU_ROLES: dict[str, tuple[str, str, str]] = {
    "duration": ("duration", "effect", "relative"),
    "gpc_cycles": ("cycles", "context", "relative"),
    "sm_cycles_active": ("cycles", "context", "relative"),
    "sm_clock": ("SM clock", "clock", "relative"),
    "dram_clock": ("DRAM clock", "clock", "relative"),
    "sm_throughput": ("SM throughput", "throughput", "relative"),
    "memory_throughput": ("memory throughput", "throughput", "relative"),
    "dram_throughput": ("DRAM throughput", "throughput", "relative"),
    "issue_active": ("issue active", "throughput", "relative"),
    "achieved_occupancy": ("occupancy", "occupancy", "relative"),
    "theoretical_occupancy": ("occupancy", "occupancy", "relative"),
    "registers": ("registers", "registers", "relative"),
    "shared_mem_per_block": ("shared memory", "shared_memory", "relative"),
    "l1_hit_rate": ("L1 hit rate", "cache", "points"),
    "l2_hit_rate": ("L2 hit rate", "cache", "points"),
    "dram_read_bytes": ("DRAM bytes", "dram", "relative"),
    "dram_write_bytes": ("DRAM bytes", "dram", "relative"),
    "bank_conflicts": ("bank conflicts", "bank_conflicts", "share"),
    "shared_wavefronts": ("shared wavefronts", "throughput", "relative"),
    "instructions": ("instructions executed", "instructions", "relative"),
    "warp_latency": ("warp latency", "throughput", "relative"),
    "fma_pipe": ("FMA pipe", "throughput", "relative"),
    "hmma_pipe": ("HMMA pipe", "throughput", "relative"),
    "gmma_pipe": ("GMMA pipe", "throughput", "relative"),
}
SPILL_CLASSES = ("LDL", "STL")
# The spill rows the summary quotes, in this order (one per source where it can).
# One row of each source first: local loads executed (a hardware counter; ncu's own spill count
# patches the SASS and costs a replay, core/profile/ncu_metrics.py), the stack frame, the main loop's LDL.
SPILL_EVIDENCE = ("mix.LDL", "res.stack", "loop.LDL", "mix.STL", "res.local", "loop.STL", "sass.LDL", "sass.STL")


@dataclass
class Change:
    key: str  # unique: "ncu.registers", "stall.long_scoreboard", "loop.LDL", ...
    group: str  # the summary names a group once
    label: str
    source: str  # "ncu", "res", "sass"
    base: float | str | None
    head: float | str | None
    unit: str = ""
    higher_is_better: bool | None = None
    role: str = "cause"  # "effect", "context" or "cause"
    weight_key: str = ""
    magnitude: float = 0.0
    score: float = 0.0

    @property
    def changed(self) -> bool:
        if isinstance(self.base, str) or isinstance(self.head, str):
            return self.base != self.head
        return self.magnitude >= NOISE

    @property
    def relative(self) -> float | None:
        pair = numbers(self.base, self.head)
        if pair is None or pair[0] == 0:
            return None
        base, head = pair
        return (head - base) / abs(base)

    def text(self) -> str:
        """"registers 128 → 168 (+31 %)"."""
        if self.base is None or self.head is None:
            return f"{self.label} {formatted(self.base, self.unit)} → {formatted(self.head, self.unit)}"
        rel = self.relative
        pair = numbers(self.base, self.head)
        if self.unit == "%" and pair is not None:
            tail = f" ({pair[1] - pair[0]:+.1f} points)"  # a % of a % reads badly
        else:
            tail = f" ({rel * 100:+.1f} %)" if rel is not None else ""
        return f"{self.label} {formatted(self.base, self.unit)} → {formatted(self.head, self.unit)}{tail}"

    def to_json(self) -> dict:
        return {
            "key": self.key, "group": self.group, "label": self.label, "source": self.source,
            "base": self.base, "head": self.head, "unit": self.unit, "role": self.role,
            "higher_is_better": self.higher_is_better, "relative": self.relative,
            "magnitude": round(self.magnitude, 6), "score": round(self.score, 6),
            "changed": self.changed, "text": self.text(),
        }


def both_numbers(a, b) -> bool:
    return isinstance(a, (int, float)) and isinstance(b, (int, float))


def numbers(a: object, b: object) -> tuple[float, float] | None:
    """(a, b) where both are numbers, else None: both_numbers as a value the type checker follows
    (a row's sides may also be text or missing)."""
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a, b
    return None


def formatted(value, unit: str) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, str):
        return value
    if unit == "Hz":
        return f"{value / 1e6:,.0f} MHz"
    if unit == "%":
        return f"{value:.1f} %"
    if float(value).is_integer():
        text = f"{int(value):,}"
    elif abs(value) >= 100:
        text = f"{value:,.0f}"
    else:
        text = f"{value:.2f}"
    if unit in ("byte", "bytes"):
        return f"{text} bytes"
    return f"{text} {unit}" if unit in ("ns", "cycle") else text


def magnitude(kind: str, base, head, total: float | None = None) -> float:
    if not both_numbers(base, head) or base == head:
        return 0.0
    delta = abs(head - base)
    if kind == "appear":
        if base == 0 or head == 0:
            return 1.0
        kind = "relative"
    if kind == "relative":
        return min(1.0, delta / abs(base)) if base else 1.0
    if kind == "points":
        return min(1.0, delta / 100)
    if kind in ("stall", "share"):
        return min(1.0, delta / total) if total else 0.0
    raise ValueError(kind)
