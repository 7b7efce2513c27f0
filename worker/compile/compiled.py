"""What a compile gives (`CompiledKernel`: the cubin or library, its log, the kernels in it) or
refuses (`CompileError`: the compiler's verdict; `CompileRefused`: it did not run to its end), and
whether the compile process could be confined (`CompilerConfinement`). Shared by the compiler's front
(worker/compile/compiler.py), its process and cache (worker/compile/compile_process.py, worker/compile/compile_cache.py) and
the memory of failed compiles (worker/compile/failed_compiles.py)."""

import re
from dataclasses import dataclass, field
from pathlib import Path


class CompileError(Exception):
    """NVRTC rejected the source; the message is its log (filtered for a job's own source)."""


class CompileRefused(Exception):
    """The compile did not run to its end: time or memory limit, no confinement, no NVRTC."""


@dataclass(frozen=True)
class CompiledKernel:
    cubin_path: Path
    lowered: dict[str, str]  # name expression -> mangled name, for template entries (NVRTC)
    log: str
    cached: bool
    compiler: str = ""  # what built it: "NVRTC 13.5", "nvcc 13.5.37"
    # Every kernel in the cubin: {"symbol", "name" (C++, with template arguments; None for extern "C"),
    # "params": [[type or None, bytes], ...]}, read from the binary (worker/compile/cubin_info.py).
    kernels: list = field(default_factory=list)

    def entry(self, entry: str, defines: dict[str, int], role: str = "entry", made: str = "kernels") -> dict:
        """The kernel an entry names: by NVRTC's lowered name, else by its C++ name with the
        defines' values in place of their names (nvcc), else by its extern "C" name. A launcher's
        library is searched the same way for its launcher (role "launcher", made "functions")."""
        symbol = self.lowered.get(entry)
        if symbol is not None:
            found = [k for k in self.kernels if k["symbol"] == symbol]
        else:
            wanted = _spelled(entry, defines)
            found = [k for k in self.kernels if _spelled(k["name"] or k["symbol"], {}) == wanted]
            if not found and ("<" not in wanted or role == "entry"):
                # "sgemm" names sgemm<16> where it is the only one. And an entry spelled as C++ takes it
                # ("gemm<cfg::Tile<cute::half_t, 128>>": an alias, a default argument left out) names the
                # one instance of its template in the build: the build took the entry's address, so the
                # instance it names is among the kernels made, and the demangler spells it in full.
                base = wanted.split("<")[0]
                found = [k for k in self.kernels if _spelled(k["name"] or "", {}).split("<")[0] == base]
        if len(found) != 1:
            have = ", ".join(k["name"] or k["symbol"] for k in self.kernels) or "none"
            why = "is not among" if not found else "matches more than one of"
            raise CompileRefused(f"{role} {entry!r} {why} the {made} the build made ({have})")
        return found[0]


@dataclass(frozen=True)
class CompilerConfinement:
    """What a probe of the compile process found: whether it can be confined, in words, and the
    compiler's release. (A confined launcher's measures are worker/launch/jail_terms.py Confinement.)"""

    available: bool
    detail: str
    version: str | None  # the compiler's release; None: it could not be run


_INTEGER_SUFFIX = re.compile(r"\b(\d+)[uUlL]+\b")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _spelled(name: str, defines: dict[str, int]) -> str:
    """A kernel name compared as the demangler writes it: no spaces, integer suffixes dropped
    (`16u` is 16), a define's name replaced by its value."""
    name = _IDENTIFIER.sub(lambda m: str(defines.get(m.group(), m.group())), name)
    return _INTEGER_SUFFIX.sub(r"\1", name.replace(" ", ""))
