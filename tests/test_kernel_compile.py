"""Every built-in kernel compiles for sm_90, and every variant says where its technique comes from.

No GPU needed: each configuration goes through the worker's own compile step (NVRTC from its
PyPI wheel, in the confined compile process, with the options the runner uses), so what fails
here would fail on a GPU worker. NVRTC missing fails these tests rather than skipping them.
"""

import itertools
import re
from pathlib import Path

import pytest

from api.settings import Settings
from kernels.registry import CUBLAS, KERNEL_DIR, VARIANTS
from worker import compiler

SEEDS_DIR = Path(__file__).resolve().parent.parent.parent / "shared" / "seeds"
SEED_NAME = re.compile(r"\d{3}_[0-9a-f]{16}\.txt")
KERNELS = [name for name, spec in VARIANTS.items() if spec.source_file is not None]
# Every kernel at every combination of its tunables' allowed values.
CONFIGS = [
    (name, dict(zip([t.name for t in VARIANTS[name].tunables], values)))
    for name in KERNELS
    for values in itertools.product(*(t.values for t in VARIANTS[name].tunables))
]
PRELUDES = sorted({part for name in KERNELS for part in VARIANTS[name].prelude})
DOCUMENTED = [name for name in VARIANTS if name != CUBLAS]


def header_comment(text: str) -> str:
    """The comment block a .cu file opens with."""
    lines = []
    for line in text.splitlines():
        if not line.startswith("//"):
            break
        lines.append(line)
    return "\n".join(lines)


@pytest.mark.parametrize(("name", "params"), CONFIGS, ids=[f"{n}-{'-'.join(f'{k}{v}' for k, v in p.items())}" for n, p in CONFIGS])
def test_kernel_compiles_for_sm90(name, params, tmp_path):
    launch = VARIANTS[name].resolve(params)
    try:  # exactly as the GPU runner compiles it (options, name expressions), for an sm_90 GPU
        built = compiler.compile_launch(launch, "9.0", Settings(GEMMWATCH_DATA_DIR=str(tmp_path)))
    except compiler.CompileError as exc:
        pytest.fail(f"{name} {params} does not compile:\n{exc}", pytrace=False)
    assert built.cubin_path.read_bytes()[:4] == b"\x7fELF"


@pytest.mark.parametrize("name", DOCUMENTED)
def test_variant_names_its_seed_and_technique(name):
    spec = VARIANTS[name]
    assert re.fullmatch(r"[a-z][a-z0-9_]*", name), f"{name}: variant names are snake_case"
    assert spec.technique and spec.technique.strip(), f"{name}: empty technique"
    assert spec.seed and SEED_NAME.fullmatch(spec.seed), f"{name}: seed {spec.seed!r} is not a seed file name"
    if SEEDS_DIR.is_dir():
        assert (SEEDS_DIR / spec.seed).is_file(), f"{name}: seed {spec.seed} not found in {SEEDS_DIR}"

    assert spec.source_file, f"{name}: only the cuBLAS baseline has no source file"
    text = (KERNEL_DIR / spec.source_file).read_text()
    header = header_comment(text)
    assert header, f"{spec.source_file} must open with a comment (technique, why, seed)"
    assert spec.seed in header or "Past the seeds" in header, (
        f"{spec.source_file}: opening comment mentions neither {spec.seed} nor 'Past the seeds'"
    )
    assert re.search(rf'extern "C" __global__[^;{{]*\b{re.escape(spec.entry)}\s*\(', text), (
        f"{spec.source_file} defines no extern \"C\" __global__ {spec.entry}"
    )


@pytest.mark.parametrize("part", PRELUDES)
def test_prelude_files_explain_themselves_and_define_no_macros(part):
    """Shared device code is prepended, so a macro there would leak into every kernel after it."""
    text = (KERNEL_DIR / part).read_text()
    assert header_comment(text), f"{part} must open with a comment saying what it holds"
    assert not re.search(r"^\s*#\s*define\b", text, re.M), f"{part} defines a macro"


@pytest.mark.parametrize("name", KERNELS)
def test_launch_source_is_self_contained(name):
    """NVRTC gets no include path: the preludes are pasted in, never #included."""
    spec = VARIANTS[name]
    source = spec.resolve().source
    for part in (*spec.prelude, spec.source_file):
        assert (KERNEL_DIR / part).read_text() in source, f"{name}: {part} missing from LaunchSpec.source"
        assert f'#line 1 "{part}"' in source
    assert not re.search(r"^\s*#\s*include\b", source, re.M), f"{name}: its source #includes a file"
