"""The nvcc flags a kernel description may carry, as a repository's Makefile or CMake file spells
them, and what gemmwatch does with each.

A repository's figure comes from its own build (`nvcc -std=c++17 -O3 -DNDEBUG -arch=sm_90a
-Xcompiler=-fno-strict-aliasing -lcublas ...`), so a description carries its flags as written and
the worker builds with them. Each flag is matched whole against this list, since nvcc would read
`-I/etc`, `-Xcompiler -fplugin=...`, `--run` or `-o /x` as readily as `-O3`; a flag that takes a
value may be one entry ("-Xptxas -v", one ASCII space) or two entries ("-gencode",
"arch=compute_90a,code=sm_90a"), as a Makefile's words split.

What each kind becomes (`parse`):
- code generation (-O3, --use_fast_math, -maxrregcount=N, -Xptxas ..., -lineinfo, ...): passed on;
- `-DNAME` / `-DNAME=value`: passed on (a value of letters, digits and `_ . + -` only); `-UNAME`
  passed on after them, in the order given (a torch-built repository's `-U__CUDA_NO_HALF_OPERATORS__`);
- `-std=` / `--std=`: passed on as `-std=`;
- `-Xcompiler` host flags from a short list of harmless ones (warnings, strict aliasing, -O, -g):
  passed on; `-fPIC`/`-fPIE` dropped (a launcher's library is always built -fPIC);
- `-arch=sm_90a`, `-gencode arch=compute_90a,code=sm_90a`: the kernel's target (`target`), since
  the worker builds for the GPU it runs on; `-arch=sm_80` (no `a`): "sm_80+", any GPU from 8.0 on,
  and so is a virtual architecture, `-arch=compute_70 -code=compute_70` (PTX the driver compiles for
  the GPU at hand: "sm_70+"); `-arch=native`, `all` or `all-major` (the GPU at hand, or every one):
  no target, the worker's GPU's own; `-code=...` (which binaries to embed): the worker's GPU's;
- `-lcublas`, `-lcublasLt`, `-lcurand`, `-lcuda`, `-lcudart`: not linked; a launcher's process
  holds the worker's own (worker/launch/launcher_child.py), so a runner's cuBLAS check still loads;
- `--keep` (nvcc's intermediate files kept for a person to read): dropped; it changes no code, and
  the confined compile keeps nothing (`--keep-dir`, which names a folder, is refused);
- what changes nothing of a build gemmwatch makes, dropped (ThunderKittens' `common.mk` line holds
  them all): `-lrt`, `-lpthread`, `-ldl`, `-lm` (glibc's own since 2.34, and resolved from the
  launcher's process either way), `-lcudadevrt` and `-Xnvlink=...` (nvcc links the device runtime
  into an `-rdc=true` library itself), `-forward-unknown-to-host-compiler`
  (no flag unknown to nvcc gets past this list) and `-ftemplate-backtrace-limit=N` (the host
  compiler's error messages only);
- `-rdc=true` (`--relocatable-device-code=true`, CMake's CUDA_SEPARABLE_COMPILATION): passed on for a
  launcher's library, whose device code nvcc then links with the device runtime (andylolu2/simpleGEMM's
  `CUTE_HOST_DEVICE` error check calls cudaGetErrorString on the device, which only such a build
  resolves); a kernel's cubin is built whole, so a kernel without a launcher is refused it
  (core/description/launch_checks.py); `-rdc=false` is nvcc's default.
Anything else is refused, by name, with the field to use where there is one.

A repository built by a tool that puts flags of its own before the repository's names that tool in
its description's `build` (`with_build`): `torch.utils.cpp_extension` (`load`, `CUDAExtension`),
whose nvcc line starts with PyTorch's COMMON_NVCC_FLAGS (the half and bfloat16 operators and
conversions switched off, `--expt-relaxed-constexpr`) before the repository's `extra_cuda_cflags`,
and ends with a C++ standard where those name none. Kernels written for that build call `std::max`
from device code and lean on those flags.
"""

import re
from dataclasses import dataclass, field

# Flags whose value may come as the next word.
_TAKES_VALUE = ("-Xptxas", "-Xcompiler", "-Xnvlink", "--compiler-options", "-gencode", "--generate-code", "-arch",
                "--gpu-architecture", "-code", "--gpu-code", "-l", "--library", "-D", "--define-macro", "-std",
                "--std", "-maxrregcount", "--maxrregcount", "--ptxas-options", "-U", "--undefine-macro", "-rdc",
                "--relocatable-device-code",
                "-diag-suppress", "--diag-suppress")
_SEP = "(?:=| )"  # a flag and its value: '=' or one ASCII space

_CODEGEN = (
    r"-O[0-3]",
    r"--?use_fast_math",
    r"-lineinfo|--generate-line-info",
    rf"--?maxrregcount{_SEP}?\d{{1,3}}",
    r"-(?:ftz|prec-div|prec-sqrt|fmad)=(?:true|false)",
    r"--extra-device-vectorization",
    r"--?expt-relaxed-constexpr",
    r"--?expt-extended-lambda|--extended-lambda",
    r"--?restrict",
    rf"-Xptxas{_SEP}(?:-v|-O[0-3]|-dlcm=c[ags]|--warn-on-spills|-warn-spills|--verbose"
    r"|--allow-expensive-optimizations=(?:true|false))",
    r"--ptxas-options=(?:-v|-O[0-3]|-dlcm=c[ags]|--verbose)",
    r"-(?:w|Wno-deprecated-gpu-targets)",
    rf"--?diag-suppress{_SEP}\d{{1,5}}(?:,\d{{1,5}})*",  # a front-end warning's number: what is printed, not what is built
    r"--threads=\d{1,2}|-t \d{1,2}",  # nvcc's own parallelism over its targets
)
_CODEGEN_RE = re.compile("|".join(f"(?:{p})" for p in _CODEGEN))
# A -D value: a number (no '_': "1e+__has_include" is one pp-number to one lexer and a name to
# another), or one identifier that does not start with '_' (no '+', '-' or '.': "a+__has_include"
# is three tokens). A macro valued "__has_include" or "_Pragma" would carry a file-probing operator
# past the source guard into the job's #if lines.
_DEFINE_VALUE = r"(?:[0-9.+-][A-Za-z0-9.+-]{0,63}|[A-Za-z][A-Za-z0-9_]{0,63})?"
_DEFINE = re.compile(rf"(?:-D|--define-macro{_SEP})([A-Za-z_][A-Za-z0-9_]{{0,63}})(?:=({_DEFINE_VALUE}))?")
_DEFINE_SPACED = re.compile(rf"-D ([A-Za-z_][A-Za-z0-9_]{{0,63}})(?:=({_DEFINE_VALUE}))?")
# -UNAME after the build tool's -DNAME: torch-built repositories take PyTorch's half-operator defines back.
_UNDEFINE = re.compile(rf"(?:-U ?|--undefine-macro{_SEP})([A-Za-z_][A-Za-z0-9_]{{0,63}})")
_STD = re.compile(rf"--?std{_SEP}(c\+\+(?:11|14|17|20))")
_ARCH = re.compile(rf"(?:-arch|--gpu-architecture){_SEP}(?:sm|compute)_(\d{{2,3}})(a?)")
_ARCH_AT_HAND = re.compile(rf"(?:-arch|--gpu-architecture){_SEP}(?:native|all|all-major)")
_GENCODE = re.compile(rf"(?:-gencode|--generate-code){_SEP}arch=compute_(\d{{2,3}})(a?),code=(?:\[[a-z0-9_,]+\]|[a-z0-9_]+)")
_GPU_CODE = re.compile(rf"(?:-code|--gpu-code){_SEP}(?:\[[a-z0-9_,]+\]|[a-z0-9_,]+)")
_LIBRARY = re.compile(rf"(?:-l ?|--library{_SEP})(cublas|cublasLt|curand|cuda|cudart|cudart_static)")
# -Wl, -Wa and -Wp alone pass what follows them to another program: not among these.
_HOST_FLAG = re.compile(r"-W(?![lap]$)[A-Za-z0-9_=+-]{1,60}|-w|-O[0-3s]|-g|-f(?:no-)?(?:strict-aliasing|omit-frame-pointer)"
                        r"|-fPIC|-fPIE|-fpic|-fpie|-march=(?:native|x86-64(?:-v[234])?)|-std=c\+\+(?:11|14|17|20)")
_RELOCATABLE = re.compile(rf"(?:-rdc|--relocatable-device-code){_SEP}(true|false)")
_XCOMPILER = re.compile(rf"(?:-Xcompiler|--compiler-options){_SEP}(.+)")
# Flags that change nothing of a build gemmwatch makes (module docstring): dropped, as --keep is.
_NO_EFFECT = re.compile(r"--?keep|-l ?(?:rt|pthread|dl|m|cudadevrt)|-Xnvlink(?:=| )(?:--verbose|-v)"
                        r"|--?forward-unknown-to-host-compiler|-ftemplate-backtrace-limit=\d{1,4}")

ALLOWED_TEXT = ("-O0..-O3, -std=/--std=c++11..20, --use_fast_math, -lineinfo, -maxrregcount=N, "
                "-ftz/-prec-div/-prec-sqrt/-fmad=true|false, --extra-device-vectorization, --expt-relaxed-constexpr, "
                "--expt-extended-lambda, -restrict, -Xptxas=-v|-O3|-dlcm=ca|cg|cs|--warn-on-spills, -w, "
                "-DNAME[=value] (a value: a number or a name, no type), -UNAME, -diag-suppress=N, --threads=N, "
                "-rdc=true|false (a launcher's library), -arch=sm_XX[a]|compute_XX[a] and -gencode arch=compute_XX[a],code=... (the kernel's target), -arch=native|all|all-major, -code=..., -Xcompiler= with "
                "-W..., -fno-strict-aliasing, -O, -g, -fPIC/-fPIE, -l cublas|cublasLt|curand|cuda|cudart (the worker's "
                "own are used), --keep, -lrt/-lpthread/-ldl/-lm/-lcudadevrt, -Xnvlink=--verbose, "
                "-forward-unknown-to-host-compiler, -ftemplate-backtrace-limit=N (dropped: they change nothing here); "
                "include folders are `include_dirs`")
# Where a refused flag's purpose has a field of its own (include folders: ALLOWED_TEXT says so already).
_FIELD_FOR = (("-L", "libraries are the worker's own: name them with -l (cublas, cublasLt, curand, cuda, cudart)"),
              ("-o", "gemmwatch names the output itself"))


class FlagRefused(ValueError):
    """Flags that are not allowed, every one named."""


@dataclass(frozen=True)
class Flags:
    """The flags as the worker builds with them."""

    nvcc: tuple[str, ...] = ()  # what is passed on to nvcc
    target: str | None = None  # from -arch/-gencode: "sm_90a", or "sm_80+" for a plain sm_80
    libraries: tuple[str, ...] = ()  # from -l: the worker's own are loaded for the launcher
    defines: dict[str, str] = field(default_factory=dict)  # from -D: passed on as they are
    dropped: tuple[str, ...] = ()  # flags with no effect here: -fPIC/-fPIE (a library is built -fPIC), --keep
    relocatable: bool = False  # -rdc=true: device code linked by nvcc (a launcher's library only)


# What each build tool passes nvcc before the repository's flags, and the standard it adds after them
# where they name none: PyTorch 2.11's -std=c++17 (2.13 adds -std=c++20; name that in `flags`).
BUILDS: dict[str, tuple[tuple[str, ...], str]] = {
    "torch.utils.cpp_extension": (("-D__CUDA_NO_HALF_OPERATORS__", "-D__CUDA_NO_HALF_CONVERSIONS__",
                                   "-D__CUDA_NO_BFLOAT16_CONVERSIONS__", "-D__CUDA_NO_HALF2_OPERATORS__",
                                   "--expt-relaxed-constexpr"), "-std=c++17"),
}


def with_build(build: str | None, flags: list[str]) -> list[str]:
    """The flags nvcc gets for a kernel its repository builds with `build` (module docstring): the
    tool's own, then the repository's, then the tool's standard where the repository names none."""
    if build is None:
        return list(flags)
    first, standard = BUILDS[build]
    named = any(_STD.fullmatch(flag) for flag in words(flags))
    return [*first, *flags, *([] if named else [standard])]


# What nvcc says of a file written for PyTorch's build when built without it: its advice for
# std::max in device code, the clash of a file's own __half operators with cuda_fp16.h's, and
# PyTorch's headers not found (the build brings gemmwatch's stand-in for them).
# (nvcc's front end says "cannot open source file", the host compiler "fatal error: ...: No such file".)
_TORCH_BUILD_SIGNS = re.compile(r"'--expt-relaxed-constexpr' can be used|more than one operator"
                                r'|(?:cannot open source file "|fatal error: )(?:torch|ATen|c10)/')


def build_hint(log: str, build: str | None) -> str:
    """A line for an nvcc log that reads as a torch-built file compiled without PyTorch's flags, naming
    the field that gives them; empty where the build is said or the log reads otherwise."""
    if build is not None or not _TORCH_BUILD_SIGNS.search(log):
        return ""
    return ('\n(gemmwatch) where PyTorch builds this file (torch.utils.cpp_extension.load, CUDAExtension), its '
            'flags come from there: "build": "torch.utils.cpp_extension" gives nvcc PyTorch\'s own '
            "(--expt-relaxed-constexpr, -D__CUDA_NO_HALF_OPERATORS__, ...) before `flags`, and gemmwatch's "
            "stand-in for <torch/extension.h> and torch::Tensor (docs/KERNELS.md)")


def words(flags: list[str]) -> list[str]:
    """The flags with a value-taking flag joined to its value where they came as two entries."""
    out: list[str] = []
    for flag in flags:
        if out and out[-1] in _TAKES_VALUE:
            out[-1] = f"{out[-1]} {flag}"
        else:
            out.append(flag)
    return out


def parse(flags: list[str]) -> Flags:
    """What the worker does with each flag (module docstring); FlagRefused names every flag it refuses."""
    nvcc: list[str] = []
    archs: list[tuple[int, str]] = []
    libraries: list[str] = []
    defines: dict[str, str] = {}
    dropped: list[str] = []
    refused: list[str] = []
    relocatable = False
    for flag in words(flags):
        if _CODEGEN_RE.fullmatch(flag):
            nvcc += flag.split(" ")
        elif (m := _DEFINE.fullmatch(flag) or _DEFINE_SPACED.fullmatch(flag)):
            defines[m.group(1)] = m.group(2) if m.group(2) is not None else "1"
            nvcc.append(f"-D{m.group(1)}" + (f"={m.group(2)}" if m.group(2) is not None else ""))
        elif (m := _UNDEFINE.fullmatch(flag)):
            defines.pop(m.group(1), None)
            nvcc.append(f"-U{m.group(1)}")
        elif (m := _STD.fullmatch(flag)):
            nvcc.append(f"-std={m.group(1)}")
        elif (m := _ARCH.fullmatch(flag) or _GENCODE.fullmatch(flag)):
            archs.append((int(m.group(1)), m.group(2)))
        elif _NO_EFFECT.fullmatch(flag):
            dropped.append(flag)
        elif (m := _RELOCATABLE.fullmatch(flag)):
            relocatable = m.group(1) == "true"
        elif _GPU_CODE.fullmatch(flag) or _ARCH_AT_HAND.fullmatch(flag):
            pass  # which binaries to embed, or the GPU at hand: the worker builds the GPU's own
        elif (m := _LIBRARY.fullmatch(flag)):
            libraries.append(m.group(1))
        elif (m := _XCOMPILER.fullmatch(flag)) and all(_HOST_FLAG.fullmatch(h) for h in m.group(1).split(",")):
            kept = [h for h in m.group(1).split(",") if h.lower() not in ("-fpic", "-fpie")]
            dropped += [h for h in m.group(1).split(",") if h.lower() in ("-fpic", "-fpie")]
            if kept:
                nvcc.append("-Xcompiler=" + ",".join(kept))
        else:
            refused.append(flag)
    if refused:
        named = ", ".join(repr(f) for f in refused)
        hints = sorted({hint for f in refused for prefix, hint in _FIELD_FOR if f.startswith(prefix)})
        raise FlagRefused(f"nvcc flag{'s' if len(refused) > 1 else ''} {named} {'are' if len(refused) > 1 else 'is'} "
                          f"not allowed; allowed: {ALLOWED_TEXT}" + "".join(f"; {h}" for h in hints))
    if relocatable:  # the last one given counts, as nvcc reads it
        nvcc.append("-rdc=true")
    return Flags(tuple(nvcc), _target(archs), tuple(libraries), defines, tuple(dropped), relocatable)


def _target(archs: list[tuple[int, str]]) -> str | None:
    """One architecture-specific target (sm_90a) where the build names one; else the oldest it names,
    as a minimum (sm_80 -> "sm_80+": nvcc's PTX runs on every later GPU); None where it names none."""
    specific = sorted({f"sm_{cc}a" for cc, a in archs if a})
    if len(specific) > 1:
        raise FlagRefused(f"the flags name {len(specific)} architecture-specific targets ({', '.join(specific)}): "
                          "a kernel runs on one; describe each in a kernel of its own with its `target`")
    if specific:
        return specific[0]
    return f"sm_{min(cc for cc, _a in archs)}+" if archs else None


def check_flag(flag: str) -> str:
    """The flag as given, or a ValueError saying which flags are allowed."""
    parse([flag])
    return flag


def check_flags(flags: list[str]) -> None:
    """A ValueError naming every flag that is not allowed, and what is."""
    parse(flags)
