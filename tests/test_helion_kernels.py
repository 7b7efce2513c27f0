"""Issue 50: a Helion kernel (`"language": "helion"`) called by the worker itself. For each case the real
confined compile process imports torch and Helion, binds the job's @helion.kernel function to the case's
matrices on torch's meta device and writes its Triton code; that code is then read by its wrapper,
compiled by real Triton and checked and timed as a Triton kernel. The CPU double stands in for the GPU
(tests/test_gpu_helion.py runs the same kernels on one)."""

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from core.description.kernel_description import KernelDescription
from core.description.kernel_folder import load_folder
from core.records.db import upgrade_database
from core.results.result_env import ResultEnv
from core.results.toolchain import said_first, toolchain_changes
from core.settings import Settings
from tests.conftest import make_client, make_settings, wait_for_job
from tests.fake_gpu import CpuRunner
from worker.compile.compiled import CompileError
from worker.measure.cases import Case, KernelChoice, TimingPolicy

pytest.importorskip("helion")  # installed with the tests (Makefile: torch's CPU build and Helion)
FOLDER = Path(__file__).parent / "fixtures" / "helion_kernel"
POLICY = TimingPolicy.from_settings(Settings(GEMMWATCH_CASE_TIME_CAP_S=0.3, GEMMWATCH_MIN_TIME_S=0))


def described(name: str, **changes) -> KernelDescription:
    desc = next(d for d in load_folder(FOLDER) if d.name == name)
    return KernelDescription.model_validate({**desc.model_dump(mode="json", exclude_none=True), **changes})


@pytest.fixture
def runner(tmp_path, monkeypatch, shared_kernel_cache):
    monkeypatch.setenv("GEMMWATCH_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("GEMMWATCH_KERNEL_CACHE_DIR", str(shared_kernel_cache))
    return CpuRunner()


def run(runner, desc: KernelDescription, m: int, n: int, k: int):
    return runner.run_case(Case(0, desc.name, m, n, k, 3, KernelChoice(desc, {}, "job")), POLICY)


def test_a_helion_kernel_runs_as_the_triton_code_helion_writes_for_each_case(runner):
    """Its pinned config at two sizes: each case its own code (the sizes compiled in, as static_shapes asks),
    its own grid of 32 x 32 tiles, and Helion's release and config on the result."""
    desc = described("helion_pinned")
    grids = {}
    for m, n, k in [(100, 70, 96), (64, 64, 64)]:
        out = run(runner, desc, m, n, k)
        assert out.verified and out.gflops, out.error
        assert out.env["launch"]["entry"] == "_helion_pinned_product"
        assert out.env["helion"]["config"] == {"block_sizes": [32, 32, 16], "num_warps": 4, "num_stages": 2}
        assert out.env["helion"]["version"] and out.env["helion"]["torch"]
        grids[(m, n, k)] = out.env["launch"]["grid"][0]
    assert grids == {(100, 70, 96): 4 * 3, (64, 64, 64): 2 * 2}
    written = runner.device.helion_code(desc, (100, 70, 96))
    assert "tl.range(0, 96, _BLOCK_SIZE_2)" in written.code and "_BLOCK_SIZE_0 = tl.constexpr(32)" in written.code
    ResultEnv.model_validate(out.env)  # the record fits the env's schema as declared, not as an extra


def test_the_description_s_config_is_the_one_helion_writes_with(runner):
    out = run(runner, described("helion_open"), 100, 70, 96)
    assert out.verified, out.error
    assert out.env["helion"]["config"] == {"block_sizes": [64, 32, 32], "num_warps": 4, "num_stages": 3}
    assert out.env["launch"]["grid"][0] == 2 * 3 and out.env["launch"]["block"][0] == 4 * 32


def test_a_column_major_b_reaches_helion_as_its_strides(runner):
    """B as a user's `b.T`: Helion reads the strides of the meta tensor it is given, and its loads of B walk
    K along the contiguous side."""
    desc = described("helion_pinned", layout={"A": "row", "B": "col", "C": "row"})
    written = runner.device.helion_code(desc, (64, 48, 80))
    row = described("helion_pinned")
    assert written.code != runner.device.helion_code(row, (64, 48, 80)).code
    assert "* 1 + indices_1[None, :] * 80" in written.code  # B[k, n] at k + n * K
    out = run(runner, desc, 64, 48, 80)
    assert out.verified and out.form == "rcr+ab", (out.error, out.form)


def test_a_split_k_kernel_has_its_c_zeroed_before_each_call_and_its_piece_size_compiled_in(runner):
    """Helion's split-K shape, as its examples/matmul_split_k.py: C from torch.zeros, pieces of K added into
    it atomically, the piece's size computed by the wrapper (helion.next_power_of_2(helion.cdiv(k, 4))).
    The wrapper is read at the case's size as numbers, since its code was written for that size alone."""
    desc = described("helion_split_k")
    for (m, n, k), piece in [((100, 70, 96), 32), ((64, 64, 1000), 256)]:
        out = run(runner, desc, m, n, k)
        assert out.verified, out.error
        assert out.env["launch"]["c_starts_zero"] is True
        assert piece in out.env["launch"]["defines"].values(), out.env["launch"]["defines"]
        assert out.env["launch"]["grid"][0] == -(-m // 32) * -(-n // 32) * -(-k // piece)


def test_a_kernel_without_a_config_of_its_own_or_given_is_refused_with_what_to_do(runner):
    with pytest.raises(CompileError, match=r"open_product in tiles.py pins no config .* give the one to run in "
                                           r"\"helion\""):
        run(runner, described("helion_open", helion=None), 64, 64, 64)


def test_a_name_that_is_no_helion_kernel_and_a_config_helion_refuses_are_the_job_s_errors(runner):
    with pytest.raises(CompileError, match="annotations in tiles.py is not a @helion.kernel function"):
        run(runner, described("helion_open", wrapper="annotations"), 64, 64, 64)
    with pytest.raises(CompileError, match=r"Helion could not write open_product\(a, b\)'s Triton code"):
        run(runner, described("helion_open", helion={"block_sizes": [64, 32, 32, 16, 8]}), 64, 64, 64)


def test_written_code_is_kept_for_the_worker_s_life_within_a_bound(runner, monkeypatch):
    """The same case again reads the kept code (no compile process); past KEPT entries the oldest is
    dropped and written again when asked for."""
    from worker.compile import helion_build

    started = []
    real = helion_build.run_sandbox
    monkeypatch.setattr(helion_build, "run_sandbox", lambda *a, **k: started.extend(a[0]["cases"]) or real(*a, **k))
    monkeypatch.setattr(helion_build, "KEPT", 1)
    monkeypatch.setattr(helion_build, "_written", type(helion_build._written)())
    desc = described("helion_pinned")
    first = runner.device.helion_code(desc, (64, 64, 32))
    assert runner.device.helion_code(desc, (64, 64, 32)) is first and started == [[64, 64, 32]]
    runner.device.helion_code(desc, (32, 64, 32))
    assert runner.device.helion_code(desc, (64, 64, 32)).code == first.code
    assert started == [[64, 64, 32], [32, 64, 32], [64, 64, 32]] and len(helion_build._written) == 1


def test_a_job_s_sizes_are_written_in_one_compile_process_before_its_cases(runner, monkeypatch):
    """The runner's prefetch has Helion write every size of a job's Helion kernel in one process (torch and
    Helion imported once); its cases then read the kept code and start no process of their own."""
    from worker.compile import helion_build

    processes = []
    real = helion_build.run_sandbox
    monkeypatch.setattr(helion_build, "run_sandbox", lambda *a, **k: processes.append(a[0]["cases"]) or real(*a, **k))
    monkeypatch.setattr(helion_build, "_written", type(helion_build._written)())
    desc = described("helion_open")
    sizes = [(64, 64, 64), (100, 70, 96), (32, 48, 64)]
    cases = [Case(i, desc.name, *size, 3, KernelChoice(desc, {}, "job")) for i, size in enumerate(sizes)]
    runner.prefetch(cases)
    for case in cases:
        out = runner.run_case(case, POLICY)
        assert out.verified and out.env["helion"]["config"]["block_sizes"] == [64, 32, 32], out.error
    assert processes == [[list(size) for size in sizes]]


def test_the_job_s_helion_code_is_written_beside_its_first_cases(runner, monkeypatch):
    """The prefetch returns while Helion's process still runs, so a job's CUDA cases start meanwhile; a
    Helion case that comes first waits for that process and starts none of its own."""
    import threading

    from worker.compile import helion_build

    running, release, finished, processes = threading.Event(), threading.Event(), threading.Event(), []
    real = helion_build.run_sandbox

    def held(*args, **kwargs):
        processes.append(args[0]["cases"])
        running.set()
        release.wait(60)  # until the test has seen the prefetch return (a bound, not a pause: set at once)
        try:
            return real(*args, **kwargs)
        finally:
            finished.set()

    monkeypatch.setattr(helion_build, "run_sandbox", held)
    monkeypatch.setattr(helion_build, "_written", type(helion_build._written)())
    desc = described("helion_open")
    cases = [Case(i, desc.name, *size, 3, KernelChoice(desc, {}, "job")) for i, size in enumerate([(64, 64, 64),
                                                                                                   (32, 48, 64)])]
    runner.prefetch(cases)
    returned_while_writing = not finished.is_set()
    release.set()
    assert returned_while_writing and running.wait(120)
    assert all(runner.run_case(case, POLICY).verified for case in cases)
    assert processes == [[[64, 64, 64], [32, 48, 64]]]


def test_a_job_s_prefetch_does_not_wait_for_an_earlier_job_s_helion_writing(runner, monkeypatch):
    """An earlier job's writing still running (held here) does not hold up the next job's start: its
    prefetch returns, and its writing follows once the earlier one ends."""
    import threading

    from worker.compile import helion_build

    monkeypatch.setattr(helion_build, "_written", type(helion_build._written)())
    desc = described("helion_open")
    cases = [Case(0, desc.name, 64, 64, 64, 3, KernelChoice(desc, {}, "job"))]
    assert helion_build._writing.acquire(timeout=120)  # the earlier job's writing
    try:
        prefetching = threading.Thread(target=runner.prefetch, args=(cases,), daemon=True)
        prefetching.start()
        prefetching.join(120)
        assert not prefetching.is_alive()
    finally:
        helion_build._writing.release()
    assert runner.run_case(cases[0], POLICY).verified


def test_a_kernel_helion_cannot_write_fails_each_case_from_one_process(runner, monkeypatch):
    """The error is kept like the code: a job's prefetch meets it once, and each case then fails with it
    without starting a compile process of its own."""
    from worker.compile import helion_build

    processes = []
    real = helion_build.run_sandbox
    monkeypatch.setattr(helion_build, "run_sandbox", lambda *a, **k: processes.append(a[0]["cases"]) or real(*a, **k))
    monkeypatch.setattr(helion_build, "_written", type(helion_build._written)())
    desc = described("helion_open", wrapper="annotations")
    cases = [Case(i, desc.name, *size, 3, KernelChoice(desc, {}, "job")) for i, size in enumerate([(64, 64, 64),
                                                                                                   (32, 64, 64)])]
    runner.prefetch(cases)
    for case in cases:
        with pytest.raises(CompileError, match="annotations in tiles.py is not a @helion.kernel function"):
            runner.run_case(case, POLICY)
    assert len(processes) == 1


def test_a_batch_is_not_run_and_says_why(runner):
    desc = described("helion_pinned")
    with pytest.raises(ValueError, match="a Helion kernel is called as f\\(a, b\\) on two matrices"):
        runner.run_case(Case(0, desc.name, 64, 64, 64, 3, KernelChoice(desc, {}, "job"), batch=4), POLICY)


HOSTILE = '''
import os
import socket
import subprocess

secret = open("/etc/hostname").read()
listing = os.listdir("/")
link = socket.socket()
child = subprocess.run(["/bin/true"])
dropped = open("../escaped.txt", "w").write("x")
noise = print('{"ok": false, "log": "forged"}')
'''


def test_a_hostile_module_is_read_confined_and_its_kernel_still_written(runner, tmp_path):
    """What the module does as it is defined, tried past the guard: read a file outside the job's, list /,
    open a socket, start a process, write beside its folder. Each statement raises inside the confined
    compile process (Landlock, seccomp) and is passed over; the kernel's code is still written. What it
    prints (a forged reply) goes to stderr, never taken for the reply."""
    desc = described("helion_pinned")
    text = desc.files["tiles.py"].replace("\n\n\n@helion.kernel", HOSTILE + "\n\n@helion.kernel", 1)
    hostile = KernelDescription.model_validate({**desc.model_dump(mode="json", exclude_none=True),
                                                "files": {"tiles.py": text}})
    written = runner.device.helion_code(hostile, (64, 64, 64))
    assert "_helion_pinned_product" in written.code
    skipped = "\n".join(written.skipped)
    for statement in ("secret =", "listing =", "link =", "child =", "dropped ="):
        line = text.splitlines().index(next(s for s in text.splitlines() if s.startswith(statement))) + 1
        assert f"line {line}: PermissionError" in skipped, (statement, skipped)


def test_a_module_that_spins_meets_helion_s_own_time_limit_named(tmp_path, monkeypatch, shared_kernel_cache):
    """Helion's process has its own limits (importing torch alone takes seconds): a module that spins as it is
    defined is killed at GEMMWATCH_HELION_TIMEOUT_S, which the refusal names."""
    from worker.compile.compiled import CompileRefused

    monkeypatch.setenv("GEMMWATCH_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("GEMMWATCH_HELION_TIMEOUT_S", "20")
    desc = described("helion_pinned")
    text = desc.files["tiles.py"].replace("\n\n\n@helion.kernel", "\n\nspun = next(x for x in iter(int, 1) if x)\n\n\n@helion.kernel", 1)
    spinning = KernelDescription.model_validate({**desc.model_dump(mode="json", exclude_none=True),
                                                 "files": {"tiles.py": text}})
    with pytest.raises(CompileRefused, match=r"exceeded .*20 s.*GEMMWATCH_HELION_TIMEOUT_S"):
        CpuRunner().device.helion_code(spinning, (64, 64, 64))


@pytest.mark.parametrize(("changes", "said"), [
    ({"wrapper": None}, "wrapper: the @helion.kernel function of tiles.py"),
    ({"entry": "pinned_product"}, "entry: not for a Helion kernel"),
    ({"args": ["A", "B", "C", "M", "N", "K"]}, "args: not for a Helion kernel"),
    ({"triton": {"num_warps": 8}}, "triton: not for a Helion kernel"),
    ({"defines": {"BLOCK": 64}}, "defines: not for a Helion kernel"),
    ({"source": "tiles.cu", "files": {"tiles.cu": "x"}}, "a Helion kernel's source is a Python file"),
    ({"layout": {"A": "row", "B": "row", "C": "col"}}, "a Helion kernel's C is the row-major"),
    ({"helion": {"block_sizes": {"m": 64}}}, "helion.block_sizes"),
    ({"helion": {"loop_orders": [[[1, 0]]]}}, "helion.loop_orders"),
    ({"helion": {"pid_type": "flat; import os"}}, "helion.pid_type"),
])
def test_a_helion_description_is_held_to_what_helion_writes_itself(changes, said):
    with pytest.raises(ValidationError, match=said.replace("(", r"\(")):
        described("helion_pinned", **changes)


def test_a_config_on_a_kernel_of_another_language_is_refused():
    with pytest.raises(ValidationError, match='helion: a Helion kernel\'s config; set "language": "helion"'):
        KernelDescription.model_validate({"name": "t", "language": "triton", "source": "k.py", "files": {"k.py": ""},
                                          "wrapper": "matmul", "helion": {"num_warps": 4}})


def test_a_helion_or_torch_release_change_is_said_first_in_a_verdict():
    base = {"helion": {"version": "1.4.0", "torch": "2.11.0", "config": {}}}
    head = {"helion": {"version": "1.5.1", "torch": "2.11.0", "config": {}}}
    assert toolchain_changes(base, head) == ["Helion 1.4.0 -> 1.5.1"]
    head["helion"]["torch"] = "2.13.0"
    assert said_first(toolchain_changes(base, head), "slower").startswith(
        "the environment changed between base and head (Helion 1.4.0 -> 1.5.1; torch 2.11.0 -> 2.13.0)")
    assert toolchain_changes(base, base) == []


@pytest.mark.timeout(1800)
def test_a_helion_kernel_through_the_api_a_worker_and_the_store(tmp_path, pg_url, redis_url, start_worker,
                                                                shared_kernel_cache):
    cfg = make_settings(tmp_path, pg_url, redis_url)
    upgrade_database(cfg)
    client = make_client(cfg)
    # Limits for a loaded CI machine, as test_kernel_paths.py's: Helion writing and Triton compiling the
    # kernel took past the 120 s case limit under four busy processes on two cores (a GPU worker's own
    # machine is what the default limits are meant for).
    start_worker(cfg, GEMMWATCH_KERNEL_CACHE_DIR=str(shared_kernel_cache),
                 GEMMWATCH_COMPILE_TIMEOUT_S="900", GEMMWATCH_CASE_TIMEOUT_S="1200")
    sources = [described(name).model_dump(mode="json", exclude_none=True) for name in ("helion_pinned",)]
    resp = client.post("/api/jobs", json={"sources": sources, "sizes": [[96, 80, 64]]})
    assert resp.status_code == 202, resp.text
    job = wait_for_job(client, resp.json()["id"], timeout=1500)
    assert job["status"] == "succeeded", job["error"]
    (result,) = job["results"]
    assert result["verified"] and result["variant"] == "helion_pinned", result
    detail = client.get(f"/api/results/{result['id']}").json()
    assert detail["env"]["helion"]["config"]["block_sizes"] == [32, 32, 16], json.dumps(detail["env"])[:500]
