"""Jobs that bring their own CUDA sources: validation, compile errors, one path with built-ins."""

import pytest

from core.records.db import upgrade_database
from tests.conftest import make_client, make_settings, wait_for_job
from tests.descriptions import one_file

GOOD = """
extern "C" __global__ void my_gemm(int M, int N, int K, float alpha, const float* A, const float* B,
                                   float beta, float* C) {
    int row = blockIdx.y * TILE + threadIdx.y, col = blockIdx.x * TILE + threadIdx.x;
    if (row >= M || col >= N) return;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc += A[row * K + k] * B[k * N + col];
    C[row * N + col] = beta == 0.0f ? alpha * acc : alpha * acc + beta * C[row * N + col];
}
"""
BROKEN = GOOD.replace("float acc = 0.0f;", "float acc = 0.0f\n")  # missing semicolon: the error is reported at line 8
# The same kernel taking the address of A's TMA tensor map (tensor_maps), as a Hopper kernel does.
MAPPED = GOOD.replace("float beta, float* C)", "float beta, float* C, const void* A_map)")
MAP_ARGS = ["M", "N", "K", "alpha", "A", "B", "beta", "C", "A_map"]


def source(name="mine", text=GOOD, tile=(16, 16), **extra):
    fields = {"entry": "my_gemm", "block": [16, 16], "tile": list(tile), "defines": {"TILE": 16}, **extra}
    return one_file(name, text, **fields)


@pytest.fixture
def stack(tmp_path, pg_url, redis_url, start_worker):
    cfg = make_settings(tmp_path, pg_url, redis_url)
    upgrade_database(cfg)
    start_worker(cfg)
    return make_client(cfg)


def test_a_jobs_own_kernel_runs_beside_a_builtin(stack):
    resp = stack.post("/api/jobs", json={"sources": [source()], "variants": ["mine", "naive"], "sizes": [[33, 17, 9]]})
    assert resp.status_code == 202, resp.text
    job = wait_for_job(stack, resp.json()["id"])
    assert job["status"] == "succeeded", job["error"]
    assert [(r["variant"], r["verified"]) for r in job["results"]] == [("mine", True), ("naive", True)]


def test_a_jobs_kernel_that_takes_a_tensor_map_gets_in_as_it_is(stack):
    """A Hopper kernel that copies A by the TMA names its map in args and describes it; the job
    carries both to the worker (the runner encodes the map on a GPU; the CPU double ignores it)."""
    mapped = source(text=MAPPED, args=MAP_ARGS, tensor_maps={"A": {"box": [32, 16], "swizzle": 128}})
    resp = stack.post("/api/jobs", json={"sources": [mapped], "sizes": [[33, 17, 32]]})
    assert resp.status_code == 202, resp.text
    job = wait_for_job(stack, resp.json()["id"])
    assert job["status"] == "succeeded", job["error"]
    assert job["results"][0]["verified"]
    assert job["results"][0]["env"]["launch"]["tensor_maps"] == {"A": [32, 16, 128]}


# A kernel that reads A through its tensor map alone, as Hopper repositories write them (no A
# pointer among its parameters). Its body is the GPU's business; the CPU double models the product.
MAP_ONLY = ('extern "C" __global__ void my_gemm(int M, int N, int K, float alpha, const float* B, float beta, '
            'float* C, const void* A_map) {}')


def test_a_kernel_that_reads_a_through_its_map_alone_gets_in_and_is_refused_where_no_map_can_be_made(stack):
    mapped = source(text=MAP_ONLY, args=["M", "N", "K", "alpha", "B", "beta", "C", "A_map"],
                    tensor_maps={"A": {"box": [32, 16], "swizzle": 128}})
    # K = 33 floats: A's rows are 132 bytes, which no tensor map describes; K = 32: 128 bytes.
    resp = stack.post("/api/jobs", json={"sources": [mapped], "sizes": [[33, 17, 33], [33, 17, 32]]})
    assert resp.status_code == 202, resp.text
    job = wait_for_job(stack, resp.json()["id"])
    odd, even = sorted(job["results"], key=lambda r: r["k"], reverse=True)
    assert not odd["verified"] and odd["status"] == "failed", odd
    assert ("my_gemm reaches A through its tensor map alone (A_map, no A among its args), and the TMA cannot describe "
            "A at 33x17x33: a line of 33 elements is 132 bytes, not a multiple of 16") in odd["error"], odd["error"]
    assert even["error"] is None and even["env"]["launch"]["tensor_maps"] == {"A": [32, 16, 128]}, even


# The same kernel taking A's map by value, as CUTLASS and most Hopper repositories do
# (`const __grid_constant__ CUtensorMap`; NVRTC has no cuda.h, so the struct is spelled out).
BY_VALUE = ("struct alignas(64) CUtensorMap_st { unsigned long long opaque[16]; };\n"
            + GOOD.replace("float beta, float* C)", "float beta, float* C, const __grid_constant__ CUtensorMap_st A_map)"))


def test_a_kernel_that_takes_its_map_by_value_runs_where_a_map_can_be_made_and_is_refused_elsewhere(stack):
    """By address, this kernel would get address 0 at K = 33 and copy A another way; by value there
    is no "no map", so that case is refused, saying why, and the K = 32 case runs."""
    mapped = source(text=BY_VALUE, args=MAP_ARGS, tensor_maps={"A": {"box": [32, 16], "swizzle": 128}})
    resp = stack.post("/api/jobs", json={"sources": [mapped], "sizes": [[33, 17, 33], [33, 17, 32]]})
    assert resp.status_code == 202, resp.text
    job = wait_for_job(stack, resp.json()["id"])
    odd, even = sorted(job["results"], key=lambda r: r["k"], reverse=True)
    assert ("my_gemm reaches A through A_map, which it takes by value (a map by address could be 0 here), and the TMA "
            "cannot describe A at 33x17x33: a line of 33 elements is 132 bytes, not a multiple of 16") in odd["error"], odd
    assert even["verified"] and even["error"] is None, even


def test_a_map_by_value_with_zeros_when_absent_runs_every_size_and_says_which_had_none(stack):
    """As the TMA built-ins take theirs: by value, with 128 zero bytes where the TMA cannot describe A (the
    kernel then reads A through its pointer). Both cases run, down the API, a worker and the store, and
    the result of the odd one says its A had no map: its number is the kernel's other path's."""
    mapped = source(text=BY_VALUE, args=MAP_ARGS,
                    tensor_maps={"A": {"box": [32, 16], "swizzle": 128, "zeros_when_absent": True}})
    resp = stack.post("/api/jobs", json={"sources": [mapped], "sizes": [[33, 17, 33], [33, 17, 32]]})
    assert resp.status_code == 202, resp.text
    job = wait_for_job(stack, resp.json()["id"])
    assert job["status"] == "succeeded", job["error"]
    odd, even = sorted(job["results"], key=lambda r: r["k"], reverse=True)
    assert odd["verified"] and odd["env"]["launch"]["maps_absent"] == ["A"], odd
    assert even["verified"] and "maps_absent" not in even["env"]["launch"], even


def test_variants_default_to_the_sources(stack):
    job = stack.post("/api/jobs", json={"sources": [source("a"), source("b")], "sizes": [[8, 8, 8]]}).json()
    assert job["variants"] == ["a", "b"]


def test_a_compile_error_comes_back_with_the_compiler_log(stack):
    job = wait_for_job(stack, stack.post("/api/jobs", json={"sources": [source(text=BROKEN)], "sizes": [[8, 8, 8]]}).json()["id"])
    assert job["status"] == "failed"
    assert "compile error" in job["error"]
    assert "mine.cu(8)" in job["error"] and 'expected a ";"' in job["error"]  # line number intact


@pytest.mark.parametrize("src, words", [
    (source(text='#include "/etc/passwd"\n' + GOOD), ["#include", "not absolute"]),
    (source(text='#include "../../etc/passwd"\n' + GOOD), ["#include", "neither a file of the kernel"]),
    (source(text='#include <sys/socket.h>\n' + GOOD), ["mine.cu, line 1", "nor a header NVRTC takes", "set \"compiler\": \"nvcc\""]),
    (source(text='#  include </etc/shadow>\n' + GOOD), ["#include"]),
    (source(text='#inc\\\nlude "/etc/passwd"\n' + GOOD), ["#include"]),
    (source(text="#if __has_include(</etc/passwd>)\n#endif\n" + GOOD), ["__has_include"]),
    (source(name="Bad Name"), ["pattern"]),
    (source(block=[64, 32, 1]), ["1024 threads"]),
    (source(tile=[0, 16]), ["1..65536"]),
    (source(entry="my_gemm; system"), ["pattern"]),
    (source(defines={"A B": 1}), ["pattern"]),
    (source(text="x" * 2_000_001), ["at most 2000000 a job"]),
    (source(text=MAPPED, args=MAP_ARGS), ["each map in both"]),
    (source(text=MAP_ONLY, args=["M", "N", "K", "alpha", "beta", "C", "A_map"], tensor_maps={"A": {"box": [32, 16]}}),
     ["A, B and C each as its pointer (A, B, C) or its tensor map", "missing B"]),
    (source(text=MAPPED, args=MAP_ARGS, tensor_maps={"A": {"box": [32, 16], "swizzle": 16}}), ["0, 32, 64 or 128"]),
])
def test_bad_sources_are_422_and_echo_no_file(client, src, words):
    resp = client.post("/api/jobs", json={"sources": [src], "sizes": [[8, 8, 8]]})
    assert resp.status_code == 422, resp.text
    text = " ".join(d["msg"] for d in resp.json()["detail"])
    for word in words:
        assert word in text, text
    assert "root:" not in resp.text  # nothing from /etc/passwd


def test_source_names_are_unique_and_may_stand_for_a_builtin(client):
    twice = client.post("/api/jobs", json={"sources": [source(), source()], "sizes": [[8, 8, 8]]})
    assert twice.status_code == 422 and "its own name" in twice.text
    # A source named like a built-in is this commit's version of it (what `gemmwatch ci` sends).
    own = client.post("/api/jobs", json={"sources": [source(name="naive")], "sizes": [[8, 8, 8]]})
    assert own.status_code == 202 and own.json()["variants"] == ["naive"]


def test_a_jobs_own_kernel_takes_the_tunables_it_declares(client):
    fixed = client.post("/api/jobs", json={"sources": [source()], "sizes": [[8, 8, 8]], "tunables": {"mine": {"TILE": 8}}})
    assert fixed.status_code == 422 and "no tunable 'TILE'" in fixed.text
    tunable = source(defines={}, tunables={"TILE": {"values": [8, 16], "default": 16}}, block=["TILE", "TILE"],
                     tile=("TILE", "TILE"))
    resp = client.post("/api/jobs", json={"sources": [tunable], "sizes": [[8, 8, 8]], "tunables": {"mine": {"TILE": 8}}})
    assert resp.status_code == 202, resp.text
    wrong = client.post("/api/jobs", json={"sources": [tunable], "sizes": [[8, 8, 8]], "tunables": {"mine": {"TILE": 4}}})
    assert wrong.status_code == 422 and "TILE=4 not allowed" in wrong.text
