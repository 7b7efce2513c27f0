"""A job's host code, confined: worker/launch/host_jail.py and worker/launch/launcher_call.py, tried as a hostile
launcher would try them.

The launchers in tests/fixtures/hostile_launchers/ are built with gcc as shared libraries (no CUDA
on the CI) and each is called once through `run_confined_call`, the process the GPU path uses too.
Each one is checked three ways: contained (checked from outside: no file made, the listeners heard
nothing, the bystander process lives, the planted secret is in no output), reported (the outcome
names what happened; the launcher itself saw the error it was given), and survived (the next job,
a well-behaved launcher in a fresh process, computes C correctly).

Nothing here sleeps to order things: a call returns when its process has ended, and what the
listeners might have got is queued by then (loopback delivers at once).
"""

import errno
import json
import os
import platform
import shutil
import socket
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from worker.launch.host_jail import landlock_abi
from tests.cpu_gemm_hook import cpu_gemm_inputs
from worker.launch.launcher_call import (AFTER_CALL_FAILED, CRASHED, EXITED, REFUSED, RETURNED, SET_UP, TIMED_OUT,
                                         CallOutcome, run_confined_call)

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures" / "hostile_launchers"
CPU = "tests.cpu_gemm_hook:CpuGemm"
FAKE_CUDA = f"{FIXTURES / 'hooks.py'}:FakeCudaGemm"
KEEPING_KERNELS = f"{FIXTURES / 'hooks.py'}:FakeCudaKeepingKernels"
SET_UP_KERNEL = "0123456789abcdef0123456789abcdef01234567.cubin"  # what that hook's set-up compiles
SECRET = "gw_tok_7f3c9e1d5a0b4c2e8f6a1d3b5c7e9f0a"  # stands for an API token or a database password
PASSWD_START = "root:x:0:0"
CALL_LIMIT_S = 60.0  # generous: a bound for a busy 2-core machine, not a figure any test waits for
SIZE = {"M": 16, "N": 16, "K": 16}
X86_64 = platform.machine() == "x86_64"

pytestmark = [
    pytest.mark.skipif(landlock_abi() < 4, reason="needs Landlock ABI 4 (filesystem and TCP rules)"),
    pytest.mark.skipif(shutil.which("gcc") is None or shutil.which("g++") is None, reason="needs gcc and g++"),
]


@dataclass
class World:
    """What the launchers reach for, set up by the test and watched from outside."""

    build: Path  # the launchers' build folder (readable by the confined process)
    data: Path  # stands for the worker's data folder: the token file lives here
    outside: Path  # a file that must never appear
    tcp: socket.socket
    udp: socket.socket
    bystander: subprocess.Popen

    def library(self, name: str) -> Path:
        return self.build / f"{name}.so"


def _build(sources: Path, build: Path, defines: dict[str, str]) -> None:
    flags = [f"-D{k}={v}" for k, v in defines.items()]
    for source in sorted(sources.glob("*.c")) + sorted(sources.glob("*.cpp")):
        compiler = "g++" if source.suffix == ".cpp" else "gcc"
        subprocess.run([compiler, "-shared", "-fPIC", "-O1", "-w", *flags, "-o", str(build / f"{source.stem}.so"),
                        str(source), "-ldl", "-lpthread"], check=True, capture_output=True, timeout=120)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("host_jail")
    data, build, outside_dir = root / "data", root / "build", root / "outside"
    for d in (data, build, outside_dir):
        d.mkdir()
    (data / "api-token").write_text(SECRET + "\n")
    (data / ".env").write_text(f"DATABASE_URL=postgresql://gemmwatch:{SECRET}@db/gemmwatch\n")
    tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    tcp.bind(("127.0.0.1", 0))
    tcp.listen(8)
    tcp.setblocking(False)
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))
    udp.setblocking(False)
    bystander = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    outside = outside_dir / "escaped"
    _build(FIXTURES, build, {"SECRET_PATH": f'"{data / "api-token"}"', "OUTSIDE_PATH": f'"{outside}"',
                             "TCP_PORT": str(tcp.getsockname()[1]), "UDP_PORT": str(udp.getsockname()[1]),
                             "BYSTANDER_PID": str(bystander.pid)})
    yield World(build, data, outside, tcp, udp, bystander)
    bystander.stdin.close()
    bystander.wait(timeout=60)
    tcp.close()
    udp.close()


def call(world: World, name: str, *, hook: str = CPU, timeout_s: float = CALL_LIMIT_S, **args) -> CallOutcome:
    hook_args = {**SIZE, "seed": 1, **args}
    if hook == FAKE_CUDA:
        hook_args["fake_cudart"] = str(world.library("fake_cudart"))
    return run_confined_call(world.library(name), "launch", hook=hook, hook_args=hook_args, timeout_s=timeout_s)


def reference(M: int, N: int, K: int, alpha: float, beta: float, seed: int) -> list[float]:
    A, B, C = cpu_gemm_inputs(M, N, K, seed)
    return [alpha * sum(A[i * K + k] * B[k * N + j] for k in range(K)) + beta * C[i * N + j]
            for i in range(M) for j in range(N)]


def bytes_in(values: list[float]) -> bytes:
    """What a launcher copied into C byte by byte (as floats 0..255), to look for a secret in."""
    return bytes(int(v) for v in values if float(v).is_integer() and 0 <= v < 256)


def assert_contained(world: World, outcome: CallOutcome) -> None:
    assert not any(world.outside.parent.iterdir()), "something was written outside the launcher's folder"
    assert not list(world.build.glob("*.planted")), "something was written into the launcher's own folder"
    with pytest.raises(BlockingIOError):
        world.tcp.accept()
    with pytest.raises(BlockingIOError):
        world.udp.recv(64)
    assert world.bystander.poll() is None, "the bystander process was killed"
    said = " ".join([outcome.message, outcome.output, outcome.confinement or "", json.dumps(outcome.result)])
    assert SECRET not in said and PASSWD_START not in said
    C = (outcome.result or {}).get("C", [])
    assert SECRET.encode() not in bytes_in(C) and PASSWD_START.encode() not in bytes_in(C)


def assert_next_job_correct(world: World) -> None:
    """The worker goes on: a fresh process, a well-behaved launcher, the right C."""
    args = {**SIZE, "alpha": 0.75, "beta": -0.5, "seed": 7}
    outcome = call(world, "well_behaved", **args)
    assert outcome.kind == RETURNED, outcome
    expected = reference(**args)
    assert max(abs(a - b) for a, b in zip(outcome.result["C"], expected)) < 1e-4


def test_a_well_behaved_launcher_computes_c_confined(world):
    args = {**SIZE, "alpha": 1.5, "beta": 0.25, "seed": 3}
    outcome = call(world, "well_behaved", **args)
    assert outcome.kind == RETURNED and outcome.message == "the launcher returned normally", outcome
    assert max(abs(a - b) for a, b in zip(outcome.result["C"], reference(**args))) < 1e-4
    # The report says what was applied, before anything of the job's was loaded.
    for measure in ("at set-up, Landlock ABI", "no TCP bind or connect", "seccomp:", "no capabilities",
                    f"reading {world.build}"):
        assert measure in outcome.confinement, outcome.confinement


EACCES, EPERM, ENOSYS = -errno.EACCES, -errno.EPERM, -errno.ENOSYS

# name, hook, the outcome's kind, words its message holds, what the launcher saw (C[i] = -errno)
HOSTILE = [
    # /etc/passwd and the token file: by path, through /proc/self/root, by listing, through O_PATH
    ("read_files", CPU, RETURNED, "returned normally", {0: EACCES, 1: EACCES, 2: EACCES, 3: EACCES, 4: EACCES}),
    # the same from a static constructor, at dlopen, and from a C++ static object (libstdc++ loads)
    ("constructor_reads", CPU, RETURNED, "returned normally", {0: EACCES, 1: EACCES}),
    ("static_object", CPU, RETURNED, "returned normally", {0: -1, 1: -1}),
    # TCP, UDP, UNIX, io_uring; then the i386 and x32 tables, a filter's blind spots (x86-64 only)
    ("network", CPU, RETURNED, "returned normally",
     {0: EPERM, 2: EPERM, 3: EPERM, 4: EPERM, **({5: ENOSYS, 6: ENOSYS} if X86_64 else {})}),
    # fork, clone as fork, clone3 (ENOSYS: glibc falls back to clone), posix_spawn, system() (127: no
    # shell could be started), execve
    ("processes", CPU, RETURNED, "returned normally",
     {0: EPERM, 1: EPERM, 2: ENOSYS, 3: EPERM, 4: 127 << 8, 5: EPERM}),
    # a file outside, a folder, a symbolic link, a file in its own build folder
    ("write_outside", CPU, RETURNED, "returned normally", {0: EACCES, 1: EACCES, 2: EACCES, 3: EACCES}),
    # /proc/self/mem; ptrace; the parent's memory; signals to the parent and a bystander; pidfd; undoing
    # PDEATHSIG, DUMPABLE, the CPU limit; namespaces; its own process group
    ("other_processes", CPU, RETURNED, "returned normally", {0: EACCES, **{i: EPERM for i in range(1, 13)}}),
    ("segfault", CPU, CRASHED, "the launcher crashed (segmentation fault, SIGSEGV)", {}),
    ("abort", CPU, CRASHED, "the launcher crashed (abort, SIGABRT)", {}),
    ("exit_zero", CPU, EXITED, "the launcher called exit(0)", {}),
    # a forged "set_up" and "finished" on every descriptor, then a crash: the exit status decides, and
    # the crash is not the set-up's (below)
    ("forged_report", CPU, CRASHED, "SIGSEGV", {}),
    # cudaDeviceReset, on the CI through the stand-in runtime: the call returns, the context is gone
    ("reset_device", FAKE_CUDA, AFTER_CALL_FAILED, "cudaDeviceReset", {}),
    # code run on a thread made at set-up, before confinement (CUDA's callback thread): the set-up
    # layer holds it, C[2] == 0 says the callback was queued and ran
    ("host_callback", FAKE_CUDA, RETURNED, "returned normally", {0: EACCES, 1: EACCES, 2: 0}),
]


@pytest.mark.parametrize("name,hook,kind,words,seen", HOSTILE, ids=[h[0] for h in HOSTILE])
def test_a_hostile_launcher_is_contained_and_reported_and_the_next_job_runs(world, name, hook, kind, words, seen):
    outcome = call(world, name, hook=hook)
    assert outcome.kind == kind, outcome
    assert words in outcome.message, outcome.message
    assert "set-up" not in outcome.message  # what the job's code did is never our set-up's failure
    C = (outcome.result or {}).get("C")
    for index, value in seen.items():
        assert C[index] == value, f"C[{index}] = {C[index]}, expected {value} ({outcome})"
    assert_contained(world, outcome)
    assert_next_job_correct(world)


def test_a_launcher_that_spins_is_killed_at_its_limit(world):
    started = time.monotonic()
    outcome = call(world, "spin", timeout_s=3)
    took = time.monotonic() - started
    assert outcome.kind == TIMED_OUT and outcome.message == "the launcher ran past its 3 s limit; killed", outcome
    assert 3 <= outcome.seconds < 3 + 30 and took < 60 + 30, (outcome.seconds, took)
    assert_contained(world, outcome)
    assert_next_job_correct(world)


def test_the_workers_environment_never_reaches_the_launcher(world, monkeypatch):
    """The child starts with a few harmless variables: what the worker holds (DATABASE_URL,
    BROKER_URL, GEMMWATCH_*) is not there to getenv(), Landlock or not."""
    monkeypatch.setenv("DATABASE_URL", f"postgresql://gemmwatch:{SECRET}@db/gemmwatch")
    monkeypatch.setenv("BROKER_URL", f"redis://:{SECRET}@broker:6379/0")
    monkeypatch.setenv("GEMMWATCH_WEBHOOK_SECRET", SECRET)
    outcome = call(world, "environment")
    assert outcome.kind == RETURNED, outcome
    assert "HOME=" in outcome.output  # it did print its environment
    assert SECRET not in outcome.output and "DATABASE_URL" not in outcome.output
    assert_contained(world, outcome)


def test_a_library_that_cannot_be_loaded_is_reported(world, tmp_path):
    (tmp_path / "not_elf.so").write_text("not a library\n")
    outcome = run_confined_call(tmp_path / "not_elf.so", hook=CPU, timeout_s=CALL_LIMIT_S)
    assert outcome.kind == "load_failed" and "could not be loaded" in outcome.message, outcome
    outcome = run_confined_call(world.library("well_behaved"), "launch_gemm", hook=CPU, timeout_s=CALL_LIMIT_S)
    assert outcome.kind == "load_failed" and "has no function launch_gemm" in outcome.message, outcome


def test_set_up_kernels_are_kept_from_a_set_up_only_call_and_never_from_one_that_loaded_the_job(world, tmp_path):
    """worker/launch/setup_kernels.py: the kernels a set-up compiles are kept from a call that
    loaded nothing of the job's, and each later call starts with a copy. The launcher here gets
    CUDA's callback thread, made at set-up, to write a kernel of its own into its call's cache, and
    succeeds there: what such a call's cache holds must never reach another's."""
    kept = tmp_path / "kept"
    args = {**SIZE, "seed": 1, "fake_cudart": str(world.library("fake_cudart"))}
    made = run_confined_call(world.library("poisons_setup_kernels"), "launch", hook=KEEPING_KERNELS, hook_args=args,
                             timeout_s=CALL_LIMIT_S, kernels=kept, setup_only=True)
    assert made.kind == SET_UP and "nothing of the job's was loaded" in made.message, made
    assert made.result is None and made.output == ""  # the launcher never ran: no C, nothing printed
    assert [p.name for p in kept.iterdir()] == [SET_UP_KERNEL]
    before = {p.name: p.read_bytes() for p in kept.iterdir()}

    outcome = run_confined_call(world.library("poisons_setup_kernels"), "launch", hook=KEEPING_KERNELS,
                                hook_args=args, timeout_s=CALL_LIMIT_S, kernels=kept)
    assert outcome.kind == RETURNED, outcome
    assert outcome.result["found_kernel"] is True  # its set-up started from the kept kernel
    C = outcome.result["C"]
    assert C[2] == 0 and C[1] == -errno.EACCES, C  # refused on the launcher's own thread ...
    if landlock_abi() < 8:  # ... and written from the set-up's thread, which keeps that layer (no TSYNC)
        assert C[0] >= 0, C
    assert {p.name: p.read_bytes() for p in kept.iterdir()} == before  # none of it was kept
    assert_contained(world, outcome)

    # A set-up-only call that finds nothing to compile keeps nothing new; one asked to keep nowhere keeps nothing.
    again = run_confined_call(world.library("poisons_setup_kernels"), "launch", hook=KEEPING_KERNELS, hook_args=args,
                              timeout_s=CALL_LIMIT_S, kernels=kept, setup_only=True)
    assert again.kind == SET_UP and {p.name: p.read_bytes() for p in kept.iterdir()} == before


def test_only_files_named_as_compiled_kernels_are_kept_or_seeded(tmp_path):
    from worker.launch import setup_kernels

    cache, kept = tmp_path / "cache", tmp_path / "kept"
    cache.mkdir()
    good = SET_UP_KERNEL
    (cache / good).write_bytes(b"kernel")
    (cache / "tmpa1b2c3").write_bytes(b"CuPy's file being written")
    (cache / "evil.so").write_bytes(b"not a kernel")
    (cache / "fedcba9876543210fedcba9876543210fedcba98.cubin").symlink_to("/etc/passwd")
    (cache / "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.cubin").mkdir()
    with open(cache / "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb.cubin", "wb") as big:
        big.truncate(setup_kernels.LARGEST_FILE + 1)
    assert setup_kernels.keep(cache, kept) == 1 and [p.name for p in kept.iterdir()] == [good]
    assert setup_kernels.keep(cache, kept) == 0  # kept already
    (kept / "cccccccccccccccccccccccccccccccccccccccc.cubin").symlink_to("/etc/passwd")
    fresh = tmp_path / "fresh"
    assert setup_kernels.seed(fresh, kept) == 1 and [p.name for p in fresh.iterdir()] == [good]
    assert (fresh / good).read_bytes() == b"kernel"
    assert setup_kernels.seed(tmp_path / "empty", None) == 0 and (tmp_path / "empty").is_dir()


def _env_with_root() -> dict[str, str]:
    """This environment, with the project's root first on PYTHONPATH (for `python -c`)."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}


def _python(script: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(script)], capture_output=True, text=True,
                          timeout=timeout, env=_env_with_root(), cwd=ROOT)


# A parent whose own seccomp filter makes Landlock's system calls fail (ENOSYS, as on a kernel
# without it): the confined process inherits the filter, so it finds no Landlock.
WITHOUT_LANDLOCK = """
    import errno, json, sys, pyseccomp
    f = pyseccomp.SyscallFilter(pyseccomp.ALLOW)
    for name in ("landlock_create_ruleset", "landlock_add_rule", "landlock_restrict_self"):
        f.add_rule(pyseccomp.ERRNO(errno.ENOSYS), name)
    f.load()
    from worker.launch.launcher_call import run_confined_call
    o = run_confined_call(sys.argv[1] if len(sys.argv) > 1 else {library!r}, hook={CPU!r}, require={require},
                          timeout_s=60)
    print(json.dumps({{"kind": o.kind, "message": o.message, "confinement": o.confinement}}))
"""


def test_without_landlock_the_job_is_refused_unless_the_caller_says_warn(world):
    library = str(world.library("read_files"))
    refused = json.loads(_python(WITHOUT_LANDLOCK.format(library=library, require=True, CPU=CPU)).stdout)
    assert refused["kind"] == REFUSED and "cannot be confined" in refused["message"], refused
    assert "Landlock is not available" in refused["message"]
    warned = json.loads(_python(WITHOUT_LANDLOCK.format(library=library, require=False, CPU=CPU)).stdout)
    assert warned["kind"] == RETURNED, warned
    assert "NOT applied: Landlock is not available" in warned["confinement"]
    assert "seccomp:" in warned["confinement"]  # what could be applied was


def test_confine_keeps_open_files_and_threads_and_refuses_the_rest(tmp_path):
    """What the GPU process relies on: descriptors opened at set-up (/dev/nvidia*) stay usable,
    threads can still be made; a path outside the allowance and a fork cannot."""
    opened = tmp_path / "opened_before"
    opened.write_text("still readable\n")
    result = _python(f"""
        import json, os, threading  # before confine(): afterwards no module can be read
        from worker.launch.host_jail import Allowance, confine
        fd = os.open({str(opened)!r}, os.O_RDONLY)
        c = confine(Allowance(readable=("/usr/share/zoneinfo",)))
        out = {{"fd": os.read(fd, 100).decode(), "describe": c.describe()}}
        try:
            open({str(opened)!r}).read()
            out["again"] = "opened"
        except PermissionError:
            out["again"] = "refused"
        t = threading.Thread(target=lambda: out.setdefault("thread", "ran")); t.start(); t.join()
        try:
            os.fork(); out["fork"] = "forked"
        except PermissionError:
            out["fork"] = "refused"
        out["zoneinfo"] = os.path.isdir("/usr/share/zoneinfo/Europe")
        print(json.dumps(out))
    """)
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert out == {"fd": "still readable\n", "describe": out["describe"], "again": "refused", "thread": "ran",
                   "fork": "refused", "zoneinfo": True}, result.stderr
    assert "Landlock ABI" in out["describe"] and "seccomp" in out["describe"]


def test_threads_made_before_confine_keep_their_rights_without_tsync():
    """Why the confined process puts a first Landlock layer in place before its set-up: before
    ABI 8, confine() restricts the calling thread (and the threads it makes), not the threads that
    already exist. It says so; the seccomp filter, synchronised, does hold them."""
    result = _python("""
        import json, os, socket, threading
        from worker.launch.host_jail import Allowance, confine
        go, out = threading.Event(), {}
        def older():
            go.wait()
            try:
                out["read"] = open("/etc/passwd").read(4)
            except PermissionError:
                out["read"] = "refused"
            try:
                socket.socket(); out["socket"] = "made"
            except PermissionError:
                out["socket"] = "refused"
        t = threading.Thread(target=older); t.start()
        out["describe"] = confine(Allowance()).describe()
        go.set(); t.join()
        print(json.dumps(out))
    """)
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["socket"] == "refused"
    if landlock_abi() >= 8:
        assert out["read"] == "refused"
    else:
        assert out["read"] == "root"
        assert "1 other thread(s) keep the Landlock domain they had" in out["describe"]


def test_a_confined_launcher_dies_with_its_parent(world):
    """Its parent killed mid-call (the worker gone), the spinning launcher goes too, at once."""
    parent = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(f"""
            from worker.launch.launcher_call import run_confined_call
            run_confined_call({str(world.library('spin'))!r}, hook={CPU!r}, timeout_s=600)
        """)], env=_env_with_root(), cwd=ROOT)
    try:
        child = _wait_for(lambda: _children(parent.pid), "the confined process to start")[0]
        parent.kill()
        parent.wait(timeout=60)
        _wait_for(lambda: not _alive(child), "the confined process to die with its parent")
    finally:
        parent.kill()
        parent.wait(timeout=60)


def _wait_for(condition, what: str, limit_s: float = 60.0):
    """Poll a state until it holds (never a sleep that orders anything: the loop only waits)."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"  # a zombie has died; its reaper (init here) may take a moment


# --- on a GPU: the same process with CuPy's set-up, and launchers built by nvcc ---------------

GPU_HOOK = f"{FIXTURES / 'hooks.py'}:CupyGemm"
GPU_SIZE = {"M": 96, "N": 80, "K": 72}


def _gpu_ready() -> bool:
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0 and shutil.which("nvcc") is not None
    except Exception:
        return False


@pytest.fixture(scope="module")
def gpu_build(world):
    if not _gpu_ready():
        pytest.skip("needs a CUDA GPU, CuPy and nvcc")
    build = world.build / "gpu"
    build.mkdir(exist_ok=True)
    for source in sorted((FIXTURES / "gpu").glob("*.cu")):
        subprocess.run(["nvcc", "-shared", "-Xcompiler", "-fPIC", "-O2", f'-DSECRET_PATH="{world.data / "api-token"}"',
                        "-o", str(build / f"{source.stem}.so"), str(source)], check=True, capture_output=True,
                       timeout=300)
    return build


def gpu_call(library: Path, *, timeout_s: float = 120, **args) -> CallOutcome:
    return run_confined_call(library, hook=GPU_HOOK, hook_args={**GPU_SIZE, "alpha": 0.75, "beta": -0.5, "seed": 5,
                                                                **args}, timeout_s=timeout_s)


def assert_next_gpu_job_correct(gpu_build: Path) -> None:
    outcome = gpu_call(gpu_build / "gemm.so")
    assert outcome.kind == RETURNED, outcome
    assert outcome.result["max_error"] < 1e-3, outcome.result["max_error"]


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["gemm", "workspace"])
def test_gpu_a_launcher_built_by_nvcc_computes_c_confined(gpu_build, name):
    """Built for nvcc's default target (sm_75), so the driver JIT-compiles its PTX at the first
    launch, confined; `workspace` allocates device memory of its own in the call."""
    outcome = gpu_call(gpu_build / f"{name}.so")
    assert outcome.kind == RETURNED, outcome
    assert outcome.result["max_error"] < 1e-3
    for measure in ("seccomp:", "read/write/ioctl of /dev/nvidia", "at set-up, Landlock"):
        assert measure in outcome.confinement, outcome.confinement
    assert "NOT applied" not in outcome.confinement, outcome.confinement  # every thread under a layer


@pytest.mark.gpu
def test_gpu_host_code_that_reaches_out_is_refused_and_its_gemm_is_still_right(world, gpu_build):
    outcome = gpu_call(gpu_build / "reads_then_launches.so", tail_reserved=4)
    assert outcome.kind == RETURNED, outcome
    assert outcome.result["C"][-4:] == [EACCES, EACCES, EPERM, EPERM]
    assert outcome.result["max_error"] < 1e-3
    assert_contained(world, outcome)


@pytest.mark.gpu
def test_gpu_a_host_callback_on_cudas_own_thread_reads_nothing(world, gpu_build):
    outcome = gpu_call(gpu_build / "host_callback.so", tail_reserved=GPU_SIZE["M"] * GPU_SIZE["N"])
    assert outcome.kind == RETURNED, outcome
    assert outcome.result["C"][2] == 0.0  # cudaSuccess: the callback was queued, and ran
    assert outcome.result["C"][:2] == [EACCES, EACCES]
    assert_contained(world, outcome)


@pytest.mark.gpu
def test_gpu_a_device_reset_costs_its_case_only(world, gpu_build):
    outcome = gpu_call(gpu_build / "reset_device.so")
    assert outcome.kind in (AFTER_CALL_FAILED, CRASHED), outcome
    assert_next_gpu_job_correct(gpu_build)


@pytest.mark.gpu
@pytest.mark.parametrize("name,kind,words", [("segfault", CRASHED, "SIGSEGV"), ("exit_zero", EXITED, "exit(0)"),
                                             ("spin", TIMED_OUT, "ran past its 3 s limit")])
def test_gpu_a_launcher_that_dies_or_spins_in_a_cuda_process_costs_its_case_only(world, gpu_build, name, kind, words):
    outcome = gpu_call(world.library(name), timeout_s=3 if name == "spin" else 120)
    assert outcome.kind == kind and words in outcome.message, outcome
    assert_contained(world, outcome)
    assert_next_gpu_job_correct(gpu_build)
