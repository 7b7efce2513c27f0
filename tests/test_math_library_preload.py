"""A launcher library that calls a CUDA math library the worker's set-up never loaded (a runner's
cuRAND, "-lcurand" in its Makefile: yencal/cuda-hgemm-mma seeds its inputs with it) loads in the
launcher's process: worker/launch/launcher_child.load_math_libraries_named_by finds it beside the cuBLAS
the set-up loaded and makes it global before the job's library is opened.

No CUDA here: gcc builds stand-ins with the same file names (libcublas.so.13 as the one the
set-up loaded, libcurand.so.10 beside it) and a job library that calls curand without linking it,
as gemmwatch builds a launcher library. Each check runs in a fresh interpreter, so what one loads
globally cannot help the next.
"""

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")

ROOT = Path(__file__).resolve().parent.parent


def _shared(folder: Path, name: str, source: str) -> Path:
    (folder / f"{name}.c").write_text(source)
    out = folder / name
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(out), str(folder / f"{name}.c")], check=True)
    return out


@pytest.fixture(scope="module")
def toolkit(tmp_path_factory) -> Path:
    """cuda/lib: libcublas.so.13 and libcurand.so.10 stand-ins; job/launcher.so calls curand only."""
    root = tmp_path_factory.mktemp("toolkit")
    (root / "cuda").mkdir()
    (root / "job").mkdir()
    _shared(root / "cuda", "libcublas.so.13", "int cublasCreate_v2(void **h) { *h = 0; return 0; }\n")
    _shared(root / "cuda", "libcurand.so.10",
            "int curandSetPseudoRandomGeneratorSeed(void *g, unsigned long long s) { return (int)(s % 97); }\n")
    _shared(root / "job", "launcher.so", textwrap.dedent("""
        int curandSetPseudoRandomGeneratorSeed(void *g, unsigned long long s);
        int launch(void) { return curandSetPseudoRandomGeneratorSeed(0, 1000); }
        """))
    return root


def _load_in_fresh_process(toolkit: Path, preload: bool) -> subprocess.CompletedProcess:
    script = textwrap.dedent(f"""
        import ctypes, os, sys
        sys.path.insert(0, {str(ROOT)!r})
        from worker.launch.launcher_child import load_math_libraries_named_by
        ctypes.CDLL({str(toolkit / 'cuda' / 'libcublas.so.13')!r}, mode=os.RTLD_GLOBAL)  # the set-up's cuBLAS
        job = {str(toolkit / 'job' / 'launcher.so')!r}
        if {preload!r}:
            print("added", load_math_libraries_named_by(job))
        print("launch", ctypes.CDLL(job, mode=os.RTLD_NOW | os.RTLD_LOCAL).launch())
        """)
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)


def test_curand_a_library_calls_is_loaded_from_beside_the_workers_cublas(toolkit):
    done = _load_in_fresh_process(toolkit, preload=True)
    assert done.returncode == 0, done.stderr
    assert "added ['libcurand.so.10']" in done.stdout
    assert "launch 30" in done.stdout  # 1000 % 97: the stand-in's function ran


def test_without_it_the_library_does_not_load(toolkit):
    """The failure the preload prevents (seen on the H200 with cuda-hgemm-mma's profile.cu)."""
    done = _load_in_fresh_process(toolkit, preload=False)
    assert done.returncode != 0
    assert "undefined symbol: curandSetPseudoRandomGeneratorSeed" in done.stderr


def test_a_library_that_names_no_math_api_loads_nothing(toolkit, tmp_path):
    plain = _shared(tmp_path, "plain.so", "int launch(void) { return 7; }\n")
    script = textwrap.dedent(f"""
        import ctypes, os, sys
        sys.path.insert(0, {str(ROOT)!r})
        from worker.launch.launcher_child import load_math_libraries_named_by
        ctypes.CDLL({str(toolkit / 'cuda' / 'libcublas.so.13')!r}, mode=os.RTLD_GLOBAL)
        print(load_math_libraries_named_by({str(plain)!r}))
        """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "[]", done.stderr
