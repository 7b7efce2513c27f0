"""Compiling a kernel: NVRTC in a short-lived, confined process; cubins cached by content.

The GPU process never compiles. It asks `compile_kernel` for a cubin and loads that, so a job's
source meets the compiler only in worker/nvrtc_sandbox.py, a process that
  - starts from a fresh interpreter with an environment of a few harmless variables (no
    DATABASE_URL, BROKER_URL, tokens or any GEMMWATCH_* setting),
  - runs under a memory limit (GEMMWATCH_COMPILE_MEMORY_MB) and a time limit
    (GEMMWATCH_COMPILE_TIMEOUT_S), so a runaway compile ends its case clearly,
  - confines itself with Landlock before it compiles: no file can be opened, but for reading
    CUDA's own header folders where the kernel includes a device header (core/kernel_includes.py).
The kernel's own files and the stand-ins for host headers reach NVRTC in memory.
Where Landlock is missing, a job's own sources are refused unless GEMMWATCH_UNCONFINED_SOURCES
says `warn` (built-in sources from the registry are ours and always compile).

The compile log of a job's source shows diagnostics located in that source only (layer 3):
anything located in another file is replaced by a line saying it was withheld.

A cubin is stored under a hash of (source, headers, options, name expressions, NVRTC version), so
a kernel compiled once is not compiled again, by this worker or after a restart. The cache keeps
NVRTC's raw log; each caller gets it filtered as its origin asks.

Issue 37, row 3, every size bounded: the compile process sends back at most
max(1 MiB, GEMMWATCH_COMPILE_LOG_MAX_BYTES) of its log (head and tail), and a caller gets at most
GEMMWATCH_COMPILE_LOG_MAX_BYTES of it as shown; a cubin or library over GEMMWATCH_KERNEL_MAX_BYTES
is refused; the cache holds at most GEMMWATCH_KERNEL_CACHE_MAX_BYTES, its least recently used
entries evicted as a new one comes in.
"""

import base64
import functools
import hashlib
import json
import logging
import math
import os
import re
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from core import kernel_includes
from core.kernel import Launch, target_compute_capability
from core.kernel_includes import IncludeRefused
from core.source_guard import SourceRefused
from core.text_bounds import head_and_tail
from worker import failed_compiles, nvcc
from worker.compile_log import WITHHELD, filter_log, own_file_names, own_file_names_of, rename_files  # noqa: F401

log = logging.getLogger(__name__)

SANDBOX = Path(__file__).with_name("nvrtc_sandbox.py")
# What the compile process may inherit: where programs and libraries are, and nothing else.
_PASSED_ENV = ("PATH", "PYTHONPATH", "LD_LIBRARY_PATH", "CUDA_HOME", "CUDA_PATH", "LANG", "LC_ALL")
ENTRY_UNIT = "gemmwatch_entry.cu"  # the file an nvcc build compiles (worker/nvrtc_sandbox.py writes it)


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
    # "params": [[type or None, bytes], ...]}, read from the binary (worker/cubin_info.py).
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
            if not found and "<" not in wanted:  # "sgemm" names sgemm<16> where it is the only one
                found = [k for k in self.kernels if (k["name"] or "").split("<")[0] == wanted]
        if len(found) != 1:
            have = ", ".join(k["name"] or k["symbol"] for k in self.kernels) or "none"
            why = "is not among" if not found else "matches more than one of"
            raise CompileRefused(f"{role} {entry!r} {why} the {made} the build made ({have})")
        return found[0]


@dataclass(frozen=True)
class Confinement:
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


def arch_option(compute_capability: str) -> str:
    """'9.0' or '90' -> -arch=sm_90 (a cubin: the driver loads it without a PTX JIT)."""
    return f"-arch=sm_{compute_capability.replace('.', '')}"


_DEFINE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def compile_launch(launch: Launch, compute_capability: str, cfg, library: bool = False) -> CompiledKernel:
    """A kernel (built-in or a job's) as a cubin for a GPU of this compute capability: the one
    place that chooses the options, for the GPU runner and the CPU double alike. library: the
    launch's host launcher as a shared library instead (nvcc; worker/launcher_library.py)."""
    # -ftz=true: what CuPy's own NVRTC path always added, so figures stay comparable.
    # A kernel built for one target (sm_90a) names it; the runner checks the GPU matches first.
    # The name reaches NVRTC's options, so it must be a target and nothing else, whatever stored it:
    # NVRTC reads "sm_90\0..." as sm_90, and a job row written past the API could hold anything.
    target = launch.target
    if target is not None:
        try:
            target_compute_capability(target)
        except ValueError as exc:
            raise CompileRefused(str(exc)) from None
    # Each -D likewise: the API allows identifiers and integers only, but a stored row could
    # hold "BK": "8 -I/etc" or "X\0 -I/etc" (tried: NVRTC compiled both, reading a macro value
    # and stopping at the NUL); nothing but NAME=integer becomes an option.
    for name, value in launch.defines.items():
        if not (isinstance(name, str) and _DEFINE_NAME.fullmatch(name)) or type(value) is not int:
            raise CompileRefused(f"not a -D NAME=integer: {name!r}={value!r}")
    # Layer 1 once more, here: a row written past the API (or an old one) meets the same guard,
    # and what each #include leads to is decided by us, not by NVRTC's search.
    try:
        headers = kernel_includes.resolve(launch.files, launch.source, list(launch.include_dirs),
                                          compiler=launch.compiler)
    except (SourceRefused, IncludeRefused) as refusal:
        raise CompileRefused(f"source refused: {refusal}") from None
    arch = f"-arch={target}" if target else arch_option(compute_capability)
    if launch.compiler == "nvcc":
        return compile_nvcc(launch, arch, cfg, library)
    # CUDA's headers of the NVRTC's own release (a CUDA 12 folder beside a CUDA 13 NVRTC lacks crt/mma.h).
    include_dirs = (kernel_includes.toolkit_include_dirs(_library(cfg), probe(cfg).version)
                    if headers.needs_toolkit else ())
    options = [arch, "-ftz=true", *launch.compile_options(), *(f"-I{d}" for d in include_dirs)]
    # The entry always goes through an NVRTC name expression: a template instantiation
    # ("sgemm<BM, 8>", the macros expanded), or a C++ function whose symbol name is mangled.
    return compile_kernel(launch.files[launch.source], name=launch.source, options=options,
                          name_expressions=(launch.entry,), untrusted=launch.origin == "job", cfg=cfg,
                          headers=headers.by_name, include_dirs=include_dirs, shown_as=headers.paths)


def compile_kernel(source: str, *, name: str, options: list[str], name_expressions: tuple[str, ...] = (),
                   untrusted: bool, cfg, headers: dict[str, str] | None = None,
                   include_dirs: tuple[str, ...] = (), shown_as: dict[str, str] | None = None) -> CompiledKernel:
    """A cubin for `source` built by NVRTC, from the cache or from a confined compile.

    untrusted: the job's own source (refused where the compiler cannot be confined, unless
    the settings say otherwise; its compile log is filtered).
    headers: in-memory headers by the name an #include spells; include_dirs: folders of CUDA's
    headers the compile process may read (read-only), given with -I in `options`; shown_as: the
    path in the kernel's folder to name in the log for a spelled header name.
    """
    headers = headers or {}
    confinement = probe(cfg)
    if confinement.version is None:
        raise CompileRefused(confinement.detail)
    own_names = own_file_names(source, name) | own_file_names_of(headers)

    def shown(raw_log: str) -> str:
        return rename_files(filter_log(raw_log, own_names, include_dirs) if untrusted else raw_log, shown_as)

    request = {"source": source, "name": name, "options": options, "name_expressions": list(name_expressions),
               "headers": headers, "readable": list(include_dirs), "nvrtc_library": _library(cfg)}
    key = [source, name, options, list(name_expressions), sorted(headers.items()), confinement.version, _library(cfg)]
    return failed_compiles.remembered(build, request, key, confinement, f"NVRTC {confinement.version}", untrusted,
                                      shown, cfg)


def build(request: dict, key: list, confinement: Confinement, compiler: str, untrusted: bool, shown, cfg,
          suffix: str = ".cubin") -> CompiledKernel:
    """The cubin (or, suffix ".so", a launcher's library) a compile request makes, from the cache
    (by `key`, which names everything the output depends on) or from the confined compile process;
    `shown` filters a log for its reader."""
    digest = hashlib.sha256(json.dumps(key).encode()).hexdigest()
    cache = Path(cfg.kernel_cache_dir).resolve()
    cubin_path, meta_path = cache / f"{digest}{suffix}", cache / f"{digest}.json"
    log_limit = cfg.compile_log_max_bytes

    def bounded(raw_log: str) -> str:
        return head_and_tail(shown(raw_log), log_limit)

    try:
        meta = json.loads(meta_path.read_text()) if cubin_path.exists() else None
        os.utime(cubin_path)  # its last use, which eviction goes by
    except (OSError, ValueError):  # not cached, or evicted by another worker meanwhile
        meta = None
    # The raw log is kept and filtered for each caller: a cubin one kernel of ours built may
    # serve a job's identical source, whose log must still withhold other files' lines.
    if meta and "raw_log" in meta and "kernels" in meta:  # an older worker's entry lacks one: built again
        return CompiledKernel(cubin_path, meta["lowered"], bounded(meta["raw_log"]), cached=True,
                              compiler=compiler, kernels=meta["kernels"])

    require = untrusted and cfg.unconfined_sources != "warn"
    if untrusted and not confinement.available:
        if require:
            raise CompileRefused(
                f"job sources are refused on this worker: the compiler cannot be confined ({confinement.detail}); "
                "GEMMWATCH_UNCONFINED_SOURCES=warn accepts them"
            )
        log.warning("compiling a job's source WITHOUT confinement (%s)", confinement.detail)
    reply = _run_sandbox({**request, "require_confinement": require, "log_max_bytes": max(RAW_LOG_MAX_BYTES, log_limit)},
                         cfg.compile_timeout_s, cfg.compile_memory_mb)
    if not reply.get("ok"):
        if "log" in reply:
            raise CompileError(bounded(reply["log"]))
        raise CompileRefused(reply.get("error", "the compile process gave no answer"))
    binary = base64.b64decode(reply["cubin"])
    reply["cubin"] = None
    most = min(cfg.kernel_max_bytes, cfg.kernel_cache_max_bytes)
    if len(binary) > most:
        what = "library" if suffix == ".so" else "cubin"
        raise CompileRefused(f"the compiled {what} is {len(binary)} bytes, over the {most} bytes a kernel may be "
                             "(GEMMWATCH_KERNEL_MAX_BYTES, GEMMWATCH_KERNEL_CACHE_MAX_BYTES); not kept")
    cache.mkdir(parents=True, exist_ok=True)
    _write_atomically(cubin_path, binary)
    _write_atomically(meta_path, json.dumps({"lowered": reply["lowered"], "raw_log": reply["log"],
                                             "kernels": reply["kernels"]}).encode())
    evict(cache, cfg.kernel_cache_max_bytes, keep=digest)
    return CompiledKernel(cubin_path, reply["lowered"], bounded(reply["log"]), cached=False, compiler=compiler,
                          kernels=reply["kernels"])


# What the compile process may send back of a log (its head and tail): enough for any reader.
RAW_LOG_MAX_BYTES = 1 << 20


def evict(cache: Path, most_bytes: int, keep: str = "") -> list[str]:
    """Bring the cache within `most_bytes`: whole entries (a digest's binary and its record), least
    recently used first (a hit touches its binary), never `keep` (the entry just written).
    Returns the digests evicted. Workers sharing the folder may evict at once: a file already gone
    is no error, and an entry evicted under a reader is compiled again by it."""
    entries: dict[str, list] = {}
    try:
        listing = list(os.scandir(cache))
    except OSError:
        return []
    for item in listing:
        if item.name.endswith(".tmp"):  # another worker's entry being written
            continue
        digest = item.name.split(".", 1)[0]
        try:
            st = item.stat(follow_symlinks=False)
        except OSError:
            continue
        entry = entries.setdefault(digest, [0, 0.0, []])
        entry[0] += st.st_size
        entry[1] = max(entry[1], st.st_mtime)
        entry[2].append(item.path)
    total = sum(size for size, _, _ in entries.values())
    evicted = []
    for digest, (size, _, paths) in sorted(entries.items(), key=lambda e: e[1][1]):
        if total <= most_bytes:
            break
        if digest == keep:
            continue
        for path in paths:
            try:
                os.unlink(path)
            except OSError:
                pass
        total -= size
        evicted.append(digest)
    if evicted:
        log.info("kernel cache over %d bytes: evicted %d least recently used entries", most_bytes, len(evicted))
    return evicted


def compile_nvcc(launch: Launch, arch: str, cfg, library: bool = False) -> CompiledKernel:
    """A kernel's files built by nvcc, host code and all, in the confined compile process: a cubin,
    or (library) a shared library exporting the launch's launcher, its functions read from .dynsym."""
    path = nvcc.nvcc_path(cfg)
    if path is None:
        raise CompileRefused("no nvcc on this worker: install gemmwatch[compile] (the nvidia-cuda-nvcc wheel) or "
                             "set GEMMWATCH_NVCC")
    confinement = _probe_nvcc(path, cfg.compile_timeout_s, cfg.compile_memory_mb)
    if confinement.version is None:
        _probe_nvcc.cache_clear()  # only an answer is remembered (as for NVRTC)
        raise CompileRefused(confinement.detail)
    request = nvcc.request(launch, path, arch, cfg.compile_timeout_s)
    if library:
        request["launcher"] = launch.launcher
    # nvcc names the kernel's files as src/<path>, and the unit it compiles as gemmwatch_entry.cu.
    own = {f"src/{p}" for p in launch.files} | {ENTRY_UNIT}
    shown_as = {f"src/{p}": p for p in launch.files} | {
        ENTRY_UNIT: f"(the unit that names the {'launcher' if library else 'entry'})"}
    untrusted = launch.origin == "job"

    toolkit = tuple(kernel_includes.nvcc_include_dirs(path))

    def shown(raw_log: str) -> str:
        return rename_files(filter_log(raw_log, own, toolkit) if untrusted else raw_log, shown_as)

    key = ["nvcc", sorted(launch.files.items()), launch.source, launch.entry, request["options"],
           confinement.version, path, nvcc.host_compiler_dirs(), *(["library", launch.launcher] if library else [])]
    return failed_compiles.remembered(build, request, key, confinement, f"nvcc {confinement.version}", untrusted,
                                      shown, cfg, ".so" if library else ".cubin")


@functools.lru_cache(maxsize=4)
def _probe_nvcc(path: str, timeout_s: float, memory_mb: int) -> Confinement:
    """nvcc's release, and whether its compile process can be confined (asked once per process)."""
    try:
        reply = _run_sandbox({"tool": "nvcc", "probe": True, "nvcc": path,
                              "executable": [nvcc.toolkit_root(path), *nvcc.host_compiler_dirs()]}, timeout_s, memory_mb)
    except CompileRefused as exc:
        return Confinement(False, str(exc), None)
    if not reply.get("ok"):
        return Confinement(False, reply.get("error", "no answer"), None)
    return Confinement(bool(reply["confined"]), reply["confinement"], reply["nvcc"])


def probe(cfg) -> Confinement:
    """Whether this machine can confine the compiler (asked once per process, by really trying)."""
    found = _probe(str(SANDBOX), cfg.compile_timeout_s, cfg.compile_memory_mb, _library(cfg))
    if found.version is None:
        # Only an answer is remembered: a probe that got none (a compile process starved of time
        # on a busy machine, say) is tried again by the next compile instead of failing all of them.
        _probe.cache_clear()
    return found


@functools.lru_cache(maxsize=4)
def _probe(_sandbox: str, timeout_s: float, memory_mb: int, library: str | None = None) -> Confinement:
    try:
        reply = _run_sandbox({"probe": True, "options": ["-arch=sm_90"], "nvrtc_library": library}, timeout_s, memory_mb)
    except CompileRefused as exc:
        return Confinement(False, str(exc), None)
    if not reply.get("ok"):
        return Confinement(False, reply.get("error", "no answer"), None)
    return Confinement(bool(reply["confined"]), reply["confinement"], reply["nvrtc"])


def _library(cfg) -> str | None:
    """GEMMWATCH_NVRTC_LIBRARY: the libnvrtc the compile process loads (else cuda-pathfinder's
    choice: a wheel's, then the system's). Pin it to the toolkit your repository builds with, and
    NVRTC makes the same code as that toolkit's nvcc (docs/BENCHMARKS.md, issue 19)."""
    found = getattr(cfg, "nvrtc_library", None)
    return str(found) if found else None


def sandbox_command(timeout_s: float, memory_mb: int) -> list[str]:
    """The compile process's command line. It sets its own limits as its first act, before it
    reads the request: RLIMIT_AS, no core file, and RLIMIT_CPU just past the time limit, so a
    runaway compile ends even if the process that waits for it is killed first (a GPU process
    past its case time limit, say). No preexec_fn here: that is unsafe in the GPU process
    (CUDA's threads) and would rule out the vfork/posix_spawn start."""
    return [sys.executable, "-s", "-B", str(SANDBOX), str(memory_mb * 1024 * 1024), str(math.ceil(timeout_s) + 1)]


def _run_sandbox(request: dict, timeout_s: float, memory_mb: int) -> dict:
    env = {k: os.environ[k] for k in _PASSED_ENV if k in os.environ}
    argv = sandbox_command(timeout_s, memory_mb)
    with tempfile.TemporaryDirectory(prefix="gemmwatch-compile-") as home:
        env["HOME"] = home
        try:
            proc = subprocess.run(
                argv, input=json.dumps(request), capture_output=True,
                text=True, env=env, cwd=home, timeout=timeout_s,
            )
        except subprocess.TimeoutExpired:
            raise CompileRefused(
                f"compile exceeded the {timeout_s:g} s compile time limit (GEMMWATCH_COMPILE_TIMEOUT_S); "
                "killed"
            ) from None
    if proc.returncode != 0 or not proc.stdout.strip():
        last = (proc.stderr.strip().splitlines() or ["no message"])[-1][:300]
        if proc.returncode in (-signal.SIGXCPU, -signal.SIGKILL) and "MemoryError" not in proc.stderr:
            raise CompileRefused(
                f"compile exceeded its CPU time limit ({timeout_s:g} s, GEMMWATCH_COMPILE_TIMEOUT_S); killed"
            )
        if "MemoryError" in proc.stderr or "std::bad_alloc" in proc.stderr or proc.returncode < 0:
            raise CompileRefused(
                f"compile process ended (exit {proc.returncode}) under its {memory_mb} MiB memory limit "
                f"(GEMMWATCH_COMPILE_MEMORY_MB): {last}"
            )
        raise CompileRefused(f"compile process failed (exit {proc.returncode}): {last}")
    return json.loads(proc.stdout)


def _write_atomically(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(tmp, path)
