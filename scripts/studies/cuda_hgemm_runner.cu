// A stand-in for Bruce-Lee-LY/cuda_hgemm's src/main.cu (issue 36), for a machine without gflags:
// the repository's own Tester (src/common/tester.h, included unchanged) times each of its launchers
// as its main.cu does: cuBLAS first (the Tester's 100 % line), then each kernel after a sleep, one
// warm-up, then the mean of the profiling launches, back to back between two CUDA events on the
// default stream over the same buffers (hot: no L2 flush). Unlike main.cu, every launcher the build
// compiles is evaluated, the five main.cu comments out included (simt_naive, wmma_naive, wmma_base,
// mma_naive, mma_base), so each kernel of docs/examples/Bruce-Lee-LY-cuda_hgemm.gemmwatch.json has
// a figure of its own.
//
//   hgemm_runner M N K [name ...]      (names as main.cu spells them: Wmma-Async-Pg2s; none: all)
//   HGEMM_WARMUP (1), HGEMM_PROFILE (10), HGEMM_SLEEP_MS (100), HGEMM_CHECK (0): main.cu's
//   -warmup_iterations, -profiling_iterations, -sleep_duration, -enable_check.
//
// Built by scripts/studies/home_build_cuda_hgemm.sh with the repository's nvcc flags and -Isrc/common.
// Each kernel prints main.cu's line: "<Name> exit, profiling time: X ms (..%), throughput: Y TFLOPS".

#include <cstdlib>
#include <cstring>
#include <string>

#include "tester.h"

#define HGEMM_FUNC(name) void name(half *A, half *B, half *C, size_t M, size_t N, size_t K)

HGEMM_FUNC(cublasTensorOp);
HGEMM_FUNC(simtNaive);

HGEMM_FUNC(wmmaNaive);
HGEMM_FUNC(wmmaBase);
HGEMM_FUNC(wmmaPadding);
HGEMM_FUNC(wmmaAsync);
HGEMM_FUNC(wmmaAsyncPg2s);
HGEMM_FUNC(wmmaAsyncPg2sPs2r);
HGEMM_FUNC(wmmaAsyncStage2);
HGEMM_FUNC(wmmaAsyncStage3);

HGEMM_FUNC(mmaNaive);
HGEMM_FUNC(mmaBase);
HGEMM_FUNC(mmaPermuted);
HGEMM_FUNC(mmaAsync);
HGEMM_FUNC(mmaAsyncPg2s);
HGEMM_FUNC(mmaAsyncPg2sPs2r);
HGEMM_FUNC(mmaAsyncStage2);
HGEMM_FUNC(mmaAsyncStage3);
HGEMM_FUNC(mmaAsyncStage4);

typedef void (*HgemmFunc)(half *, half *, half *, size_t, size_t, size_t);

struct Launcher {
    const char *name;
    HgemmFunc func;
};

// main.cu's order and names; cuBLAS first, as the Tester's baseline.
static const Launcher kLaunchers[] = {
    {"Cublas-Tensor-Op", cublasTensorOp},
    {"Simt-Naive", simtNaive},
    {"Wmma-Naive", wmmaNaive},
    {"Wmma-Base", wmmaBase},
    {"Wmma-Padding", wmmaPadding},
    {"Wmma-Async", wmmaAsync},
    {"Wmma-Async-Pg2s", wmmaAsyncPg2s},
    {"Wmma-Async-Pg2s-Ps2r", wmmaAsyncPg2sPs2r},
    {"Wmma-Async-Stage2", wmmaAsyncStage2},
    {"Wmma-Async-Stage3", wmmaAsyncStage3},
    {"Mma-Naive", mmaNaive},
    {"Mma-Base", mmaBase},
    {"Mma-Permuted", mmaPermuted},
    {"Mma-Async", mmaAsync},
    {"Mma-Async-Pg2s", mmaAsyncPg2s},
    {"Mma-Async-Pg2s-Ps2r", mmaAsyncPg2sPs2r},
    {"Mma-Async-Stage2", mmaAsyncStage2},
    {"Mma-Async-Stage3", mmaAsyncStage3},
    {"Mma-Async-Stage4", mmaAsyncStage4},
};

static size_t env_or(const char *name, size_t fallback) {
    const char *value = getenv(name);
    return (value && *value) ? static_cast<size_t>(strtoull(value, nullptr, 10)) : fallback;
}

static bool wanted(const char *name, int argc, char *argv[]) {
    if (argc <= 4 || strcmp(name, "Cublas-Tensor-Op") == 0) {
        return true;  // cuBLAS always: the Tester's percentages are of it
    }
    for (int i = 4; i < argc; ++i) {
        if (strcmp(argv[i], name) == 0) {
            return true;
        }
    }
    return false;
}

int main(int argc, char *argv[]) {
    if (argc < 4) {
        fprintf(stderr, "usage: %s M N K [name ...]\n", argv[0]);
        return 2;
    }
    const size_t M = strtoull(argv[1], nullptr, 10);
    const size_t N = strtoull(argv[2], nullptr, 10);
    const size_t K = strtoull(argv[3], nullptr, 10);
    const size_t warmup = env_or("HGEMM_WARMUP", 1);
    const size_t profile = env_or("HGEMM_PROFILE", 10);
    const size_t sleep_ms = env_or("HGEMM_SLEEP_MS", 100);
    const bool check = env_or("HGEMM_CHECK", 0) != 0;

    HGEMM_CHECK_CUDART_ERROR(cudaSetDevice(0));
    cudaDeviceProp dev_prop;
    HGEMM_CHECK_CUDART_ERROR(cudaGetDeviceProperties(&dev_prop, 0));
    int runtime_version = 0;
    HGEMM_CHECK_CUDART_ERROR(cudaRuntimeGetVersion(&runtime_version));
    HLOG("CUDA HGEMM start on %s (sm_%d%d, %d SMs), runtime %d.%d", dev_prop.name, dev_prop.major, dev_prop.minor,
         dev_prop.multiProcessorCount, runtime_version / 1000, (runtime_version % 100) / 10);
    HLOG("A (%zu x %zu) * B (%zu x %zu) = C (%zu x %zu)", M, K, K, N, M, N);
    HLOG("Profiling: warmup iterations: %zu, profiling iterations: %zu, sleep duration: %zu ms, enable check: %d",
         warmup, profile, sleep_ms, check);

    Tester tester(M, N, K, warmup, profile, sleep_ms, check);
    for (const Launcher &launcher : kLaunchers) {
        if (wanted(launcher.name, argc, argv)) {
            tester.evaluate(launcher.func, launcher.name);
        }
    }

    HLOG("Done");
    return 0;
}
