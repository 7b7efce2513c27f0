"""gemmwatch's cuBLAS FP32 figure agrees with an independent measurement on the same GPU:
torch.matmul timed by triton.testing.do_bench (median; it also flushes L2 between runs)."""

import json
import os

import pytest

from core.settings import Settings
from worker.cases import TimingPolicy, builtin_case

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def runner():
    from worker.runner import CupyRunner

    return CupyRunner()


@pytest.mark.parametrize("n", [2048, 4096, 8192])
def test_cublas_fp32_agrees_with_torch_and_triton_within_2_percent(runner, n):
    torch = pytest.importorskip("torch")
    testing = pytest.importorskip("triton.testing")

    policy = TimingPolicy.from_settings(Settings())  # the defaults a job uses: cold L2
    ours = runner.run_case(builtin_case("cublas", n, n, n, seed=11), policy)

    torch.backends.cuda.matmul.allow_tf32 = False  # true FP32, as gemmwatch's baseline
    gen = torch.Generator(device="cuda").manual_seed(11)
    a = torch.rand((n, n), device="cuda", generator=gen) * 2 - 1
    b = torch.rand((n, n), device="cuda", generator=gen) * 2 - 1
    ms = testing.do_bench(lambda: torch.matmul(a, b), warmup=100, rep=1000, return_mode="median")
    theirs = 2 * n**3 / (ms * 1e-3) / 1e9

    line = {"n": n, "gemmwatch_cublas_gflops": ours.cublas_gflops, "torch_do_bench_gflops": theirs,
            "ratio": ours.cublas_gflops / theirs, "gemmwatch_noise": ours.noise}
    print(json.dumps(line))
    if os.environ.get("GEMMWATCH_BENCH_OUT"):
        with open(os.environ["GEMMWATCH_BENCH_OUT"] + ".agreement.jsonl", "a") as f:
            f.write(json.dumps(line) + "\n")
    assert ours.verified and ours.n_samples >= 10
    assert abs(ours.cublas_gflops / theirs - 1) <= 0.02, line
