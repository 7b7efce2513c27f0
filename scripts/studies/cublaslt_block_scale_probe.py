"""Study: how cuBLASLt's FP8 block scaling reads its scales on this GPU (docs/BENCHMARKS.md, "FP8 with
block scales"). It prints the header's attribute values and, for each pairing of scale modes (A
1x128 with B 128x128, both 1x128, A 128x128 with B 1x128, both 128x128) at four shapes, the relative
error of cuBLASLt's C against the FP64 product under each way the scales could lie: the one that
matches is how it reads them. It then times block-scaled against per-tensor FP8 at 1024-8192 cubed.

Usage (GPU machine, project root): python3 scripts/studies/cublaslt_block_scale_probe.py
"""
import ctypes
import json
import subprocess

import cupy as cp
import numpy as np

from worker.arguments import half_arrays
from worker.gpu import cublaslt as L

print(subprocess.run("for h in $(find / -name cublasLt.h 2>/dev/null | head -3); do echo $h; grep -n 'SCALE_MODE\\|MATRIX_SCALE_' $h | head -40; done",
                     shell=True, capture_output=True, text=True).stdout, flush=True)
print("cublasLt version", L.version(), flush=True)
A_MODE, B_MODE = 31, 32
VEC128, BLK = 4, 5
lt = L.library()
rng = np.random.default_rng(1)


def e4m3(shape):
    x = cp.asarray(rng.uniform(-1, 1, shape).astype(np.float32) * 256)
    stored = half_arrays.rounded(cp, x, "float8_e4m3")
    return stored, cp.asnumpy(half_arrays.as_float32(cp, stored)).astype(np.float64)


def run(m, n, k, cu_a_mode, cu_b_mode, sa_flat, sb_flat, a, b_nk, out_type=L.CUDA_R_16BF, time_it=0):
    """cuBLAS's A = our B (N x K row-major, K contiguous), transa T; its B = our A (M x K row-major), transb N.
    sa_flat: the scales given for our A (cuBLAS's B), sb_flat for our B (cuBLAS's A)."""
    desc = ctypes.c_void_p()
    L.check(lt.cublasLtMatmulDescCreate(ctypes.byref(desc), L.CUBLAS_COMPUTE_32F, L.CUDA_R_32F), "create")
    s = lt.cublasLtMatmulDescSetAttribute
    L.set_attribute(s, desc, L.DESC_TRANSA, ctypes.c_int32(L.CUBLAS_OP_T))
    L.set_attribute(s, desc, L.DESC_TRANSB, ctypes.c_int32(L.CUBLAS_OP_N))
    if cu_a_mode is not None:
        L.set_attribute(s, desc, A_MODE, ctypes.c_int32(cu_a_mode))
        L.set_attribute(s, desc, B_MODE, ctypes.c_int32(cu_b_mode))
    L.set_attribute(s, desc, L.DESC_A_SCALE_POINTER, ctypes.c_void_p(sb_flat.data.ptr))
    L.set_attribute(s, desc, L.DESC_B_SCALE_POINTER, ctypes.c_void_p(sa_flat.data.ptr))
    ad = L.layout(L.CUDA_R_8F_E4M3, k, n, k)
    bd = L.layout(L.CUDA_R_8F_E4M3, k, m, k)
    cd = L.layout(out_type, n, m, n)
    try:
        cands = L.candidates(desc, ad, bd, cd, 8)
    except L.CublasLtError as e:  # a pairing or shape cuBLASLt does not take (NOT_SUPPORTED, 15)
        return None, str(e), None
    if not cands:
        return None, "no algorithm", None
    out = cp.zeros((m, n), dtype=cp.uint16 if out_type == L.CUDA_R_16BF else cp.float32)
    ws = cp.empty(L.WORKSPACE_BYTES, dtype=cp.uint8)
    alpha, beta = ctypes.c_float(1.0), ctypes.c_float(0.0)
    def call(algo):
        L.check(lt.cublasLtMatmul(L.handle(), desc, ctypes.byref(alpha), ctypes.c_void_p(b_nk.data.ptr), ad,
                                  ctypes.c_void_p(a.data.ptr), bd, ctypes.byref(beta), ctypes.c_void_p(out.data.ptr), cd,
                                  ctypes.c_void_p(out.data.ptr), cd, ctypes.byref(algo), ctypes.c_void_p(ws.data.ptr),
                                  ctypes.c_size_t(L.WORKSPACE_BYTES), ctypes.c_void_p(cp.cuda.get_current_stream().ptr)), "matmul")
    try:
        call(cands[0].algo)
        cp.cuda.Device().synchronize()
    except Exception as e:
        return None, repr(e), None
    result = out if out_type != L.CUDA_R_16BF else half_arrays.as_float32(cp, out)
    timing = None
    if time_it:
        per = []
        for ci, cand in enumerate(cands[:4]):
            for _ in range(3):
                call(cand.algo)
            e0, e1 = cp.cuda.Event(), cp.cuda.Event()
            e0.record()
            for _ in range(time_it):
                call(cand.algo)
            e1.record()
            e1.synchronize()
            ms = cp.cuda.get_elapsed_time(e0, e1) / time_it
            per.append((ci, round(ms, 4), round(2 * m * n * k / ms / 1e9, 1), L.algo_config(cand.algo)))
        timing = per
    return cp.asnumpy(result).astype(np.float64), "ok", timing


def rel(x, ref):
    return float(np.linalg.norm(x - ref) / np.linalg.norm(ref))


def layouts_check(m, n, k):
    kb, nb, mb = -(-k // 128), -(-n // 128), -(-m // 128)
    a, a64 = e4m3((m, k))
    b, b64 = e4m3((n, k))  # N x K, K contiguous
    print(f"\n== {m}x{n}x{k} ==", flush=True)
    for name, cu_a, cu_b, sa_n, sb_n in (("A 1x128 (cuB VEC128), B 128x128 (cuA BLK)", BLK, VEC128, m * kb, nb * kb),
                                          ("A 1x128, B 1x128 (both VEC128)", VEC128, VEC128, m * kb, n * kb),
                                          ("A 128x128 (cuB BLK), B 1x128 (cuA VEC128)", VEC128, BLK, mb * kb, n * kb),
                                          ("both BLK", BLK, BLK, mb * kb, nb * kb)):
        sa = rng.uniform(0.25, 4, sa_n).astype(np.float32)
        sb = rng.uniform(0.25, 4, sb_n).astype(np.float32)
        got, status, _ = run(m, n, k, cu_a, cu_b, cp.asarray(sa), cp.asarray(sb), a, b)
        if got is None:
            print(f"{name}: {status}", flush=True)
            continue
        # hypotheses: each scale's flat buffer as (outer, kb) row-major or (kb, outer) row-major
        a_rows = m if sa_n == m * kb else mb
        b_rows = n if sb_n == n * kb else nb
        a_div = 1 if a_rows == m else 128
        b_div = 1 if b_rows == n else 128
        res = {}
        for la in ("rows_kb", "kb_rows"):
            SA = sa.reshape(a_rows, kb) if la == "rows_kb" else sa.reshape(kb, a_rows).T
            for lb in ("rows_kb", "kb_rows"):
                SB = sb.reshape(b_rows, kb) if lb == "rows_kb" else sb.reshape(kb, b_rows).T
                ref = np.zeros((m, n))
                for j in range(kb):
                    part = a64[:, j*128:(j+1)*128] @ b64[:, j*128:(j+1)*128].T
                    ref += part * SA[np.arange(m) // a_div, j][:, None] * SB[np.arange(n) // b_div, j][None, :]
                res[f"A {la}, B {lb}"] = round(rel(got, ref), 5)
        print(f"{name}: {json.dumps(res)}", flush=True)


for shape in ((256, 384, 512), (384, 256, 640), (200, 384, 512), (256, 384, 520)):
    try:
        layouts_check(*shape)
    except Exception as e:
        print("failed", shape, repr(e), flush=True)

print("\n== speed: block-scaled (A 1x128, B 128x128) vs per-tensor ==", flush=True)
for size in (1024, 2048, 4096, 8192):
    m = n = k = size
    kb = k // 128
    a, _ = e4m3((m, k))
    b, _ = e4m3((n, k))
    sa = cp.asarray(rng.uniform(0.25, 4, m * kb).astype(np.float32))
    sb = cp.asarray(rng.uniform(0.25, 4, (n // 128) * kb).astype(np.float32))
    _, status, timing = run(m, n, k, BLK, VEC128, sa, sb, a, b, time_it=20)
    print(size, "block", status, timing, flush=True)
    one, one2 = cp.ones(1, dtype=cp.float32), cp.ones(1, dtype=cp.float32)  # per-tensor scales of 1
    _, status, timing = run(m, n, k, None, None, one, one2, a, b, time_it=20)
    print(size, "tensor", status, timing, flush=True)
