"""Issue 50: versions are part of a result's environment, and a verdict whose base and head were
built or run with another toolchain (compiler and the CUTLASS it was built against, driver, CUDA
runtime, CuPy) says so first (core/results/toolchain.py), instead of blaming the kernel."""

from core.results.toolchain import said_first, toolchain, toolchain_changes
from tests.conftest import make_client
from tests.test_confirm import SIZE, bench
from tests.test_ci_hook import KERNEL


def env(compiler: str | None = "nvcc 13.0.88 + CUTLASS 4.2.0", driver: str | None = "580.65") -> dict:
    return {"resources": {"compiler": compiler} if compiler else {}, "gpu": {"driver": driver} if driver else {}}


def test_each_part_that_differs_is_named_with_both_versions():
    assert toolchain(env()) == {"compiler": "nvcc 13.0.88 + CUTLASS 4.2.0", "driver": "580.65"}
    assert toolchain_changes(env(), env()) == []
    assert toolchain_changes(env(), env(compiler="nvcc 13.0.88 + CUTLASS 4.3.0", driver="590.10")) == [
        "compiler nvcc 13.0.88 + CUTLASS 4.2.0 -> nvcc 13.0.88 + CUTLASS 4.3.0", "driver 580.65 -> 590.10"]


def test_a_part_only_one_side_records_is_no_change():
    assert toolchain_changes(env(driver=None), env(driver="590.10")) == []
    assert toolchain_changes(None, env()) == []


def test_the_change_comes_first_in_the_reason():
    assert said_first([], "12.0 % below the baseline") == "12.0 % below the baseline"
    said = said_first(["driver 580.65 -> 590.10"], "12.0 % below the baseline")
    assert said.startswith("the environment changed between base and head (driver 580.65 -> 590.10)")
    assert said.endswith("; 12.0 % below the baseline")


def test_a_slower_head_under_another_driver_says_so_first_through_the_stack(cfg, start_worker):
    """Base measured by a worker under one driver, head (10 % slower) under another: the verdict is
    still a regression, and its reason names the driver first; the built-in, unchanged, also
    says the driver changed."""
    first = start_worker(cfg, FAKE_GPU_DRIVER="580.65")
    client = make_client(cfg)
    bench(client, "dddd0001", KERNEL, [])
    first.stop()  # the next job is the second worker's
    start_worker(cfg, FAKE_GPU_DRIVER="590.10")
    head = bench(client, "dddd0002", "#define FAKE_GPU_SLOWDOWN_PCT 10\n" + KERNEL, ["dddd0001"])
    assert head["results"][0]["env"]["gpu"]["driver"] == "590.10" and len(SIZE) == 1
    verdicts = {v["variant"]: v for v in client.get(f"/api/jobs/{head['id']}/verdicts").json()}
    mine = verdicts["my_gemm"]
    assert mine["status"] == "regression", mine
    assert mine["reason"].startswith("the environment changed between base and head (driver 580.65 -> 590.10)"), mine
    assert verdicts["naive"]["reason"].startswith("the environment changed between base and head (driver 580.65 -> "
                                                  "590.10)"), verdicts["naive"]


def test_a_cublas_change_is_named_since_every_percent_of_cublas_is_against_it():
    base, head = {"gpu": {"cublas": 130000, "driver": "580.65"}}, {"gpu": {"cublas": 130100, "driver": "580.65"}}
    assert toolchain_changes(base, head) == ["cuBLAS 130000 -> 130100"]
