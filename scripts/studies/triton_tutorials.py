"""Triton's own tutorial kernels, files unchanged, timed by gemmwatch and by `triton.testing.do_bench`
in a separate process on the same GPU (issue 50's must-show 1, docs/BENCHMARKS.md).

gemmwatch side: the tutorial file and a description (below) go through the runner as a job's kernel
would: read for its definitions in the confined compile process, its @triton.autotune run once per
bucket outside the timing, verified against cuBLAS, timed in the mode asked. do_bench side: a
process of its own loads the same file's definitions (worker/compile/triton_module.py: its script is not
run) and times the same @triton.jit function with the configuration gemmwatch chose, launched by
Triton as the tutorial's wrapper launches it, with do_bench's defaults (its L2 flush before each
call, the median of its samples).

The two take turns, case by case: gemmwatch (whose first turn chooses the configuration), then
do_bench, --rounds times (G D G D for two). Until the eighteenth session every gemmwatch case ran first and do_bench
after them all, minutes later, on a card that had been at its power cap since: a clock that drifts
with the card's temperature then reads as a difference between the tools. The do_bench process
stays up between its turns (kernels compiled once) and answers one case per line on its stdin.

Usage (GPU machine, project root):
  python3 scripts/studies/triton_tutorials.py TUTORIALS_DIR OUT [--sizes 1024,2048,4096,8192] [--modes sustained,cold]
      [--pin] [--rounds 2] [--kernels tutorial_matmul_fp16,descriptor_persistent_fp16,...]
TUTORIALS_DIR holds 03-matrix-multiplication.py and 09-persistent-matmul.py as Triton ships them.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

TN = {"A": "row", "B": "col", "C": "row"}
# What the tutorials' own benchmarks multiply (torch.randn), and so what do_bench's side multiplies below:
# the manifest says it too ("inputs"), as a home runner's data is part of its number.
INPUTS = "normal(0,1)"
DO_BENCH_RUNS = 5  # three until the seventeenth session
# The @triton.autotune configuration each case chose on the H200 (eleventh session), for --pin: each
# case then compiles the one it ran, instead of tuning again on a fresh machine.
CHOSEN = {("tutorial_matmul_fp16", 1024): 13, ("tutorial_matmul_fp16", 2048): 0, ("tutorial_matmul_fp16", 4096): 0,
          ("tutorial_matmul_fp16", 8192): 0, ("persistent_matmul_fp16", 1024): 2, ("persistent_matmul_fp16", 2048): 9,
          ("persistent_matmul_fp16", 4096): 11, ("persistent_matmul_fp16", 8192): 11,
          ("persistent_matmul_fp8", 1024): 7, ("persistent_matmul_fp8", 2048): 15, ("persistent_matmul_fp8", 4096): 13,
          ("persistent_matmul_fp8", 8192): 13}
KERNELS = {
    "tutorial_matmul_fp16": {
        "file": "03-matrix-multiplication.py", "entry": "matmul_kernel", "compute_mode": "fp16",
        "args": ["A", "B", "C", "M", "N", "K", "lda", "=1", "ldb", "=1", "ldc", "=1"],
        # ACTIVATION as the tutorial's matmul(a, b) passes it: the word "" (no epilogue); until the
        # sixteenth session the integer 0, which compiles the same branch away.
        "defines": {}, "words": {"ACTIVATION": ""}, "grid": {"x": "cdiv(M, BLOCK_SIZE_M) * cdiv(N, BLOCK_SIZE_N)"}},
    "persistent_matmul_fp16": {
        "file": "09-persistent-matmul.py", "entry": "matmul_kernel_persistent", "compute_mode": "fp16", "layout": TN,
        "args": ["A", "B", "C", "M", "N", "K", "lda", "=1", "=1", "ldb", "ldc", "=1"],
        "defines": {"NUM_SMS": "SM_COUNT"},
        "grid": {"x": "min(SM_COUNT, cdiv(M, BLOCK_SIZE_M) * cdiv(N, BLOCK_SIZE_N))"}},
    "persistent_matmul_fp8": {
        "file": "09-persistent-matmul.py", "entry": "matmul_kernel_persistent", "compute_mode": "fp8", "layout": TN,
        "args": ["A", "B", "C", "M", "N", "K", "lda", "=1", "=1", "ldb", "ldc", "=1"],
        "defines": {"NUM_SMS": "SM_COUNT"},
        "grid": {"x": "min(SM_COUNT, cdiv(M, BLOCK_SIZE_M) * cdiv(N, BLOCK_SIZE_N))"}},
}
# Not yet measured, so not in docs/examples/triton-lang-triton.gemmwatch.json (which holds KERNELS):
# 09's kernel that makes its TMA descriptors on the device, given Triton's global scratch by the runner
# since the seventeenth session (worker/arguments/kernel_args.Scratch). Run by naming them in --kernels.
# The 09 of 9e46d61 spells the descriptor call tl._experimental_make_tensor_descriptor, which Triton 3.6
# no longer has: on 3.6 these need the tutorial as 3.6 ships it (tl.make_tensor_descriptor).
NOT_YET_MEASURED = {
    "descriptor_persistent_fp16": {
        "file": "09-persistent-matmul.py", "entry": "matmul_kernel_descriptor_persistent", "compute_mode": "fp16",
        "layout": TN, "args": ["A", "B", "C", "M", "N", "K"], "defines": {"NUM_SMS": "SM_COUNT"},
        "grid": {"x": "min(SM_COUNT, cdiv(M, BLOCK_SIZE_M) * cdiv(N, BLOCK_SIZE_N))"}},
    "descriptor_persistent_fp8": {
        "file": "09-persistent-matmul.py", "entry": "matmul_kernel_descriptor_persistent", "compute_mode": "fp8",
        "layout": TN, "args": ["A", "B", "C", "M", "N", "K"], "defines": {"NUM_SMS": "SM_COUNT"},
        "grid": {"x": "min(SM_COUNT, cdiv(M, BLOCK_SIZE_M) * cdiv(N, BLOCK_SIZE_N))"}},
}
EVERY_KERNEL = {**KERNELS, **NOT_YET_MEASURED}


def description(name: str, spec: dict, folder: Path, config: int | None = None) -> dict:
    text = (folder / spec["file"]).read_text()
    described = {"name": name, "language": "triton", "source": spec["file"], "files": {spec["file"]: text},
                 "entry": spec["entry"], "compute_mode": spec["compute_mode"], "args": spec["args"],
                 "defines": spec["defines"], "grid": spec["grid"], "inputs": INPUTS}
    if "layout" in spec:
        described["layout"] = spec["layout"]
    options = {**({"string_constexprs": spec["words"]} if spec.get("words") else {}),
               **({"config": config} if config is not None else {})}
    if options:
        described["triton"] = options
    return described


class DoBenchProcess:
    """The do_bench side in a process of its own, kept up between turns: one case a line each way."""

    def __init__(self, folder: Path) -> None:
        self.process = subprocess.Popen([sys.executable, __file__, str(folder), "-", "--do-bench-server"],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def time(self, row: dict) -> dict:
        assert self.process.stdin and self.process.stdout
        self.process.stdin.write(json.dumps(row) + "\n")
        self.process.stdin.flush()
        answer = self.process.stdout.readline()
        if not answer:
            raise RuntimeError(f"the do_bench process ended (exit {self.process.wait()})")
        return json.loads(answer)

    def close(self) -> None:
        if self.process.stdin:
            self.process.stdin.close()
        self.process.wait(timeout=60)


def interleaved(folder: Path, sizes: list[int], modes: list[str], rounds: int, pin: bool = False,
                names: list[str] | None = None, neighbour: bool = False) -> list[dict]:
    """Each case: (gemmwatch, do_bench) `rounds` times; one row a case with every turn's figure."""
    from core.settings import Settings
    from worker.measure.cases import TimingPolicy
    from worker.measure.runner import CupyRunner

    runner = CupyRunner()
    do_bench = DoBenchProcess(folder)
    rows = []
    try:
        for mode in modes:
            policy = TimingPolicy.from_settings(Settings(GEMMWATCH_TIMING_MODE=mode))
            for name, spec in (EVERY_KERNEL if names else KERNELS).items():
                if names and name not in names:
                    continue
                for n in sizes:
                    row = _case(runner, policy, do_bench, name, spec, folder, n, mode, rounds,
                                CHOSEN.get((name, n)) if pin else None, neighbour)
                    rows.append(row)
                    print(json.dumps({k: v for k, v in row.items() if k != "triton"})[:500], flush=True)
                    if row.get("fault"):  # the context is gone: this kernel's other sizes would fail alike
                        break
    finally:
        do_bench.close()
    return rows


def _case(runner, policy, do_bench: DoBenchProcess, name: str, spec: dict, folder: Path, n: int, mode: str,
          rounds: int, config: int | None, neighbour: bool = False) -> dict:
    from core.description.kernel_description import KernelDescription
    from worker.measure.cases import Case, KernelChoice

    row: dict = {"kernel": name, "n": n, "mode": mode, "gpu": runner.gpu_name(), "gemmwatch_gflops": [],
                 "do_bench_runs_ms": [], "neighbour": neighbour, "alone_ms": [], "with_cublas_ms": []}
    for _ in range(rounds):
        choice = KernelChoice(KernelDescription.model_validate(description(name, spec, folder, config)), {}, "job")
        try:
            out = runner.run_case(Case(0, name, n, n, n, 7, choice), policy)
        except Exception as exc:  # said in the table
            return {**row, "verified": False, "fault": True, "error": f"{type(exc).__name__}: {str(exc)[:300]}"}
        if not (out.verified and out.gflops):
            return {**row, "verified": out.verified, "error": out.error}
        row.update(verified=True, error=out.error, pct_of_cublas=out.pct_of_cublas, triton=out.env.get("triton"))
        row["gemmwatch_gflops"].append(out.gflops)
        # What the timing set aside or kept under a throttle, and its flush: where two tools part, these say why.
        row.setdefault("turns", []).append({k: out.env.get(k) for k in (
            "throttled_samples_discarded", "throttled_samples_kept", "throttle_reasons_seen", "l2_flush", "sustained")})
        config = out.env["triton"]["config"]["index"]  # the later turns run what the first one chose
        theirs = do_bench.time(row)
        row["do_bench_runs_ms"] += theirs["runs_ms"]
        if neighbour:  # the configuration this turn ran, pinned, so calls() builds that one
            pinned = KernelChoice(KernelDescription.model_validate(description(name, spec, folder, config)), {}, "job")
            try:
                for flush, runs in gemmwatch_launch_in_do_bench_loop(runner, Case(0, name, n, n, n, 7, pinned)).items():
                    row.setdefault(f"gemmwatch_launch_loop_ms{flush}", []).extend(runs)
            except Exception as exc:  # said in the row; the comparison above stands without it
                row["gemmwatch_launch_loop_error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
        row["do_bench_binary"] = theirs.get("binary")
        row["gemmwatch_resources"] = out.env.get("resources")
        row["alone_ms"] += theirs.get("alone_ms", [])
        row["with_cublas_ms"] += theirs.get("with_cublas_ms", [])
    return row


class DoBenchSide:
    """In the separate process: each case's kernel and configuration, timed by do_bench."""

    def __init__(self, folder: Path) -> None:
        import torch
        import triton

        self.folder, self.torch, self.triton = folder, torch, triton
        self.loaded: dict = {}
        self.cache = None  # do_bench's flush buffer for the study's own loops, made on their first use
        # A kernel that makes its descriptors on the device takes its global scratch from Triton's
        # allocator, as the tutorial's own wrapper sets it.
        triton.set_allocator(lambda size, align, stream: torch.empty(size, device="cuda", dtype=torch.int8))

    def time(self, row: dict) -> dict:
        torch, triton = self.torch, self.triton
        from triton.backends.compiler import GPUTarget

        from worker.compile import triton_module

        spec = EVERY_KERNEL[row["kernel"]]
        if spec["file"] not in self.loaded:
            triton_module.use_target(triton, GPUTarget("cuda", 90, 32))  # the file's script finds no GPU
            self.loaded[spec["file"]] = triton_module.load(str(self.folder / spec["file"]),
                                                           spec["file"].replace("-", "_")[:-3])
            triton.runtime.driver.reset_active()
        module, _ = self.loaded[spec["file"]]
        kernel, _ = triton_module.kernel_and_configs(triton, getattr(module, spec["entry"]))
        config = row["triton"]["config"]
        n = row["n"]
        fp8 = spec["compute_mode"] == "fp8"
        a = torch.randn((n, n), device="cuda", dtype=torch.float16)
        b = torch.randn((n, n), device="cuda", dtype=torch.float16)
        if fp8:
            a, b = a.to(torch.float8_e4m3fn), b.to(torch.float8_e4m3fn)
        if spec.get("layout") == TN:
            b = b.T.contiguous().T  # K x N, column-major: strides (1, K), as the tutorial's b.T
        c = torch.empty((n, n), device="cuda", dtype=torch.bfloat16 if fp8 else torch.float16)
        constants = {**{k: v for k, v in spec["defines"].items() if k != "NUM_SMS"}, **spec.get("words", {}),
                     **config["kwargs"]}
        if "NUM_SMS" in spec["defines"]:
            constants["NUM_SMS"] = torch.cuda.get_device_properties("cuda").multi_processor_count
        tiles = triton.cdiv(n, constants["BLOCK_SIZE_M"]) * triton.cdiv(n, constants["BLOCK_SIZE_N"])
        grid = (min(constants["NUM_SMS"], tiles),) if "NUM_SMS" in constants else (tiles,)
        strides = () if spec["args"] == ["A", "B", "C", "M", "N", "K"] else (
            a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1))

        def call():
            kernel[grid](a, b, c, n, n, n, *strides, num_warps=config["num_warps"], num_stages=config["num_stages"],
                         **constants)

        call()
        # do_bench's own spread at one size is several per cent at the power cap and at 1024^3 (a
        # 10 us kernel behind its 256 MiB flush): DO_BENCH_RUNS runs a turn, all kept.
        got = {"runs_ms": [triton.testing.do_bench(call, return_mode="median") for _ in range(DO_BENCH_RUNS)],
               "binary": _binary(kernel, torch.cuda.current_device())}
        if row.get("neighbour"):
            # Does a cuBLAS call between samples (as gemmwatch pairs each sample with cuBLAS's) move the
            # kernel's clock at the power cap? The same loop, without and with one, turn by turn.
            x = torch.randn((n, n), device="cuda", dtype=torch.float16)
            y = torch.randn((n, n), device="cuda", dtype=torch.float16)
            alone, paired = [], []
            for _ in range(DO_BENCH_RUNS):
                alone.append(self._loop(call, None))
                paired.append(self._loop(call, lambda: torch.matmul(x, y)))
            got.update(alone_ms=alone, with_cublas_ms=paired)
        return got

    def _loop(self, call, neighbour) -> float:
        torch, triton = self.torch, self.triton
        driver = triton.runtime.driver.active
        if self.cache is None:
            self.cache = driver.get_empty_cache_for_benchmark()
        cache = self.cache
        return bench_loop(call, lambda: driver.clear_cache(cache), lambda: torch.cuda.Event(enable_timing=True),
                          lambda start, end: start.elapsed_time(end), torch.cuda.synchronize, neighbour)

    def serve(self) -> None:
        # The answers go to the parent on a copy of stdout; whatever else Triton, torch or a tutorial's
        # definitions print (to Python's stdout or to fd 1 from C) goes to stderr instead of into them.
        answers = os.fdopen(os.dup(1), "w")
        os.dup2(2, 1)
        sys.stdout = sys.stderr
        for line in sys.stdin:
            answers.write(json.dumps(self.time(json.loads(line))) + "\n")
            answers.flush()


def bench_loop(call, flush, new_event, elapsed_ms, synchronize, neighbour=None, rep_ms: float = 100.0) -> float:
    """do_bench's loop over `call` (a flush before each timed call, events around the call, about
    rep_ms of calls after a quarter of that of warm-up, the median), with `neighbour` run after each
    timed call behind a flush of its own, outside the events. The same loop in either process: with
    torch's events and Triton's 256 MiB cache in do_bench's, CuPy's in gemmwatch's."""

    def once(start=None, end=None):
        flush()
        if start is not None:
            start.record()
        call()
        if end is not None:
            end.record()
        if neighbour is not None:
            flush()
            neighbour()

    began, ended = new_event(), new_event()
    began.record()
    for _ in range(5):
        once()
    ended.record()
    synchronize()
    count = max(1, int(rep_ms / (elapsed_ms(began, ended) / 5)))
    for _ in range(max(1, count // 4)):
        once()
    events = [(new_event(), new_event()) for _ in range(count)]
    for start, end in events:
        once(start, end)
    synchronize()
    return statistics.median([elapsed_ms(start, end) for start, end in events])


def gemmwatch_launch_in_do_bench_loop(runner, case) -> dict[str, list[float]]:
    """The kernel as gemmwatch builds and launches it (runner.calls: its cubin, its buffers, CuPy's
    launch), timed by do_bench's loop in gemmwatch's process: if this reads as do_bench does, the
    tools part in how they sample; if as gemmwatch does, in what they launch. Three flushes before
    each call: do_bench's (256 MiB zeroed, key ""), zeros over twice the L2 ("_zero_2xl2", gemmwatch's
    memset flush) and gemmwatch's default (its kernel reading and writing twice the L2,
    "_readwrite_2xl2"): where the loop with do_bench's flush reads as do_bench and the others as
    gemmwatch, the flush's size is what parts them."""
    import cupy as cp

    run_variant, _ = runner.calls(case)
    cache = cp.empty(256 * 1024 * 1024 // 4, dtype=cp.int32)  # do_bench's flush: 256 MiB zeroed
    l2 = cp.cuda.Device().attributes["L2CacheSize"]
    small = cp.empty(2 * l2 // 4, dtype=cp.int32)
    flushes = {"": lambda: cache.fill(0), "_zero_2xl2": lambda: small.fill(0),
               "_readwrite_2xl2": runner.device._flusher("readwrite")}
    return {key: [bench_loop(run_variant, flush, lambda: cp.cuda.Event(), cp.cuda.get_elapsed_time,
                             cp.cuda.Device().synchronize) for _ in range(DO_BENCH_RUNS)]
            for key, flush in flushes.items()}


def _binary(kernel, device: int) -> dict:
    """What Triton compiled for do_bench's launches: registers, spills, shared memory and the cubin's
    digest, beside the resources gemmwatch read of its own build (is it the same kernel?)."""
    import hashlib

    try:
        compiled = list(kernel.device_caches[device][0].values())
        return {"n": len(compiled), **{f"#{i}": {"registers": c.n_regs, "spills": c.n_spills,
                                                 "shared": c.metadata.shared,
                                                 "cubin_sha256": hashlib.sha256(c.asm["cubin"]).hexdigest()[:16]}
                                       for i, c in enumerate(compiled)}}
    except Exception as exc:  # Triton's internals move between releases: said, not fatal
        return {"error": f"{type(exc).__name__}: {exc}"}


def table(rows: list[dict]) -> str:
    lines = ["| kernel | n | mode | config | gemmwatch TFLOPS (median of its turns; each) | do_bench TFLOPS (median of "
             "its runs; range) | ratio | % of cuBLAS |", "| --- | ---: | --- | --- | ---: | ---: | ---: | ---: |"]
    for r in rows:
        if not r["gemmwatch_gflops"] or not r["do_bench_runs_ms"]:
            lines.append(f"| {r['kernel']} | {r['n']} | {r['mode']} | not timed: {r.get('error')} | | | | |")
            continue
        flop = 2 * r["n"] ** 3
        ours = statistics.median(r["gemmwatch_gflops"])
        theirs = flop / (statistics.median(r["do_bench_runs_ms"]) * 1e-3) / 1e9
        cfg = r["triton"]["config"]
        each = ", ".join(f"{g / 1e3:.1f}" for g in r["gemmwatch_gflops"])
        lines.append(f"| {r['kernel']} | {r['n']} | {r['mode']} | #{cfg['index']} {cfg['kwargs']} w{cfg['num_warps']} "
                     f"s{cfg['num_stages']} | {ours / 1e3:.1f} ({each}) | {theirs / 1e3:.1f} "
                     f"({flop / max(r['do_bench_runs_ms']) / 1e9:.0f}–{flop / min(r['do_bench_runs_ms']) / 1e9:.0f}) | "
                     f"{ours / theirs:.3f} | {r['pct_of_cublas']:.1f} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("folder", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--sizes", default="1024,2048,4096,8192")
    parser.add_argument("--modes", default="sustained,cold")
    parser.add_argument("--rounds", type=int, default=2, help="gemmwatch's turns a case, each followed by do_bench's")
    parser.add_argument("--kernels", default=None, help="names of KERNELS or NOT_YET_MEASURED to run (default: all of KERNELS)")
    parser.add_argument("--pin", action="store_true", help="run each case's configuration chosen before (CHOSEN)")
    parser.add_argument("--neighbour", action="store_true",
                        help="also time do_bench's loop without and with an FP16 cuBLAS call between samples, "
                             "and gemmwatch's own launch of the kernel in do_bench's loop")
    parser.add_argument("--do-bench-server", action="store_true", help=argparse.SUPPRESS)  # the second process
    args = parser.parse_args()
    if args.do_bench_server:
        DoBenchSide(args.folder).serve()
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    rows = interleaved(args.folder, [int(s) for s in args.sizes.split(",")], args.modes.split(","), args.rounds,
                       args.pin, args.kernels.split(",") if args.kernels else None, args.neighbour)
    (args.out / "rows.json").write_text(json.dumps(rows))
    made = table(rows)
    (args.out / "table.md").write_text(made)
    print(made)
    return 0


if __name__ == "__main__":
    sys.exit(main())
