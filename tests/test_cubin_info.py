"""What a cubin says of its kernels (worker/compile/cubin_info.py), read from cubins NVRTC and nvcc really
make: a template kernel's instantiation (a weak symbol), an extern "C" kernel (sizes only), and a
device function the compiler keeps beside them (64-bit division), which is no kernel."""

import tempfile

import pytest

from core.settings import Settings
from worker.compile import compiler, cubin_info

SOURCE = """
template <int T> __global__ void kdiv(size_t M, size_t N, __half alpha, const float* __restrict__ A, float* C) {
    C[threadIdx.x] = (float)(M / N) + T + A[0] + __half2float(alpha);
}
extern "C" __global__ void plain(long long M, double alpha, unsigned short s, float* C) { C[M / s] = alpha; }
"""


@pytest.fixture(scope="module")
def nvrtc_cubin():
    cfg = Settings(GEMMWATCH_DATA_DIR=tempfile.mkdtemp(), GEMMWATCH_COMPILE_TIMEOUT_S="300")
    from core.description import kernel_includes

    dirs = kernel_includes.toolkit_include_dirs()
    built = compiler.compile_kernel('#include <cuda_fp16.h>\n' + SOURCE, name="k.cu",
                                    options=["-arch=sm_90", *(f"-I{d}" for d in dirs)], name_expressions=("kdiv<3>",),
                                    untrusted=False, cfg=cfg, include_dirs=dirs)
    return built


def test_only_kernels_are_listed_with_their_parameters(nvrtc_cubin):
    kernels = {k["name"] or k["symbol"]: k["params"] for k in nvrtc_cubin.kernels}
    assert set(kernels) == {"kdiv<3>", "plain"}  # no division helper, the weak instantiation found
    assert kernels["kdiv<3>"] == [["unsigned long", 8], ["unsigned long", 8], ["__half", 2], ["float const*", 8],
                                  ["float*", 8]]
    assert kernels["plain"] == [[None, 8], [None, 8], [None, 2], [None, 8]]  # extern "C": sizes from .nv.info
    assert nvrtc_cubin.entry("kdiv<3>", {})["symbol"] == nvrtc_cubin.lowered["kdiv<3>"]


@pytest.mark.parametrize(("demangled", "name", "types"), [
    ("void f<16u, true>(unsigned long, float const*)", "f<16u, true>", ["unsigned long", "float const*"]),
    ("void ns::g<float, (Layout)1>(int, float (*) [4], void*)", "ns::g<float, (Layout)1>",
     ["int", "float (*) [4]", "void*"]),
    ("void h()", "h", []),
])
def test_signatures_split_at_the_top_level(demangled, name, types):
    assert cubin_info.split_signature(demangled) == (name, types)


def test_what_is_not_a_cubin_is_said_to_be_so():
    with pytest.raises(cubin_info.CubinError, match="not a 64-bit"):
        cubin_info.describe(b"#!/bin/sh\n")
