"""What a cubin's SASS says of a kernel: `cuobjdump -sass` read into instructions per function,
counted by class, with the main loop found; `cuobjdump -res-usage` read into registers, stack,
shared and local bytes; and two main loops compared (issue 39).

`cuobjdump -sass` prints, per `Function : NAME`, one line per instruction,
`/*0a30*/  @P0 FFMA R1, R2, R3, R4 ;  /* encoding */`, each followed by a line holding only a
comment (the control bits); those, and the headers, are skipped.
"""

from __future__ import annotations

import difflib
import re
from collections import Counter
from dataclasses import dataclass, field

_FUNCTION = re.compile(r"^\s*Function\s*:\s*(\S+)")
_INSTRUCTION = re.compile(
    r"^\s*/\*(?P<addr>[0-9a-fA-F]+)\*/\s+(?P<pred>@!?U?P(?:T|\d+)\s+)?(?P<op>[A-Z][A-Z0-9_.]*)(?P<args>[^;]*);"
)
_RES_FUNCTION = re.compile(r"^\s*Function\s+(\S+?)\s*:\s*$")
_RES_FIELD = re.compile(r"\b(REG|STACK|SHARED|LOCAL):(\d+)")

# Class by the opcode's first word. Order matters only for readability; each opcode has one class.
CLASSES: dict[str, tuple[str, ...]] = {
    "FFMA": ("FFMA",),
    "HMMA": ("HMMA",),
    "GMMA": ("HGMMA", "QGMMA", "IGMMA", "BGMMA", "WGMMA", "GMMA"),
    "IMMA": ("IMMA", "DMMA"),
    "LDS": ("LDS", "LDSM"),
    "LDG": ("LDG",),
    "LDGSTS": ("LDGSTS",),
    "STS": ("STS", "STSM"),
    "STG": ("STG",),
    "TMA": ("UTMALDG", "UTMASTG", "UBLKCP", "UTMAPF"),
    "LDL": ("LDL",),  # a local-memory load: a spill reloaded (or a local array)
    "STL": ("STL",),  # a local-memory store: a spill
    "BAR": ("BAR", "MEMBAR", "DEPBAR", "LDGDEPBAR", "WARPGROUP", "ARRIVES"),
    "SYNCS": ("SYNCS",),
    "BRANCH": ("BRA", "BRX", "JMP", "JMX", "CALL", "RET", "EXIT"),
}
_CLASS_OF = {op: cls for cls, ops in CLASSES.items() for op in ops}
CLASS_ORDER = tuple(CLASSES) + ("OTHER",)
# Instructions that do a GEMM's arithmetic: what makes a loop the main loop.
MATH_CLASSES = ("FFMA", "HMMA", "GMMA", "IMMA")
_BRANCHES = ("BRA", "BRX", "JMP", "JMX")


def opcode_class(opcode: str) -> str:
    return _CLASS_OF.get(opcode.split(".", 1)[0], "OTHER")


@dataclass(frozen=True)
class Instruction:
    address: int
    predicate: str | None  # "@P0", "@!UP1", ...
    opcode: str  # with modifiers: "BAR.SYNC.DEFER_BLOCKING"
    operands: str

    @property
    def mnemonic(self) -> str:
        return self.opcode.split(".", 1)[0]

    @property
    def cls(self) -> str:
        return opcode_class(self.opcode)

    def branch_target(self) -> int | None:
        if self.mnemonic not in _BRANCHES:
            return None
        match = re.search(r"0x([0-9a-fA-F]+)", self.operands)
        return int(match.group(1), 16) if match else None

    def normalised(self) -> str:
        """The instruction with register numbers and branch targets renamed away, so that two
        compilations that only allocate registers differently or shift addresses read the same."""
        text = f"{self.predicate + ' ' if self.predicate else ''}{self.opcode}{self.operands}"
        if self.mnemonic in _BRANCHES:
            text = re.sub(r"0x[0-9a-fA-F]+", "<target>", text)
        text = re.sub(r"\b(U?R)(\d+)\b", r"\1", text)  # R12 -> R, UR4 -> UR (RZ, URZ stay)
        text = re.sub(r"\b(U?P)(\d)\b", r"\1", text)  # P0 -> P, UP1 -> UP (PT, UPT stay)
        return re.sub(r"\s+", " ", text).strip()


def count_classes(instructions: list[Instruction] | tuple[Instruction, ...]) -> dict[str, int]:
    counts = Counter(i.cls for i in instructions)
    return {cls: counts.get(cls, 0) for cls in CLASS_ORDER}


@dataclass(frozen=True)
class Loop:
    start: int  # address of the branch target (the loop's head)
    end: int  # address of the backward branch
    body: tuple[Instruction, ...]

    @property
    def math(self) -> int:
        return sum(1 for i in self.body if i.cls in MATH_CLASSES)

    def contains(self, other: Loop) -> bool:
        return self.start <= other.start and other.end <= self.end and self != other


@dataclass
class FunctionSass:
    name: str
    instructions: list[Instruction]
    main_loop: Loop | None = None
    loops: list[Loop] = field(default_factory=list)

    @property
    def counts(self) -> dict[str, int]:
        return count_classes(self.instructions)

    @property
    def main_loop_counts(self) -> dict[str, int] | None:
        return count_classes(self.main_loop.body) if self.main_loop else None


class SassParseError(ValueError):
    """The text is not cuobjdump's SASS (or resource usage) listing."""


def parse_sass(text: str) -> dict[str, FunctionSass]:
    """Every function of a `cuobjdump -sass` listing, by name, with its main loop found."""
    functions: dict[str, FunctionSass] = {}
    current: FunctionSass | None = None
    for line in text.splitlines():
        match = _FUNCTION.match(line)
        if match:
            current = functions.setdefault(match.group(1), FunctionSass(match.group(1), []))
            continue
        match = _INSTRUCTION.match(line)
        if match and current is not None:
            pred = match.group("pred")
            current.instructions.append(Instruction(
                int(match.group("addr"), 16), pred.strip() if pred else None,
                match.group("op"), match.group("args").rstrip()))
    functions = {n: f for n, f in functions.items() if f.instructions}
    if not functions:
        raise SassParseError("no `Function : NAME` with instructions in the input: not cuobjdump -sass output")
    for fn in functions.values():
        fn.loops = find_loops(fn.instructions)
        fn.main_loop = pick_main_loop(fn.loops)
    return functions


def find_loops(instructions: list[Instruction]) -> list[Loop]:
    """Every backward branch's range, less those that are not loops: a branch to itself (the trap
    at a function's end), and a range with an unconditional EXIT inside, which is a jump back from
    out-of-line code (a slow path placed after the function's exit), not a loop."""
    index = {ins.address: n for n, ins in enumerate(instructions)}
    loops = []
    for n, ins in enumerate(instructions):
        target = ins.branch_target()
        if target is None or target >= ins.address or target not in index:
            continue
        body = tuple(instructions[index[target]:n + 1])
        if any(i.mnemonic == "EXIT" and i.predicate is None for i in body):
            continue
        loops.append(Loop(target, ins.address, body))
    return loops


def pick_main_loop(loops: list[Loop]) -> Loop | None:
    """The loop with the most arithmetic (FFMA/HMMA/GMMA/IMMA; a spin-wait has none), ties to the
    larger body; then, while a loop nested in it holds at least half its arithmetic, that inner
    loop: a tile loop around the k-loop is not the main loop. Without arithmetic in any loop,
    the largest loop."""
    if not loops:
        return None
    best = max(loops, key=lambda lp: (lp.math, len(lp.body)))
    while best.math:
        inner = [lp for lp in loops if best.contains(lp) and 2 * lp.math >= best.math]
        if not inner:
            break
        best = max(inner, key=lambda lp: (lp.math, len(lp.body)))
    return best


@dataclass(frozen=True)
class ResUsage:
    name: str
    registers: int | None
    stack: int | None  # bytes of stack frame per thread: spills land here
    shared: int | None  # static shared memory, bytes
    local: int | None  # local memory, bytes


def parse_res_usage(text: str) -> dict[str, ResUsage]:
    """`cuobjdump -res-usage`: per `Function NAME:` the next line's REG/STACK/SHARED/LOCAL."""
    out: dict[str, ResUsage] = {}
    lines = text.splitlines()
    for n, line in enumerate(lines):
        match = _RES_FUNCTION.match(line)
        if not match:
            continue
        fields = {k: int(v) for k, v in _RES_FIELD.findall(lines[n + 1] if n + 1 < len(lines) else "")}
        if fields:
            out[match.group(1)] = ResUsage(
                match.group(1), fields.get("REG"), fields.get("STACK"), fields.get("SHARED"), fields.get("LOCAL"))
    if not out:
        raise SassParseError("no `Function NAME:` with REG/STACK/SHARED/LOCAL in the input: not cuobjdump -res-usage output")
    return out


def barrier_placement(loop: Loop | None) -> list[tuple[int, int]]:
    """For each BAR in the loop, (arithmetic instructions before it, after it): where a block
    barrier sits among the math says how much math can overlap the wait (a k-step moved across
    the barrier changes these while every count stays the same)."""
    if loop is None:
        return []
    out, before = [], 0
    total = loop.math
    for ins in loop.body:
        if ins.mnemonic == "BAR":
            out.append((before, total - before))
        elif ins.cls in MATH_CLASSES:
            before += 1
    return out


def _collapse_runs(lines: list[str], least: int = 3) -> list[str]:
    """Runs of one repeated diff line as one line with a count: 15 identical `+FFMA` read as one."""
    out: list[str] = []
    n = 0
    while n < len(lines):
        m = n
        while m < len(lines) and lines[m] == lines[n]:
            m += 1
        out.append(f"{lines[n]}  [x{m - n}]" if m - n >= least else lines[n])
        out.extend([lines[n]] * (m - n - 1) if m - n < least else [])
        n = m
    return out


@dataclass
class LoopDiff:
    base_length: int | None
    head_length: int | None
    class_delta: dict[str, tuple[int, int]]  # class -> (base, head), changed classes only
    opcode_delta: dict[str, tuple[int, int]]  # full opcode -> (base, head), changed only
    unified: list[str]  # a short unified diff of the normalised instruction sequences
    truncated: bool = False
    base_barriers: list[tuple[int, int]] = field(default_factory=list)
    head_barriers: list[tuple[int, int]] = field(default_factory=list)

    def to_json(self) -> dict:
        return {
            "base_length": self.base_length, "head_length": self.head_length,
            "class_delta": {k: list(v) for k, v in self.class_delta.items()},
            "opcode_delta": {k: list(v) for k, v in self.opcode_delta.items()},
            "barriers": {"base": [list(b) for b in self.base_barriers],
                         "head": [list(b) for b in self.head_barriers]},
            "unified": self.unified, "truncated": self.truncated,
        }


def diff_loops(base: Loop | None, head: Loop | None, max_lines: int = 60) -> LoopDiff:
    """Base's and head's main loops compared: counts by class and by opcode, and a unified diff
    of their instruction sequences with registers renamed away (one line of context)."""
    b_body = base.body if base else ()
    h_body = head.body if head else ()

    def delta(key) -> dict[str, tuple[int, int]]:
        cb, ch = Counter(map(key, b_body)), Counter(map(key, h_body))
        return {k: (cb.get(k, 0), ch.get(k, 0)) for k in sorted(set(cb) | set(ch)) if cb.get(k, 0) != ch.get(k, 0)}

    lines = _collapse_runs(list(difflib.unified_diff(
        [i.normalised() for i in b_body], [i.normalised() for i in h_body],
        fromfile="base main loop", tofile="head main loop", n=1, lineterm="")))
    return LoopDiff(
        len(b_body) if base else None, len(h_body) if head else None,
        delta(lambda i: i.cls), delta(lambda i: i.opcode),
        lines[:max_lines], len(lines) > max_lines,
        barrier_placement(base), barrier_placement(head))
