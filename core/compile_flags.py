"""The nvcc flags a kernel description may ask for: those that change the code a repository's own
build makes, and nothing that names a file, a program or the host compiler.

A repository's figure comes from its own build (`nvcc -O3 --use_fast_math -maxrregcount=128 ...`),
so a description carries its flags and the worker passes them on; each is matched whole against
this list, since nvcc would read `-I/etc`, `-Xcompiler -fplugin=...`, `--run` or `-o /x` as
readily as `-O3`. Architecture and defines have fields of their own (`target`, `defines`).
"""

import re

_FLAG_PATTERNS = (
    r"-O[0-3]",
    r"-std=c\+\+(?:11|14|17|20)",
    r"--?use_fast_math",
    r"-lineinfo|--generate-line-info",
    r"--?maxrregcount[= ]?\d{1,3}",
    r"-(?:ftz|prec-div|prec-sqrt|fmad)=(?:true|false)",
    r"--extra-device-vectorization",
    r"--?expt-relaxed-constexpr",
    r"--?expt-extended-lambda|--extended-lambda",
    r"--?restrict",
    r"-Xptxas[= ](?:-v|-O[0-3]|-dlcm=c[ags]|--warn-on-spills|-warn-spills|--allow-expensive-optimizations=(?:true|false))",
    r"--ptxas-options=(?:-v|-O[0-3]|-dlcm=c[ags])",
    r"-(?:w|Wno-deprecated-gpu-targets)",
)
_ALLOWED = re.compile("|".join(f"(?:{p})" for p in _FLAG_PATTERNS))


ALLOWED_TEXT = ("-O0..-O3, -std=c++11..20, --use_fast_math, -lineinfo, -maxrregcount=N, "
                "-ftz/-prec-div/-prec-sqrt/-fmad=true|false, --extra-device-vectorization, --expt-relaxed-constexpr, "
                "--expt-extended-lambda, -restrict, -Xptxas=-v|-O3|-dlcm=ca|cg|cs|--warn-on-spills, -w (the target "
                "and -D have fields of their own: `target`, `defines`)")


def check_flag(flag: str) -> str:
    """The flag as given, or a ValueError saying which flags are allowed."""
    check_flags([flag])
    return flag


def check_flags(flags: list[str]) -> None:
    """A ValueError naming every flag that is not allowed, and what is."""
    refused = [flag for flag in flags if not _ALLOWED.fullmatch(flag)]
    if refused:
        named = ", ".join(repr(f) for f in refused)
        raise ValueError(f"nvcc flag{'s' if len(refused) > 1 else ''} {named} {'are' if len(refused) > 1 else 'is'} "
                         f"not allowed; allowed: {ALLOWED_TEXT}")


def split(flags: list[str]) -> list[str]:
    """The flags as nvcc's argv: "-Xptxas -v" (one entry, as a Makefile writes it) is two words."""
    return [word for flag in flags for word in flag.split(" ")]
