"""Study (issue 36): gemmwatch's cuBLAS baseline in each new form against torch's matmul of the same
form, over the same memory, timed the same way.

Our side is the product's own call (worker/measure/runner.py Problem.cublas_call -> worker/gpu/cublas_forms.py);
torch's is torch.matmul (torch.bmm for a batch) over the very same arrays, shared through DLPack,
B column-major handed to torch as the transposed view it is. Each sample: the L2 flushed (a 2 x L2
memset), CUDA events around one call; ours and torch's alternate sample by sample, so clocks and
temperature move both. Printed per form: both medians, the median of the paired ratios, and both
Cs' relative errors against the FP32 reference. FP16 accumulate has no torch call (torch always
sums FP16 in FP32); its C's error against the FP32 product is printed per K instead.

Usage on a GPU machine, project root: python3 scripts/studies/cublas_forms_vs_torch.py [SAMPLES]
"""

import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import cupy as cp  # noqa: E402
import torch  # noqa: E402

from core.description.gemm_form import GemmForm  # noqa: E402
from core.description.precision import Precision, fp16_accumulate_tolerance  # noqa: E402
from core.settings import Settings  # noqa: E402
from worker.measure.cases import Case  # noqa: E402
from worker.gpu.cupy_device import CupyDevice  # noqa: E402
from worker.measure.runner import Problem  # noqa: E402
from worker.measure.verify import rel_error  # noqa: E402

SAMPLES = int(sys.argv[1]) if len(sys.argv) > 1 else 60
TORCH_DTYPE = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
TN = GemmForm("row", "column", "row")
CASES = [  # (label, compute mode, form, m, n, k, batch)
    ("TN fp32", "fp32", TN, 4096, 4096, 4096, 1),
    ("TN tf32", "tf32", TN, 4096, 4096, 4096, 1),
    ("TN fp16", "fp16", TN, 4096, 4096, 4096, 1),
    ("TN bf16", "bf16", TN, 4096, 4096, 4096, 1),
    ("NN col-major bf16", "bf16", GemmForm("column", "column", "column"), 4096, 4096, 4096, 1),
    ("batch NN fp32", "fp32", GemmForm(), 1024, 1024, 1024, 32),
    ("batch NN fp16", "fp16", GemmForm(), 1024, 1024, 1024, 32),
    ("batch NN bf16", "bf16", GemmForm(), 1024, 1024, 1024, 32),
    ("batch TN bf16", "bf16", TN, 1024, 1024, 1024, 32),
    ("batch TN fp16", "fp16", TN, 1024, 1024, 1024, 32),
]


def as_torch(x, dtype: str):
    t = torch.from_dlpack(x)
    return t.view(torch.bfloat16) if dtype == "bfloat16" else t


def torch_call(problem: Problem, out):
    p = problem.precision
    a, b = as_torch(problem.a_in, p.input_type), as_torch(problem.b_in, p.input_type)
    c = as_torch(out, p.output_type)
    if problem.batch > 1:
        return lambda: torch.bmm(a, b, out=c)
    return lambda: torch.matmul(a, b, out=c)


def timed(dev, calls, samples):
    flush = cp.empty(2 * dev.device.attributes["L2CacheSize"] // 4, dtype=cp.float32)
    times = [[] for _ in calls]
    for call in calls:  # warm up: each call's plan and workspace made before the first sample
        for _ in range(3):
            call()
    cp.cuda.Device().synchronize()
    for _ in range(samples):
        for i, call in enumerate(calls):
            flush.fill(0)
            start, end = cp.cuda.Event(), cp.cuda.Event()
            start.record()
            call()
            end.record()
            end.synchronize()
            times[i].append(cp.cuda.get_elapsed_time(start, end))
    return times


def main():
    dev = CupyDevice(Settings())
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, CuPy {cp.__version__}, {SAMPLES} cold samples each")
    print("| form | size | gemmwatch ms | torch ms | gemmwatch/torch time (median of pairs) | rel err ours | rel err torch |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
    for label, mode, form, m, n, k, batch in CASES:
        torch.backends.cuda.matmul.allow_tf32 = mode == "tf32"
        precision = Precision(mode)
        problem = Problem(dev, Case(0, label, m, n, k, 7, None, batch=batch), form, precision)
        ours_c, torch_c = problem.new_c(), problem.new_c()
        ours, theirs = problem.cublas_call(ours_c), torch_call(problem, torch_c)
        ref = dev.reference(problem.a, problem.b)
        ours(), theirs()
        cp.cuda.Device().synchronize()
        errors = [rel_error(cp, problem.read(c), ref) for c in (ours_c, torch_c)]
        t_ours, t_torch = timed(dev, [ours, theirs], SAMPLES)
        ratio = statistics.median(o / t for o, t in zip(t_ours, t_torch))
        size = f"{batch} x {m}x{n}x{k}" if batch > 1 else f"{m}x{n}x{k}"
        print(f"| {label} | {size} | {statistics.median(t_ours):.4f} | {statistics.median(t_torch):.4f} | "
              f"{ratio:.4f} | {errors[0]:.2e} | {errors[1]:.2e} |", flush=True)
    torch.backends.cuda.matmul.allow_tf32 = False
    print("\nFP16 accumulate (CUBLAS_COMPUTE_16F), TN: no torch call; C against the FP32 product")
    print("| size | ms (median) | TFLOPS | rel err | bound (core/description/precision.py) |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for k in (256, 1024, 4096, 8192):
        m = n = 4096
        problem = Problem(dev, Case(0, "acc16", m, n, k, 7, None), GemmForm("row", "column", "row", "ab_only", "fp16"),
                          Precision("fp16", accumulate="fp16"))
        c = problem.new_c()
        call = problem.cublas_call(c)
        call()
        cp.cuda.Device().synchronize()
        err = rel_error(cp, problem.read(c), dev.reference(problem.a, problem.b))
        (t,) = timed(dev, [call], SAMPLES)
        ms = statistics.median(t)
        print(f"| {m}x{n}x{k} | {ms:.4f} | {2 * m * n * k / ms / 1e9:.1f} | {err:.2e} | {fp16_accumulate_tolerance(k):.2e} |",
              flush=True)


if __name__ == "__main__":
    main()
