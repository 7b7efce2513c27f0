"""Base against head, ranked: what moved most between two profiles of a kernel (issue 39).

Inputs, any of which may be missing: each side's Nsight Compute record (core/profile/ncu_metrics.py),
its SASS function and its resource usage (core/profile/sass_stats.py). Output: one row per compared
quantity (core/profile/profile_changes.py: a Change and its score), the changed ones ranked, a one-line
summary and a JSON-ready dict.

The effect is the kernel's duration (ncu's gpu__time_duration); it is always named first and never
ranked. Every other row is a candidate cause, scored weight × magnitude × direction
(core/profile/profile_changes.py says how). The summary names each group (spills, registers, one stall
reason, ...) once, by its best row.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from core.profile.ncu_metrics import METRICS, MIX, KernelProfile
from core.profile.profile_changes import (COUNTER_EVIDENCE, NCU_ROLES, NOISE, SPILL_CLASSES, SPILL_EVIDENCE, SUMMARY_CAUSES, WEIGHTS, Change, magnitude, numbers)
from core.profile.sass_stats import CLASS_ORDER, FunctionSass, LoopDiff, ResUsage, diff_loops

@dataclass
class ProfileDiff:
    kernel: str
    effect: Change | None
    rows: list[Change]  # every compared row, in the order made
    ncu_reason: str | None = None  # why there is no ncu comparison, where there is none
    loop: LoopDiff | None = None
    sass_counts: dict[str, dict[str, int] | None] = field(default_factory=dict)

    @property
    def ranked(self) -> list[Change]:
        causes = [c for c in self.rows if c.role == "cause" and c.changed]
        return sorted(causes, key=lambda c: -c.score)

    def top_causes(self, n: int = SUMMARY_CAUSES) -> list[Change]:
        """The best row of each group, best groups first."""
        seen, out = set(), []
        for change in self.ranked:
            if change.group not in seen:
                seen.add(change.group)
                out.append(change)
        return out[:n]

    def summary_line(self) -> str:
        parts = []
        if self.effect is not None:
            parts.append(self.effect.text())
        else:
            parts.append(f"no Nsight Compute profile ({self.ncu_reason or 'reason not given'})")
        causes = self.top_causes()
        moved = "; ".join(self._group_text(c) for c in causes) if causes else "nothing else moved beyond noise"
        prefix = "what moved most" if self.effect is not None else "SASS"
        return f"{self.kernel}: {parts[0]}; {prefix}: {moved}"

    def _group_text(self, best: Change) -> str:
        """A group's words in the summary: its best row; for spills, the evidence of each source
        together (local loads and stores executed, the stack frame, LDL/STL in the main loop)."""
        if best.group != "spills":
            return best.text()
        by_key = {c.key: c for c in self.rows if c.group == "spills" and c.changed}
        picked = [by_key[k] for k in SPILL_EVIDENCE if k in by_key][:3] or [best]
        return "local-memory spills: " + ", ".join(c.text() for c in picked)

    def table_rows(self) -> list[dict]:
        """Every row, ranked causes first (by score), then the effect and context, then the rest."""
        ranked = self.ranked
        rest = [c for c in self.rows if c not in ranked]
        head = [c for c in rest if c.role != "cause"]
        tail = [c for c in rest if c.role == "cause"]
        return [c.to_json() for c in ([*head, *ranked, *tail])]

    def to_json(self) -> dict:
        return {
            "kernel": self.kernel,
            "summary": self.summary_line(),
            "effect": self.effect.to_json() if self.effect else None,
            "ncu_reason": self.ncu_reason,
            "ranked": [c.key for c in self.ranked],
            "rows": self.table_rows(),
            "main_loop": self.loop.to_json() if self.loop else None,
            "sass_counts": self.sass_counts,
            "weights": WEIGHTS,
            "noise": NOISE,
        }


def _ncu_rows(base: KernelProfile, head: KernelProfile) -> list[Change]:
    rows = []
    wavefronts = base.value("shared_wavefronts")
    for spec in METRICS:
        group, weight_key, kind = NCU_ROLES[spec.key]
        b, h = base.value(spec.key), head.value(spec.key)
        role = weight_key if weight_key in ("effect", "context") else "cause"
        rows.append(Change(
            f"ncu.{spec.key}", group, spec.label, "ncu", b, h, spec.unit, spec.higher_is_better,
            role, weight_key, magnitude(kind, b, h, wavefronts)))
    limiter_b, limiter_h = base.occupancy_limiter, head.occupancy_limiter
    rows.append(Change(
        "ncu.occupancy_limiter", "occupancy", "occupancy limiter", "ncu", limiter_b, limiter_h,
        weight_key="occupancy", magnitude=0.5 if limiter_b != limiter_h else 0.0))
    latency = base.value("warp_latency") or (sum(base.stalls.values()) + 1.0)
    for reason in sorted(set(base.stalls) | set(head.stalls)):
        b, h = base.stalls.get(reason), head.stalls.get(reason)
        not_selected = reason == "not_selected"
        rows.append(Change(
            f"stall.{reason}", f"stall {reason}", f"stall '{reason.replace('_', ' ')}'", "ncu", b, h,
            "cycles/inst", None if not_selected else False, "cause",
            "not_selected" if not_selected else "stall", magnitude("stall", b, h, latency)))
    total = base.value("instructions")
    for spec in MIX:
        b, h = base.mix.get(spec.key), head.mix.get(spec.key)
        spill = spec.key in SPILL_CLASSES
        rows.append(Change(
            f"mix.{spec.key}", "spills" if spill else f"executed {spec.key}", spec.label, "ncu", b, h,
            spec.unit, False, "cause", "spill" if spill else "instructions",
            magnitude("appear" if spill else "share", b, h, total)))
    return rows


def _res_rows(base: ResUsage, head: ResUsage) -> list[Change]:
    return [
        Change("res.registers", "registers", "registers (cuobjdump)", "res", base.registers, head.registers,
               "", None, "cause", "registers", magnitude("relative", base.registers, head.registers)),
        Change("res.stack", "spills", "stack frame", "res", base.stack, head.stack,
               "bytes", False, "cause", "spill", magnitude("appear", base.stack, head.stack)),
        Change("res.local", "spills", "local memory", "res", base.local, head.local,
               "bytes", False, "cause", "spill", magnitude("appear", base.local, head.local)),
        Change("res.shared", "shared memory", "static shared memory", "res", base.shared, head.shared,
               "bytes", None, "cause", "shared_memory", magnitude("relative", base.shared, head.shared)),
    ]


def _sass_rows(base: FunctionSass, head: FunctionSass, loop: LoopDiff) -> list[Change]:
    rows = []
    cb, ch = base.counts, head.counts
    total = sum(cb.values())
    for cls in CLASS_ORDER:
        spill = cls in SPILL_CLASSES
        rows.append(Change(
            f"sass.{cls}", "spills" if spill else f"static {cls}", f"{cls} in the SASS", "sass",
            cb[cls], ch[cls], "", False, "cause", "spill" if spill else "static_counts",
            magnitude("appear" if spill else "share", cb[cls], ch[cls], total)))
    lb, lh = base.main_loop_counts, head.main_loop_counts
    if lb is not None and lh is not None:
        length = loop.base_length or 1
        rows.append(Change(
            "loop.length", "main loop", "main-loop instructions", "sass", loop.base_length, loop.head_length,
            "", False, "cause", "main_loop", magnitude("relative", loop.base_length, loop.head_length)))
        for cls in CLASS_ORDER:
            spill = cls in SPILL_CLASSES
            rows.append(Change(
                f"loop.{cls}", "spills" if spill else ("main loop" if cls == "OTHER" else f"main-loop {cls}"), f"{cls} in the main loop", "sass",
                lb[cls], lh[cls], "", False, "cause", "spill" if spill else "main_loop",
                magnitude("appear" if spill else "share", lb[cls], lh[cls], length)))
        if loop.base_barriers and len(loop.base_barriers) == len(loop.head_barriers):
            after_b = sum(a for _, a in loop.base_barriers)
            after_h = sum(a for _, a in loop.head_barriers)
            math_total = sum(loop.base_barriers[0]) or 1
            rows.append(Change(
                "loop.barrier_placement", "barrier placement", "main-loop math (FFMA/MMA) after the barrier", "sass",
                after_b, after_h, "", True, "cause", "barrier_placement",
                magnitude("share", after_b, after_h, math_total)))
    return rows


def _direction(change: Change, effect: Change | None) -> float:
    effect_pair = numbers(effect.base, effect.head) if effect is not None else None
    if effect_pair is None or effect_pair[0] == effect_pair[1]:
        return 1.0
    change_pair = numbers(change.base, change.head)
    if change.higher_is_better is None or change_pair is None:
        return 1.0
    (effect_base, effect_head), (base, head) = effect_pair, change_pair
    slower = effect_head > effect_base
    got_worse = (head < base) if change.higher_is_better else (head > base)
    return 1.0 if got_worse == slower else COUNTER_EVIDENCE


def diff_profiles(
    kernel: str,
    base_ncu: KernelProfile | None = None,
    head_ncu: KernelProfile | None = None,
    base_sass: FunctionSass | None = None,
    head_sass: FunctionSass | None = None,
    base_res: ResUsage | None = None,
    head_res: ResUsage | None = None,
    ncu_reason: str | None = None,
) -> ProfileDiff:
    """Compare one kernel's base and head. Without both ncu records, `ncu_reason` says why, and
    the SASS and resource comparison still comes."""
    rows: list[Change] = []
    if base_ncu is not None and head_ncu is not None:
        rows += _ncu_rows(base_ncu, head_ncu)
        ncu_reason = None
    elif ncu_reason is None:
        ncu_reason = "no Nsight Compute record for " + ("base" if base_ncu is None else "head")
    if base_res is not None and head_res is not None:
        rows += _res_rows(base_res, head_res)
    loop = None
    if base_sass is not None and head_sass is not None:
        loop = diff_loops(base_sass.main_loop, head_sass.main_loop)
        rows += _sass_rows(base_sass, head_sass, loop)
    effect = next((c for c in rows if c.role == "effect"), None)
    if effect is not None and (effect.base is None or effect.head is None):
        effect = None
    for change in rows:
        if change.role == "cause":
            weight = WEIGHTS[change.weight_key]
            change.score = weight * change.magnitude * _direction(change, effect)
    return ProfileDiff(
        kernel, effect, rows, ncu_reason, loop,
        {"base": base_sass.counts if base_sass else None, "head": head_sass.counts if head_sass else None},
    )


def _function_for(name: str, functions: dict[str, FunctionSass] | None) -> FunctionSass | None:
    if not functions:
        return None
    if name in functions:
        return functions[name]
    matches = [f for n, f in functions.items() if n in name or name in n]
    if len(matches) == 1:
        return matches[0]
    return next(iter(functions.values())) if len(functions) == 1 else None


def diff_launch(
    base_kernels: list[KernelProfile] | None,
    head_kernels: list[KernelProfile] | None,
    base_functions: dict[str, FunctionSass] | None = None,
    head_functions: dict[str, FunctionSass] | None = None,
    base_res: dict[str, ResUsage] | None = None,
    head_res: dict[str, ResUsage] | None = None,
    ncu_reason: str | None = None,
) -> list[ProfileDiff]:
    """Each kernel of a (multi-kernel) launch: ncu rows paired by name and occurrence (the second
    `reduce` of base with the second of head); without ncu, one diff per SASS function."""
    out = []
    if base_kernels and head_kernels:
        seen: dict[str, int] = {}
        head_by: dict[tuple[str, int], KernelProfile] = {}
        for k in head_kernels:
            head_by[(k.name, seen.get(k.name, 0))] = k
            seen[k.name] = seen.get(k.name, 0) + 1
        seen = {}
        for k in base_kernels:
            nth = seen.get(k.name, 0)
            seen[k.name] = nth + 1
            other = head_by.get((k.name, nth))
            label = k.name if nth == 0 else f"{k.name} #{nth + 1}"
            out.append(diff_profiles(
                label, k, other, _function_for(k.name, base_functions), _function_for(k.name, head_functions),
                (base_res or {}).get(k.name), (head_res or {}).get(k.name),
                None if other else f"head has no launch of {k.name} #{nth + 1}"))
        return out
    reason = ncu_reason or "no Nsight Compute record"
    base_fns, head_fns = base_functions or {}, head_functions or {}
    for name in sorted(set(base_fns) & set(head_fns)):
        out.append(diff_profiles(
            name, None, None, base_fns[name], head_fns[name],
            (base_res or {}).get(name), (head_res or {}).get(name), reason))
    return out


