"""bf16_wgmma_tn (kernels/half_wgmma_ss.cu at -DB_K_MAJOR=1): the TN form on the CPU. Its form
and cuBLAS call, a description that differs from bf16_wgmma_ss's only where the form does, and
the define's reach: the TN build is another binary, and the N-major builds never compile
wgmma_kb.cuh (a header turned into an #error changes nothing of theirs). Whether it computes the
right C is tests/test_gpu_forms.py's question, on a GPU."""

import dataclasses

import pytest

from core.description.builtins import builtin_kernels
from core.description.gemm_form import cublas_gemm
from core.description.kernel import resolve
from core.settings import Settings
from tests.fake_gpu import H100_FIGURES
from worker.compile import compiler


def test_its_form_is_tn_and_the_rest_is_bf16_wgmma_ss():
    tn, ss = builtin_kernels()["bf16_wgmma_tn"], builtin_kernels()["bf16_wgmma_ss"]
    assert tn.form.key() == "rcr" and ss.form.key() == "rrr"
    assert cublas_gemm(tn.form, 1023, 1021, 1019).text().startswith("op TN")
    assert tn.defines == {**ss.defines, "B_K_MAJOR": 1} and "B_K_MAJOR" not in ss.defines
    same = ("source", "entry", "block", "grid", "dynamic_smem", "target", "compute_mode", "output", "tunables",
            "files", "seed", "args")
    assert {f: getattr(tn, f) for f in same} == {f: getattr(ss, f) for f in same}


def _cubin(name: str, tmp_path, cache, files: dict[str, str] | None = None) -> bytes:
    launch = resolve(builtin_kernels()[name], None, H100_FIGURES, "builtin")
    if files:
        launch = dataclasses.replace(launch, files={**launch.files, **files})
    cfg = Settings(GEMMWATCH_DATA_DIR=str(tmp_path), GEMMWATCH_COMPILE_TIMEOUT_S="600",
                   GEMMWATCH_KERNEL_CACHE_DIR=str(cache))
    try:
        return compiler.compile_launch(launch, "9.0", cfg).cubin_path.read_bytes()
    except compiler.CompileError as exc:
        pytest.fail(f"{name} does not compile:\n{exc}", pytrace=False)


def test_b_k_major_builds_another_kernel_and_leaves_the_n_major_ones_alone(tmp_path, shared_kernel_cache):
    tn = _cubin("bf16_wgmma_tn", tmp_path, shared_kernel_cache)
    ss = _cubin("bf16_wgmma_ss", tmp_path, shared_kernel_cache)
    assert tn[:4] == ss[:4] == b"\x7fELF" and tn != ss
    poisoned = {"wgmma_kb.cuh": "#pragma once\n#error wgmma_kb.cuh is for B_K_MAJOR=1 only\n"}
    assert _cubin("bf16_wgmma_ss", tmp_path, shared_kernel_cache, poisoned) == ss
