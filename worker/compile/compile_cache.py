"""The kernel cache: a compile request's cubin (or launcher library) by a hash of everything it
depends on, from the cache or from the confined compile process (worker/compile/compile_process.py), its
raw log kept and filtered for each reader; the cache held within its size, least recently used
entries evicted first (issue 37, row 3)."""

import base64
import hashlib
import json
import logging
import os
from pathlib import Path

from core.atomic_file import write_whole
from core.text_bounds import head_and_tail
from worker.compile.compile_process import run_sandbox
from worker.compile.compiled import CompiledKernel, CompileError, CompileRefused, CompilerConfinement

log = logging.getLogger(__name__)

# What a cache entry's record means, raised whenever the compile process's reply starts to say
# something an older entry lacks, so that entry is built again rather than read wrong:
# 2, the raw log and each kernel's parameters; 3, `lowered` naming a Triton entry's symbol (an
# autotuned alias builds a cubin named for its jit function).
ENTRY_FORMAT = 3


def build(request: dict, key: list, confinement: CompilerConfinement, compiler: str, untrusted: bool, shown, cfg,
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
    if meta and meta.get("format") == ENTRY_FORMAT:  # an older worker's entry is built again
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
    reply = run_sandbox({**request, "require_confinement": require, "log_max_bytes": max(RAW_LOG_MAX_BYTES, log_limit)},
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
    write_whole(cubin_path, binary)
    write_whole(meta_path, json.dumps({"format": ENTRY_FORMAT, "lowered": reply["lowered"], "raw_log": reply["log"],
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
