"""Issue 53: a job's kernels compile ahead of its cases, several at once (worker/compile/prefetch.py).
The CPU double compiles a job's kernels with NVRTC as a GPU worker does, so the whole path is real
here: the GPU process gets the job's cases first, queues their compiles, and each case reads its
kernel from the kernel cache."""

import threading
from pathlib import Path

import pytest

from core.description.kernel_folder import load_folder
from tests.fake_gpu import CpuRunner
from worker.compile.prefetch import Prefetch
from worker.measure.cases import Case, KernelChoice, TimingPolicy

FORMS_REPO = Path(__file__).parent / "fixtures" / "forms_repo"


def test_compiles_run_several_at_once_each_once_and_a_case_waits_for_its_own():
    both_running = threading.Barrier(2, timeout=120)  # passed only if two compiles run at the same time
    done = []

    def compile_one(item):
        if item in ("a", "b"):
            both_running.wait()
        if item == "bad":
            raise ValueError("does not compile")
        done.append(item)
        return item

    prefetch = Prefetch(compile_one, workers=2)
    assert prefetch.start([("a", "a"), ("b", "b"), ("a", "a again"), ("bad", "bad")]) == 3  # "a" once
    assert prefetch.wait("a") is None and prefetch.wait("b") is None  # returns once each is compiled
    failed = prefetch.wait("bad")
    assert isinstance(failed, ValueError) and str(failed) == "does not compile"  # the first case raises it
    assert prefetch.wait("bad") is None  # handed over once: a later case compiles, and meets it remembered
    assert sorted(done) == ["a", "b"]
    assert prefetch.wait("never queued") is None
    prefetch.stop()
    assert Prefetch(compile_one, workers=1).start([("a", "a")]) == 0  # one worker: each compiles as its case comes


def test_stop_drops_what_has_not_started():
    release = threading.Event()
    started = []

    def compile_one(item):
        started.append(item)
        release.wait(120)
        return item

    prefetch = Prefetch(compile_one, workers=2)
    prefetch.start([(i, i) for i in range(6)])
    prefetch.stop()  # two are running; the four queued behind them never start
    release.set()
    prefetch._pool.shutdown(wait=True)
    assert sorted(started) == [0, 1]


@pytest.fixture
def runner(tmp_path, monkeypatch):
    monkeypatch.setenv("GEMMWATCH_KERNEL_CACHE_DIR", str(tmp_path / "kernels"))
    monkeypatch.setenv("GEMMWATCH_COMPILE_WORKERS", "3")
    return CpuRunner()


def test_a_jobs_kernels_are_in_the_cache_before_their_cases_and_each_case_verifies(runner, tmp_path):
    descs = [d for d in load_folder(FORMS_REPO) if d.name in ("hgemm_tn_half_sum", "sgemm_col_alpha")]
    cases = [Case(i, d.name, 64, 48, 32, 5, KernelChoice(d, {}, "job")) for i, d in enumerate(descs)]
    assert runner.prefetch(cases + cases) == 2  # each kernel once, however many cases name it
    assert runner.device.prefetched[:2] == ["hgemm_tn_half_sum", "sgemm_col_alpha"]
    for future in list(runner.device._prefetch._futures.values()):  # finished: in the cache before any case runs
        future.result(timeout=300)
    assert len(list((tmp_path / "kernels").glob("*.cubin"))) == 2
    policy = TimingPolicy.from_settings(runner.device.cfg)
    for case in cases:
        out = runner.run_case(case, policy)
        assert out.verified, out.error
    assert len(list((tmp_path / "kernels").glob("*.cubin"))) == 2  # read from there: no other build
    runner.end_job()


def test_a_launcher_s_and_a_triton_kernel_build_as_their_case_comes(runner):
    """A repository's launcher is a library built for its case; a Triton kernel's autotune chooses
    what to build: neither is compiled ahead. cuBLAS alone has nothing to compile."""
    fixtures = Path(__file__).parent / "fixtures"
    launcher = next(d for d in load_folder(fixtures / "launcher_repo") if d.name == "launcher_run_sgemm_tiled")
    triton = next(d for d in load_folder(fixtures / "triton_repo") if d.name == "triton_matmul_fp16")
    cases = [Case(0, launcher.name, 64, 64, 64, 1, KernelChoice(launcher, {}, "job")),
             Case(1, triton.name, 64, 64, 64, 1, KernelChoice(triton, {}, "job")), Case(2, "cublas", 64, 64, 64, 1, None)]
    assert runner.prefetch(cases) == 0 and runner.device.prefetched == []
