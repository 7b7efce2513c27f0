"""A launcher that is an object (AD2605/gemm-zoo's kernel functors): a class built for the problem from
M, N, K and the device's properties, then called for each run. `"launcher": "gemmwatch::functor<Type>"`
names gemmwatch's launcher over it (worker/compile/launcher_adapters/gemmwatch/functor.h): args are M, N,
K, then the call operator's parameters.

Real but the GPU, as tests/test_launcher_cases.py: nvcc builds the library in the confined compile, the
case runs in its own confined process, and tests/fixtures/host_launchers' objects compute on the host for
the CPU double. The GPU's own run is in tests/test_gpu_launchers.py.
"""

import json
import shutil

import pytest
from pydantic import ValidationError

from tests.test_launcher_cases import HOST, POLICY, built, case, described, needs_confinement, runner  # noqa: F401
from worker.compile.compiled import CompileError
from core.description.kernel_folder import load_folder


def test_the_type_is_named_and_no_library_is_needed():
    desc = described(HOST, "host_gemm_object")
    assert desc.launcher == "gemmwatch::functor<HostGemmObject>" and desc.libraries == []
    with pytest.raises(ValidationError, match=r'name the type \(a class with an operator\(\)\) gemmwatch::functor '
                                              r'runs.*"gemmwatch::functor<Type>"'):
        described(HOST, "host_gemm_object", launcher="gemmwatch::functor")
    with pytest.raises(ValidationError, match="launcher"):  # the type is pasted into the unit: no code
        described(HOST, "host_gemm_object", launcher="gemmwatch::functor<HostGemmObject>; int x = 1; //")


@needs_confinement
def test_an_object_built_once_per_size_reads_c_and_writes_d_and_is_verified(runner):  # noqa: F811
    """HostGemmObject writes a wrong D once it has been built twice: verified, it was built once for
    the case and kept through the checks and every timed run, as gemm-zoo's runner keeps its object."""
    out = runner.run_case(case(described(HOST, "host_gemm_object")), POLICY)
    assert out.verified and out.error is None and out.rel_error < 1e-6, out.error
    assert out.n_samples >= 10
    params = out.env["launch"]["params"]
    assert params[:3] == ["M: int", "N: int", "K: int"], params  # gemmwatch's launcher's own
    assert params[3:] == ["A: float const*", "B: float const*", "C: float const*", "D: float*", "alpha: float",
                          "beta: float", "stream: CUstream_st*"], params  # the call operator's
    assert out.env["launcher"]["what_happened"] == "the launcher returned normally"


@needs_confinement
def test_an_object_built_from_nothing_takes_the_sizes_again_in_its_call(runner):  # noqa: F811
    """A call operator that takes M, N and K itself names them again as expressions ("=M"): a name is
    given once in args, and gemmwatch's launcher takes the first three."""
    desc = described(HOST, "host_gemm_object_sized_per_call")
    assert desc.form.epilogue == "ab_only"
    out = runner.run_case(case(desc), POLICY)
    assert out.verified and out.error is None and out.rel_error < 1e-6, out.error
    assert out.env["launch"]["params"][3:6] == ["=M: int", "=N: int", "=K: int"], out.env["launch"]["params"]


@needs_confinement
@pytest.mark.parametrize(("type_name", "words"), [
    ("HostGemmBuiltFromAFile", "Type must be built from (M, N, K, const cudaDeviceProp&), from (M, N, K) or from nothing"),
    ("HostGemmOverloaded", "Type must have one call operator"),
    ("HostGemm", "Type must have one call operator"),  # a method by another name is no call operator
])
def test_a_type_gemmwatch_cannot_build_or_call_is_refused_at_its_build_in_its_words(
        tmp_path, shared_kernel_cache, type_name, words):
    folder = tmp_path / "repo"
    shutil.copytree(HOST, folder)
    entry, = [{**e, "launcher": f"gemmwatch::functor<{type_name}>"}
              for e in json.loads((HOST / "gemmwatch.json").read_text()) if e["name"] == "host_gemm_object"]
    (folder / "gemmwatch.json").write_text(json.dumps([entry]))
    desc, = load_folder(folder)
    with pytest.raises(CompileError) as refused:
        built(desc, shared_kernel_cache)
    said = str(refused.value)
    assert "gemmwatch/functor.h" in said and "static assertion failed" in said and words in said, said
