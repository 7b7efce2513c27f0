"""Issue 49, row 6: nvcc's compile cannot tell whether a path outside the job exists.

As reported: `__has_include(</path>)` assembled by token pasting (which the source guard allows,
since CUTLASS-style macros paste) passed the guard; the host preprocessor then said "Permission
denied" for a file that exists (confinement refused the open) and took the `#else` branch for one
that does not. Now a read the confinement denies fails as a missing file would
(worker/compile/denied_as_absent.c, preloaded by the compile process): the compile's answer for an
existing file and for a missing one is the same, word for word but the path.

Real nvcc (the nvidia-cuda-nvcc wheel) in the real confined compile process; no GPU needed.
"""

import httpx
import pytest

from core.description.kernel import resolve
from core.description.kernel_description import KernelDescription
from core.settings import Settings
from tests.conftest import HTTP_TIMEOUT_S, wait_for_job
from tests.descriptions import one_file
from tests.fake_gpu import H100_FIGURES
from tests.test_request_gate import token_with
from worker.compile import compiler, nvcc
from worker.compile.compiled import CompileError

PROBES = {
    "pasted in #if": "#define CAT(a, b) a##b\n#if CAT(__has_, include)(<{path}>)\n#error yes\n#else\n#error no\n#endif\n",
    "through an object-like macro": ("#define CAT(a, b) a##b\n#define PROBE CAT(__has_inc, lude)(<{path}>)\n"
                                     "#if PROBE\n#error yes\n#else\n#error no\n#endif\n"),
    "pasted _next": "#define CAT(a, b) a##b\n#if CAT(__has_include_, next)(<{path}>)\n#error yes\n#else\n#error no\n#endif\n",
}
KERNEL = 'extern "C" __global__ void k(const float *a, const float *b, float *c) { c[0] = a[0] * b[0]; }\n'


def _answer(text: str, tmp_path) -> str:
    desc = KernelDescription.model_validate({
        "name": "probe", "source": "probe.cu", "entry": "k", "files": {"probe.cu": text + KERNEL},
        "block": [1], "grid": {"x": "1"}, "args": ["A", "B", "C"], "compiler": "nvcc"})
    cfg = Settings(GEMMWATCH_DATA_DIR=str(tmp_path), GEMMWATCH_COMPILE_TIMEOUT_S="300")
    try:
        compiler.compile_launch(resolve(desc, {}, H100_FIGURES, "job"), "9.0", cfg)
    except CompileError as exc:
        return str(exc)
    return "compiled"


@pytest.mark.skipif(nvcc.nvcc_path(Settings()) is None, reason="needs nvcc (gemmwatch[compile])")
@pytest.mark.parametrize("probe", sorted(PROBES))
def test_an_existing_file_and_a_missing_one_get_the_same_answer(probe, tmp_path):
    exists = __file__  # outside every folder the compile may read
    missing = __file__ + ".not-there"
    said_exists = _answer(PROBES[probe].format(path=exists), tmp_path / "a")
    said_missing = _answer(PROBES[probe].format(path=missing), tmp_path / "b")
    assert "Permission denied" not in said_exists, said_exists
    assert said_exists.replace(exists, "PATH") == said_missing.replace(missing, "PATH"), (said_exists, said_missing)
    assert "no" in said_missing  # the #else branch ran for both: the probe read "absent"


@pytest.mark.skipif(nvcc.nvcc_path(Settings()) is None, reason="needs nvcc (gemmwatch[compile])")
def test_row_6_through_the_server_and_a_worker(cfg, start_worker, live_server):
    """The row as it was found: jobs posted to the real server (both databases), compiled by a real
    worker, the answer read back as every reader reads it. A file of the worker's data folder that
    exists and one that does not: the stored errors differ only in the path."""
    start_worker(cfg, GEMMWATCH_COMPILE_TIMEOUT_S="300")
    base = live_server(cfg)
    token = token_with(cfg, "prober")
    secret = cfg.data_dir / "probe-target"
    secret.write_text("a file the job must not learn of\n")
    answers = {}
    for label, path in (("exists", str(secret)), ("missing", str(secret) + "-absent")):
        text = PROBES["pasted in #if"].format(path=path) + GEMM
        body = {"sources": [one_file("probe", text, "probe", [16, 16], compiler="nvcc")], "sizes": [[16, 16, 16]]}
        posted = httpx.post(f"{base}/api/jobs", json=body, headers={"Authorization": f"Bearer {token}"},
                            timeout=HTTP_TIMEOUT_S)
        assert posted.status_code == 202, posted.text
        with httpx.Client(base_url=base, timeout=HTTP_TIMEOUT_S) as reader:
            job = wait_for_job(reader, posted.json()["id"], timeout=300)
        (only,) = job["results"]
        assert not only["verified"]
        answers[label] = (only["error"] or "").replace(path, "PATH")
    assert "Permission denied" not in answers["exists"], answers["exists"]
    assert answers["exists"] == answers["missing"], answers


GEMM = """extern "C" __global__ void probe(int M, int N, int K, float alpha, const float *A, const float *B,
                                   float beta, float *C) {
    int row = blockIdx.y * 16 + threadIdx.y, col = blockIdx.x * 16 + threadIdx.x;
    if (row >= M || col >= N) return;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc += A[row * K + k] * B[k * N + col];
    C[row * N + col] = alpha * acc + beta * C[row * N + col];
}
"""



@pytest.mark.skipif(nvcc.nvcc_path(Settings()) is None, reason="needs nvcc (gemmwatch[compile])")
def test_a_data_folder_given_as_a_relative_path_still_hides_whether_a_file_exists(tmp_path, monkeypatch):
    """GEMMWATCH_DATA_DIR's default, `.gemmwatch`, is relative, and the compile process runs in a
    folder of its own: the preloaded library's path must still reach it (it once did not, and the
    loader skipped it with "cannot be preloaded", the probe's answer told again)."""
    monkeypatch.chdir(tmp_path)
    exists = __file__
    missing = __file__ + ".not-there"
    said_exists = _answer(PROBES["pasted in #if"].format(path=exists), "relative-a")
    said_missing = _answer(PROBES["pasted in #if"].format(path=missing), "relative-b")
    for said in (said_exists, said_missing):
        assert "cannot be preloaded" not in said and "Permission denied" not in said, said
    assert said_exists.replace(exists, "PATH") == said_missing.replace(missing, "PATH"), (said_exists, said_missing)
