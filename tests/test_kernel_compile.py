"""Every built-in kernel compiles for sm_90, and every variant says where its technique comes from.

No GPU needed: each configuration goes through the worker's own compile step (NVRTC from its
PyPI wheel, in the confined compile process, with the options the runner uses), so what fails
here would fail on a GPU worker. NVRTC missing fails these tests rather than skipping them.

Which configurations: on every run, each kernel's defaults and a pairwise cover of its tunables
(every pair of values of any two tunables appears in some configuration): 91 compiles where the
full product is 138, the four heaviest kernels (warp_tile_large, the two tail-split ones,
tf32_wgmma) 25 where they had 72. The full product (then 136) took 92 s of the suite's 872 s of
CPU on the 2-core machine (docs/BENCHMARKS.md, issue 21); it compiles in the GPU suite instead
(`test_every_configuration_compiles`, `gpu`-marked: the GPU machine has the cores for it).
"""

import os
import re
from concurrent.futures import ThreadPoolExecutor

import pytest
from allpairspy import AllPairs

from core.description.builtins import KERNELS_DIR, builtin_kernels
from core.description.kernel import resolve
from core.settings import Settings
from tests.fake_gpu import H100_FIGURES
from worker.compile import compiler
from worker.arguments import kernel_args

SEED_NAME = re.compile(r"\d{3}_[0-9a-f]{16}\.txt")
KERNELS = list(builtin_kernels())
HEADERS = sorted(p.name for p in KERNELS_DIR.glob("*.cuh"))


def pairwise_cover(name: str) -> list[dict[str, int]]:
    """The defaults, then configurations in which every two tunables take every pair of their
    values at least once (all of them where a kernel has fewer than two tunables)."""
    desc = builtin_kernels()[name]
    names = list(desc.tunables)
    if len(names) < 2:
        return desc.configurations()
    rows = [dict(zip(names, row)) for row in AllPairs([desc.tunables[n].values for n in names])]
    return [desc.defaults()] + [row for row in rows if row != desc.defaults()]


def config_id(name: str, params: dict[str, int]) -> str:
    return f"{name}-{'-'.join(f'{k}{v}' for k, v in params.items())}"


CONFIGS = [(name, params) for name in KERNELS for params in pairwise_cover(name)]
ALL_CONFIGS = [(name, params) for name in KERNELS for params in builtin_kernels()[name].configurations()]


def compile_config(name: str, params: dict[str, int], data_dir, cache_dir):
    """Exactly as the GPU runner compiles it (options, name expressions), for an sm_90 GPU. The
    compile time limit raised: on a 2-core machine running the suite in parallel, NVRTC once took
    over the default 60 s for a large kernel; whether it compiles is the question."""
    launch = resolve(builtin_kernels()[name], params, H100_FIGURES, "builtin")
    cfg = Settings(GEMMWATCH_DATA_DIR=str(data_dir), GEMMWATCH_COMPILE_TIMEOUT_S="600",
                   GEMMWATCH_KERNEL_CACHE_DIR=str(cache_dir))
    return compiler.compile_launch(launch, "9.0", cfg)


def header_comment(text: str) -> str:
    """The comment block a .cu file opens with."""
    lines = []
    for line in text.splitlines():
        if not line.startswith("//"):
            break
        lines.append(line)
    return "\n".join(lines)


@pytest.mark.parametrize(("name", "params"), CONFIGS, ids=[config_id(n, p) for n, p in CONFIGS])
def test_kernel_compiles_for_sm90(name, params, tmp_path, shared_kernel_cache):
    # The run's shared cache: tests/test_kernel_paths.py's worker compiles the defaults too.
    try:
        built = compile_config(name, params, tmp_path, shared_kernel_cache)
    except compiler.CompileError as exc:
        pytest.fail(f"{name} {params} does not compile:\n{exc}", pytrace=False)
    assert built.cubin_path.read_bytes()[:4] == b"\x7fELF"
    # The binary's parameters fit the description's args, as the runner will pass them.
    launch = resolve(builtin_kernels()[name], params, H100_FIGURES, "builtin")
    kernel_args.load(built, launch, lambda symbol: symbol)


def test_the_cover_holds_every_pair_of_values():
    """The cover is what it says: each kernel's defaults, and every value pair of every two tunables."""
    for name in KERNELS:
        desc, cover = builtin_kernels()[name], pairwise_cover(name)
        assert cover[0] == desc.defaults() and all(c in desc.configurations() for c in cover)
        names = list(desc.tunables)
        for i, a in enumerate(names):
            for b in names[i + 1:]:
                wanted = {(x, y) for x in desc.tunables[a].values for y in desc.tunables[b].values}
                assert wanted == {(c[a], c[b]) for c in cover}, (name, a, b)
    assert len(CONFIGS) < len(ALL_CONFIGS)


@pytest.mark.gpu
def test_every_configuration_compiles(tmp_path):
    """The full product of every kernel's tunables, as an autotune job may pick any of them; the
    compiles run side by side (each is a process of its own)."""
    def one(config):
        try:
            compile_config(*config, tmp_path, tmp_path / "cache")
            return None
        except compiler.CompileError as exc:
            return f"{config_id(*config)}: {str(exc)[:500]}"

    with ThreadPoolExecutor(os.cpu_count() or 4) as pool:
        failures = [f for f in pool.map(one, ALL_CONFIGS) if f]
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("name", KERNELS)
def test_variant_names_its_seed_and_technique(name):
    desc = builtin_kernels()[name]
    assert re.fullmatch(r"[a-z][a-z0-9_]*", name), f"{name}: variant names are snake_case"
    assert desc.technique and desc.technique.strip(), f"{name}: empty technique"
    assert desc.seed and SEED_NAME.fullmatch(desc.seed), f"{name}: seed {desc.seed!r} is not a seed file name"

    text = desc.files[desc.source]
    header = header_comment(text)
    assert header, f"{desc.source} must open with a comment (technique, why, seed)"
    assert desc.seed in header or "Past the seeds" in header, (
        f"{desc.source}: opening comment mentions neither {desc.seed} nor 'Past the seeds'"
    )
    assert re.search(rf'extern "C" __global__[^;{{]*\b{re.escape(desc.entry)}\s*\(', text), (
        f"{desc.source} defines no extern \"C\" __global__ {desc.entry}"
    )


@pytest.mark.parametrize("part", HEADERS)
def test_shared_headers_explain_themselves_and_leak_no_macros(part):
    """A shared header is seen by every kernel that includes it, after the -D options: a macro left
    defined there would leak into each, and a name a tunable -Ds away would break it. A header may
    spell something once with a GW_ macro it #undefs before its end (wgmma.cuh's operand lists)."""
    text = (KERNELS_DIR / part).read_text()
    assert header_comment(text), f"{part} must open with a comment saying what it holds"
    defined = re.findall(r"^\s*#\s*define\s+(\w+)", text, re.M)
    assert all(name.startswith("GW_") for name in defined), f"{part} defines {defined}: only GW_ helpers"
    for name in defined:
        last_define = max(m.start() for m in re.finditer(rf"^\s*#\s*define\s+{name}\b", text, re.M))
        undef = re.search(rf"^\s*#\s*undef\s+{name}\b", text[last_define:], re.M)
        assert undef, f"{part} leaves {name} defined for the kernels that include it"
    assert "#pragma once" in text, f"{part}: included by several files, it must guard itself"


@pytest.mark.parametrize("name", KERNELS)
def test_a_builtin_carries_every_file_it_includes_and_nothing_else(name):
    """The built-ins are a kernels folder like any user's: each description carries exactly the
    files its source reaches, read from kernels/."""
    desc = builtin_kernels()[name]
    for path, text in desc.files.items():
        assert (KERNELS_DIR / path).read_text() == text
    included = {m for t in desc.files.values() for m in re.findall(r'^#include "([^"]+)"', t, re.M)}
    assert set(desc.files) == included | {desc.source}


def setmaxnreg_counts(name: str, tmp_path, cache_dir) -> tuple[int, int, int, int] | None:
    """(registers a thread gets at launch, threads a block, the producer's count after setmaxnreg.dec,
    the consumers' after setmaxnreg.inc) of a built-in, read from its cubin; None without setmaxnreg."""
    import subprocess

    from worker.compile.nvcc import toolkit_program

    built = compile_config(name, {}, tmp_path, cache_dir)
    cuobjdump = toolkit_program("cuobjdump")
    sass = subprocess.run([cuobjdump, "-sass", str(built.cubin_path)], capture_output=True, text=True, check=True).stdout
    res = subprocess.run([cuobjdump, "-res-usage", str(built.cubin_path)], capture_output=True, text=True,
                         check=True).stdout
    dealloc = re.findall(r"USETMAXREG\.DEALLOC\.CTAPOOL (0x[0-9a-f]+)", sass)
    alloc = re.findall(r"USETMAXREG\.TRY_ALLOC\.CTAPOOL \w+, (0x[0-9a-f]+)", sass)
    if not dealloc and not alloc:
        return None
    assert len(set(dealloc)) == len(set(alloc)) == 1, (dealloc, alloc)  # one producer count, one consumer count
    launch = resolve(builtin_kernels()[name], {}, H100_FIGURES, "builtin")
    threads = launch.block[0] * launch.block[1] * launch.block[2]
    return int(re.search(r"REG:(\d+)", res).group(1)), threads, int(dealloc[0], 16), int(alloc[0], 16)


SETMAXNREG_KERNELS = [n for n, d in builtin_kernels().items() if d.target == "sm_90a" and "wgmma" in n]


@pytest.mark.parametrize("name", SETMAXNREG_KERNELS)
def test_setmaxnreg_asks_no_more_registers_than_the_producer_gives_back(name, tmp_path, shared_kernel_cache):
    """setmaxnreg.inc waits until the block's pool holds the registers it asks for: if the producer
    warpgroup's setmaxnreg.dec gives back fewer than the consumers take, every consumer waits for
    ever. A persistent tf32_wgmma (at 1abd935) hung so on the H100 at 80 and 216 (launched at 168:
    11,264 given back, 12,288 asked)."""
    counts = setmaxnreg_counts(name, tmp_path, shared_kernel_cache)
    if counts is None:
        pytest.skip(f"{name} does not use setmaxnreg")
    at_launch, threads, producer, consumer = counts
    given_back = 128 * (at_launch - producer)  # warpgroup 0 is the producer
    asked = (threads - 128) * (consumer - at_launch)
    assert asked <= given_back, f"{name}: consumers ask {asked} registers, the producer gives back {given_back}"
