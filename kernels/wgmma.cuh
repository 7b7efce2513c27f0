// Shared device code of the Hopper wgmma kernels (sm_90a: tf32_wgmma, half_wgmma): mbarrier
// rings, the shared-memory descriptor of a K-major operand in the 128-byte swizzle, and
// wgmma.mma_async with FP32 accumulators and A from registers, for TF32 (k8), BF16 and FP16 (k16)
// at N = 128 and 256 (chosen by the accumulator array's size: 64 or 128 floats per thread); and
// for BF16 and FP16 with both operands in shared memory, B N-major (half_wgmma_ss); and for FP8
// (E4M3) and TF32 with both operands K-major in shared memory (fp8_wgmma, wgmma_tn).
// The rules of common.cuh hold, with one exception: the operand lists of the wgmma instructions
// are spelt once each by GW_-prefixed macros, #undef'd at the end of this header, so no kernel
// and no -D option meets them.
#pragma once

__device__ __forceinline__ void mbar_init(unsigned bar, unsigned count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_wait(unsigned bar, unsigned parity) {
    unsigned done = 0;
    while (!done) {
        asm volatile(
            "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
            : "=r"(done) : "r"(bar), "r"(parity) : "memory");
    }
}
__device__ __forceinline__ void mbar_arrive(unsigned bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
// Arrives on bar once every cp.async this thread issued before has landed (the count was set at init).
__device__ __forceinline__ void mbar_arrive_on_copies(unsigned bar) {
    asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(bar) : "memory");
}

// A producer thread's arrival once its pieces of a slab are in: where every piece went by cp.async
// (all_async), cp.async arrives for it as they land; otherwise some were stored synchronously, so it
// waits for its copies, makes its stores visible to the async proxy (wgmma reads through it) and
// arrives itself (an arrive is a release).
__device__ __forceinline__ void mbar_arrive_when_copied(unsigned bar, bool all_async) {
    if (all_async) {
        mbar_arrive_on_copies(bar);
    } else {
        asm volatile("cp.async.wait_all;\n" ::: "memory");
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
        mbar_arrive(bar);
    }
}

// Arrives on bar and tells it `bytes` more will land this phase by TMA copies (complete_tx).
__device__ __forceinline__ void mbar_arrive_expect_tx(unsigned bar, unsigned bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}

// A ring's barriers, set up by one thread before the block's first barrier: full[s] at bars + 8 s
// (full_count arrivals a phase), empty[s] at bars + 8 (stages + s) (one arrival from each of the
// two consumer warpgroups' 8 warps), then made visible to the async proxy and the cluster.
__device__ __forceinline__ void mbar_init_ring(unsigned bars, int stages, unsigned full_count) {
    for (int s = 0; s < stages; ++s) {
        mbar_init(bars + 8u * s, full_count);
        mbar_init(bars + 8u * (stages + s), 8);
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

// Every thread of every block of the cluster arrives, then waits for all of them (sm_90).
__device__ __forceinline__ void cluster_sync() {
    asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}

// TMA (sm_90): the kernels take each tensor map by value (`const __grid_constant__ TmaMap`: a
// CUtensorMap's 128 bytes in the kernel's parameters, as cuBLAS and CUTLASS pass them), so the first
// copy finds it in the launch's constant bank. By address it was a global read the first copy waited
// for, from DRAM where L2 had been flushed: 0.9 us of bf16_wgmma_persistent's 27 at 2048^3. Where the
// TMA cannot describe a matrix the runner passes 128 zero bytes (the descriptions'
// zeros_when_absent), and the kernel copies that operand another way.
struct alignas(64) TmaMap {
    unsigned long long word[16];
};
// The map's generic address for the TMA instructions, or nullptr where it is all zeros ("no map").
__device__ __forceinline__ const void* map_or_null(const TmaMap& map) {
    unsigned long long any = 0;
#pragma unroll
    for (int i = 0; i < 16; ++i) any |= map.word[i];
    return any ? &map : nullptr;
}
// The box at (c0 along the contiguous dimension, c1 lines) of the map's matrix into shared memory
// at dst, in the map's swizzle, out-of-bounds elements as zeros; its bytes complete_tx on bar.
__device__ __forceinline__ void tma_load_2d(unsigned dst, const void* map, int c0, int c1, unsigned bar) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n"
                 ::"r"(dst), "l"(map), "r"(c0), "r"(c1), "r"(bar) : "memory");
}

// wgmma shared-memory descriptor of a K-major operand in the 128-byte swizzle: start address,
// leading offset unused (1), stride 1024 bytes between groups of 8 rows, layout type 1 (128B).
__device__ __forceinline__ unsigned long long k_major_sw128_desc(unsigned addr) {
    return (unsigned long long)((addr & 0x3FFFF) >> 4) | (1ull << 16) | (64ull << 32) | (1ull << 62);
}

// The same for an MN-major operand (B stored k-row by k-row, N contiguous): each k-row of a block of
// 64 16-bit elements of N is one 128-byte swizzle row, 8 k-rows make a 1024-byte atom (the stride
// between groups of 8 k), and the blocks of 64 N lie block_bytes apart (the leading offset).
__device__ __forceinline__ unsigned long long mn_major_sw128_desc(unsigned addr, unsigned block_bytes) {
    return (unsigned long long)((addr & 0x3FFFF) >> 4) | ((unsigned long long)(block_bytes >> 4) << 16) |
           (64ull << 32) | (1ull << 62);
}

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}

// Pins the accumulators in place around wgmma and its waits: the compiler must not move their
// reads or writes across the asynchronous instructions.
template <int N>
__device__ __forceinline__ void fence_operands(float (&d)[N]) {
#pragma unroll
    for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

#define GW_D32 "{" "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31" "}"
#define GW_D32_OUT "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
#define GW_D44 "{" "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43" "}"
#define GW_D44_OUT "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43])
#define GW_D48 "{" "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47" "}"
#define GW_D48_OUT "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47])
#define GW_D64 "{" "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63" "}"
#define GW_D64_OUT "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
#define GW_D88 "{" "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87" "}"
#define GW_D88_OUT "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87])
#define GW_D96 "{" "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95" "}"
#define GW_D96_OUT "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95])
#define GW_D128 "{" "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127" "}"
#define GW_D128_OUT "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])

// d += a (64 x k, registers: 4 x 32 bits per thread) * B (k x N, shared memory through desc_b);
// N = 2 x the floats of d per thread. TF32: k = 8; BF16 and FP16: k = 16, B K-major (trans-b 0).
// TF32 with accumulate 0: d = a * B, d's old values ignored.
__device__ __forceinline__ void wgmma_tf32(float (&d)[64], const unsigned (&a)[4], unsigned long long desc_b,
                                           int accumulate = 1) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32 " GW_D64
                 ", {%64, %65, %66, %67}, %68, p, 1, 1;\n}\n"
                 : GW_D64_OUT
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(accumulate));
}
__device__ __forceinline__ void wgmma_tf32(float (&d)[128], const unsigned (&a)[4], unsigned long long desc_b,
                                           int accumulate = 1) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %133, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n256k8.f32.tf32.tf32 " GW_D128
                 ", {%128, %129, %130, %131}, %132, p, 1, 1;\n}\n"
                 : GW_D128_OUT
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(accumulate));
}
__device__ __forceinline__ void wgmma_bf16(float (&d)[64], const unsigned (&a)[4], unsigned long long desc_b) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " GW_D64
                 ", {%64, %65, %66, %67}, %68, p, 1, 1, 0;\n}\n"
                 : GW_D64_OUT
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(1));
}
__device__ __forceinline__ void wgmma_bf16(float (&d)[128], const unsigned (&a)[4], unsigned long long desc_b) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %133, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 " GW_D128
                 ", {%128, %129, %130, %131}, %132, p, 1, 1, 0;\n}\n"
                 : GW_D128_OUT
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(1));
}
__device__ __forceinline__ void wgmma_f16(float (&d)[64], const unsigned (&a)[4], unsigned long long desc_b) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 " GW_D64
                 ", {%64, %65, %66, %67}, %68, p, 1, 1, 0;\n}\n"
                 : GW_D64_OUT
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(1));
}
__device__ __forceinline__ void wgmma_f16(float (&d)[128], const unsigned (&a)[4], unsigned long long desc_b) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %133, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 " GW_D128
                 ", {%128, %129, %130, %131}, %132, p, 1, 1, 0;\n}\n"
                 : GW_D128_OUT
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(1));
}

// d += A (64 x 16, K-major, shared memory through desc_a) * B (16 x N, N-major, shared memory
// through desc_b: wgmma's transposed B, for 16-bit types only), both operands read by the tensor
// cores from shared memory, none from registers. One overload per tile width, told apart by the
// accumulators a thread holds (N / 2): N = 256 (128), a 256-column tile's B slab in four 64-column
// blocks; N = 128 (64), two blocks; N = 64 (32), one. GW_SS_NB spells the six once; A, B and P are
// the operand numbers of desc_a, desc_b and the scale-d predicate after the NACC accumulators.
#define GW_SS_NB(NAME, NACC, N, TYPE, A, B, P)                                                               \
    __device__ __forceinline__ void NAME(float (&d)[NACC], unsigned long long desc_a, unsigned long long desc_b) { \
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" #P ", 0;\n"                                          \
                     "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." #TYPE "." #TYPE " " GW_D##NACC           \
                     ", %" #A ", %" #B ", p, 1, 1, 0, 1;\n}\n"                                                  \
                     : GW_D##NACC##_OUT                                                                         \
                     : "l"(desc_a), "l"(desc_b), "r"(1));                                                       \
    }
GW_SS_NB(wgmma_ss_bf16_nb, 128, 256, bf16, 128, 129, 130)
GW_SS_NB(wgmma_ss_f16_nb, 128, 256, f16, 128, 129, 130)
GW_SS_NB(wgmma_ss_bf16_nb, 64, 128, bf16, 64, 65, 66)
GW_SS_NB(wgmma_ss_f16_nb, 64, 128, f16, 64, 65, 66)
GW_SS_NB(wgmma_ss_bf16_nb, 32, 64, bf16, 32, 33, 34)
GW_SS_NB(wgmma_ss_f16_nb, 32, 64, f16, 32, 33, 34)

// FP8: d (+)= A (64 x 32 e4m3, K-major) * B (32 x N e4m3, K-major: wgmma has no transposed form
// for 8-bit types), both from shared memory; `accumulate` 0 starts d from zero (scale-d 0). One
// overload per tile width, told apart by the accumulators a thread holds (N / 2): N = 128 (64, the
// 128 x 128 tiles of fp8_wgmma_tn), N = 192 (96, fp8_wgmma_tn_192), N = 176 (88, fp8_wgmma_tn_176) and
// N = 64 (32, fp8_wgmma_tn_64). A, B and P as in GW_SS_NB.
#define GW_SS_E4M3(NACC, N, A, B, P)                                                                            \
    __device__ __forceinline__ void wgmma_ss_e4m3(float (&d)[NACC], unsigned long long desc_a,                   \
                                                  unsigned long long desc_b, int accumulate) {                  \
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" #P ", 0;\n"                                         \
                     "wgmma.mma_async.sync.aligned.m64n" #N "k32.f32.e4m3.e4m3 " GW_D##NACC                     \
                     ", %" #A ", %" #B ", p, 1, 1;\n}\n"                                                       \
                     : GW_D##NACC##_OUT                                                                         \
                     : "l"(desc_a), "l"(desc_b), "r"(accumulate));                                              \
    }
GW_SS_E4M3(64, 128, 64, 65, 66)
GW_SS_E4M3(96, 192, 96, 97, 98)
GW_SS_E4M3(88, 176, 88, 89, 90)
GW_SS_E4M3(32, 64, 32, 33, 34)
// Half a tile's width, for SPLIT_N (wgmma_tn.cu): N = 96 (48) of 192 and N = 88 (44) of 176.
GW_SS_E4M3(48, 96, 48, 49, 50)
GW_SS_E4M3(44, 88, 44, 45, 46)

// TF32 with both operands K-major in shared memory (wgmma_tn): d (+)= A (64 x 8) * B (8 x 256);
// `accumulate` 0 starts d from zero.
__device__ __forceinline__ void wgmma_ss_tf32(float (&d)[128], unsigned long long desc_a, unsigned long long desc_b,
                                              int accumulate) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n256k8.f32.tf32.tf32 " GW_D128 ", %128, %129, p, 1, 1;\n}\n"
                 : GW_D128_OUT
                 : "l"(desc_a), "l"(desc_b), "r"(accumulate));
}

#undef GW_SS_NB
#undef GW_SS_E4M3
#undef GW_D32
#undef GW_D32_OUT
#undef GW_D64
#undef GW_D64_OUT
#undef GW_D44
#undef GW_D44_OUT
#undef GW_D48
#undef GW_D48_OUT
#undef GW_D88
#undef GW_D88_OUT
#undef GW_D96
#undef GW_D96_OUT
#undef GW_D128
#undef GW_D128_OUT
