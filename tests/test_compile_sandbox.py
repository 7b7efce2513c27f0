"""Layers 2, 3 and 4 on their own: the compile step called directly, past layer 1.

NVRTC is a library that needs no GPU (its PyPI wheel is in the test extra), so these run on CI
with the real compiler, the real Landlock of this kernel and the real compile process. To show
what each layer does alone, some tests take Landlock away from the compile process the way a
machine without it would: its Landlock system calls answer ENOSYS (a seccomp filter its interpreter
loads as it starts, from tests/fixtures/without_landlock).
"""

import json
import os
import time
from pathlib import Path

import pytest

from core.settings import Settings
from tests.conftest import make_settings, wait_for_job
from worker.compile import compile_cache, compile_process, compiler
from core.description.gemm_form import GemmForm
from core.description.kernel import Launch
from tests.descriptions import one_file
from worker.compile.compiler import WITHHELD, CompileError, CompileRefused

WITHOUT_LANDLOCK = Path(__file__).parent / "fixtures" / "without_landlock"
CANARIES = {
    "DATABASE_URL": "postgresql+psycopg://gemmwatch:canary-db-password@db/gemmwatch",
    "BROKER_URL": "redis://:canary-broker-password@redis:6379/0",
    "GEMMWATCH_CANARY_SECRET": "canary-secret-value",
}
OPTIONS = ["-arch=sm_90", "-ftz=true", "-std=c++17"]
# A GEMM's parameters (the runner passes what the binary declares, and checks them against the roles).
KERNEL = ('extern "C" __global__ void k(int M, int N, int K, float alpha, const float *A, const float *B, float beta, '
          'float *x) { x[threadIdx.x] *= 2.0f; }\n')
# 2^26 distinct template instantiations: the compiler runs away (time and memory).
RUNAWAY = (
    "template<int N, unsigned M> struct T { __device__ static float f(float x) "
    "{ return T<N-1, 2*M>::f(x) + T<N-1, 2*M+1>::f(x); } };\n"
    "template<unsigned M> struct T<0, M> { __device__ static float f(float x) { return x + M; } };\n"
    'extern "C" __global__ void k(float *x) { x[0] = T<26, 0>::f(x[0]); }\n'
)


@pytest.fixture
def secrets(monkeypatch):
    """The worker's environment holds secrets, as a deployed worker's does."""
    for name, value in CANARIES.items():
        monkeypatch.setenv(name, value)
    return CANARIES


@pytest.fixture
def no_landlock(monkeypatch):
    """A machine without Landlock: every Python process started from here on (the compile process, a
    worker) answers Landlock's system calls with ENOSYS (tests/fixtures/without_landlock/sitecustomize.py)."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(WITHOUT_LANDLOCK), os.environ.get("PYTHONPATH")])))
    compile_process._probe.cache_clear()
    yield
    compile_process._probe.cache_clear()


def cfg(tmp_path, **extra) -> Settings:
    return Settings(GEMMWATCH_DATA_DIR=str(tmp_path / "data"), **extra)


def build(settings, source, untrusted=True, name="job.cu", names=()):
    return compiler.compile_kernel(source, name=name, options=OPTIONS, name_expressions=names,
                                   untrusted=untrusted, cfg=settings)


def assert_nothing_leaked(text: str) -> None:
    assert "root:x:0:0" not in text
    for value in CANARIES.values():
        assert value not in text
        assert value.split("@")[0].split(":")[-1] not in text  # not even the password alone


def test_this_machine_confines_the_compiler(tmp_path):
    confinement = compiler.probe(cfg(tmp_path))
    assert confinement.version, confinement.detail
    assert confinement.available, f"Landlock should be available on CI's kernel: {confinement.detail}"


@pytest.mark.parametrize("path", ["/etc/passwd", "/proc/self/environ", "/proc/1/environ"])
@pytest.mark.parametrize("untrusted", [True, False], ids=["filtered-log", "unfiltered-log"])
def test_an_include_past_layer_1_opens_nothing(tmp_path, secrets, path, untrusted):
    """Layer 2 alone holds: even with the log unfiltered (untrusted=False), nothing is read."""
    with pytest.raises(CompileError) as failed:
        build(cfg(tmp_path), f'#include "{path}"\n' + KERNEL, untrusted=untrusted)
    text = str(failed.value)
    assert "cannot open source file" in text and "Permission denied" in text
    assert_nothing_leaked(text)


def test_the_compile_process_holds_no_secrets_even_unconfined(tmp_path, secrets, no_landlock):
    """Without Landlock the include of /proc/self/environ does succeed (where the host lets a
    process read its own): the compile process's own environment is what it reads, and it holds
    none of the worker's settings."""
    settings = cfg(tmp_path, GEMMWATCH_UNCONFINED_SOURCES="warn")
    assert not compiler.probe(settings).available
    with pytest.raises(CompileError) as failed:
        build(settings, '#include "/proc/self/environ"\n' + KERNEL, untrusted=False)
    text = str(failed.value)
    assert_nothing_leaked(text)
    if 'cannot open source file "/proc/self/environ": Permission denied' in text:
        # Some hosts (a CI sandbox, /proc mounted with hidepid) deny the file to every process:
        # nothing leaked, but what the compile process holds was not read, so this proves nothing more.
        pytest.skip("this host denies /proc/self/environ to every process")
    assert "/proc/self/environ(" in text  # NVRTC did read it: the diagnostics are located there
    assert "HOME=" in text or "PATH=" in text


def test_the_compile_process_is_started_with_none_of_the_workers_settings(tmp_path, secrets, monkeypatch):
    """The same property read at its source, on every host: the environment the compile process
    is started with holds none of the worker's values (the /proc test above needs a host that lets
    a process read its own environ)."""
    started = []
    real_run = compile_process.subprocess.run

    def recording_run(argv, **kwargs):
        started.append(kwargs["env"])
        return real_run(argv, **kwargs)

    monkeypatch.setattr(compile_process.subprocess, "run", recording_run)
    with pytest.raises((CompileError, CompileRefused)):
        build(cfg(tmp_path, GEMMWATCH_UNCONFINED_SOURCES="warn"), "this is not C++\n" + KERNEL, untrusted=False)
    assert started, "no compile process was started"
    for env in started:
        assert "PATH" in env and "HOME" in env  # the few harmless variables it needs
        assert_nothing_leaked(" ".join(f"{k}={v}" for k, v in env.items()))
        assert not set(env) & set(CANARIES)


def test_layer_3_withholds_what_another_file_said(tmp_path, secrets, no_landlock):
    """With layers 1 and 2 gone, /etc/passwd is read by the compiler; its lines never reach the user."""
    settings = cfg(tmp_path, GEMMWATCH_UNCONFINED_SOURCES="warn")
    source = '__device__ int broken = ;\n#include "/etc/passwd"\n' + KERNEL
    with pytest.raises(CompileError) as failed:
        build(settings, source)
    text = str(failed.value)
    assert WITHHELD in text
    assert "root" not in text and "/bin/" not in text and "nologin" not in text
    assert "job.cu(1): error" in text  # the job's own diagnostic, with its own line number


def test_filter_log_keeps_own_lines_and_counts(tmp_path):
    log = ('job.cu(3): error: expected a ";"\n  int x\n       ^\n\n'
           '/etc/shadow(1): error: identifier "root" is undefined\n  root:$6$secret:19000\n  ^\n\n'
           '2 errors detected in the compilation of "job.cu".')
    text = compiler.filter_log(log, "job.cu")
    assert 'job.cu(3): error: expected a ";"' in text and "int x" in text
    assert "secret" not in text and "root" not in text
    assert text.count(WITHHELD) == 1
    assert text.endswith('2 errors detected in the compilation of "job.cu".')


def test_a_probe_that_got_no_answer_is_not_remembered(tmp_path, monkeypatch):
    """A worker whose first compile process could not load NVRTC (a busy or half-set-up
    machine) asks again next time instead of refusing every compile until it restarts."""
    broken = tmp_path / "no-nvrtc" / "cuda"
    broken.mkdir(parents=True)
    (broken / "__init__.py").write_text("raise ImportError('NVRTC missing for now')\n")
    settings = cfg(tmp_path)
    compile_process._probe.cache_clear()
    with monkeypatch.context() as m:
        m.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(broken.parent), os.environ.get("PYTHONPATH")])))
        found = compiler.probe(settings)
        assert found.version is None and "NVRTC missing for now" in found.detail
    assert compiler.probe(settings).version
    build(settings, KERNEL)


def test_without_confinement_job_sources_are_refused_by_default(tmp_path, no_landlock):
    with pytest.raises(CompileRefused, match="GEMMWATCH_UNCONFINED_SOURCES=warn"):
        build(cfg(tmp_path), KERNEL)
    build(cfg(tmp_path), KERNEL, untrusted=False)  # our own registry sources still compile


def test_a_runaway_compile_ends_at_its_own_time_limit(tmp_path):
    started = time.monotonic()
    with pytest.raises(CompileRefused, match="2 s compile time limit"):
        build(cfg(tmp_path, GEMMWATCH_COMPILE_TIMEOUT_S=2), RUNAWAY)
    assert time.monotonic() - started < 15


def test_a_runaway_compile_ends_by_itself_when_nobody_waits_for_it(tmp_path):
    """The GPU process may be killed at its case time limit while it waits for a compile: the
    compile process, orphaned, still ends at its own CPU limit instead of running on."""
    import json
    import subprocess

    started = time.monotonic()
    proc = subprocess.Popen(compile_process.sandbox_command(timeout_s=2, memory_mb=4096), stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path, text=True)
    request = {"source": RUNAWAY, "name": "job.cu", "options": OPTIONS, "name_expressions": [],
               "require_confinement": False}
    # Its limit is CPU time: 2 s of it can take minutes of wall time on a loaded 2-core machine (34 s was seen
    # beside a busy suite), so the wait is generous; a compile that ran on would still be cut off here.
    try:
        proc.communicate(json.dumps(request), timeout=240)  # no timeout of ours cuts it short before
    finally:
        proc.kill()
    assert proc.returncode < 0  # killed by a signal (SIGXCPU or SIGKILL), not finished
    assert time.monotonic() - started < 240


def test_a_runaway_compile_ends_at_its_memory_limit(tmp_path):
    with pytest.raises((CompileError, CompileRefused), match="out of memory|memory limit"):
        build(cfg(tmp_path, GEMMWATCH_COMPILE_MEMORY_MB=512, GEMMWATCH_COMPILE_TIMEOUT_S=120), RUNAWAY)


def test_a_compiled_module_comes_from_the_cache_the_second_time(tmp_path):
    settings = cfg(tmp_path)
    source = "template<int N> __global__ void scale(float *x) { x[threadIdx.x] *= N; }\n"
    first = build(settings, source, names=("scale<3>",))
    again = build(settings, source, names=("scale<3>",))
    other = compiler.compile_kernel(source, name="job.cu", options=OPTIONS + ["-DX=1"], name_expressions=("scale<3>",),
                                    untrusted=True, cfg=settings)
    assert not first.cached and again.cached and not other.cached
    assert again.cubin_path == first.cubin_path and other.cubin_path != first.cubin_path
    assert first.lowered["scale<3>"].startswith("_Z") and first.cubin_path.read_bytes()[:4] == b"\x7fELF"


def test_a_cache_entry_an_older_worker_wrote_is_built_again_and_then_served(tmp_path):
    """An entry's record names its format: one written before the reply said what it says now
    (here, the same record less its format) is not read as if it did."""
    settings = cfg(tmp_path)
    first = build(settings, KERNEL)
    record = first.cubin_path.with_suffix(".json")
    older = json.loads(record.read_text())
    assert older.pop("format") == compile_cache.ENTRY_FORMAT
    record.write_text(json.dumps({**older, "lowered": {"stale": "yes"}}))
    rebuilt = build(settings, KERNEL)
    assert not rebuilt.cached and "stale" not in rebuilt.lowered
    assert json.loads(record.read_text())["format"] == compile_cache.ENTRY_FORMAT
    assert build(settings, KERNEL).cached


def test_compile_errors_keep_their_line_numbers(tmp_path):
    with pytest.raises(CompileError) as failed:
        build(cfg(tmp_path), "\n\n" + KERNEL.replace("*= 2.0f;", "*= 2.0f"))
    assert "job.cu(3): error" in str(failed.value)


@pytest.fixture
def stack(tmp_path, pg_url, redis_url, start_worker):
    from core.records.db import upgrade_database
    from tests.conftest import make_client

    settings = make_settings(tmp_path, pg_url, redis_url)
    upgrade_database(settings)
    return settings, make_client(settings)


def job_with(client, text):
    body = {"sources": [one_file("mine", text, "k", [32], [1, 32])], "sizes": [[8, 8, 8]]}
    resp = client.post("/api/jobs", json=body)
    assert resp.status_code == 202, resp.text
    return wait_for_job(client, resp.json()["id"], timeout=90)


LAYER_ONE_BYPASS = """\
# Loaded by a test worker's interpreter (tests/test_compile_sandbox.py): layer 1 made to pass
# everything, as a spelling the guard does not know would, so that layers 2 and 3 are seen alone.
import json
import os
if os.environ.get("GEMMWATCH_TEST_SKIP_LAYER_ONE") == "1":
    from core.description import kernel_includes, source_guard
    kernel_includes.resolve = lambda files, source, include_dirs=(), compiler="nvrtc", units=(): kernel_includes.Headers({}, False)
"""


@pytest.fixture
def past_layer_one(tmp_path):
    """Environment for a worker whose layer 1 lets everything through (never the compile
    process's: its environment holds no GEMMWATCH_* variable, and it imports nothing of ours)."""
    folder = tmp_path / "bypass"
    folder.mkdir()
    (folder / "sitecustomize.py").write_text(LAYER_ONE_BYPASS)
    from tests.conftest import ROOT

    return {"PYTHONPATH": os.pathsep.join(filter(None, [str(folder), str(ROOT), os.environ.get("PYTHONPATH")])),
            "GEMMWATCH_TEST_SKIP_LAYER_ONE": "1"}


def job_past_layer_1(settings, client, text: str, entry: str = "k", **stored: object) -> dict:
    """A job stored and queued as the API would, without the API's check (layer 1): what a
    way past the guard, or a write straight to the database, would hand the worker."""
    from core.jobs.broker import enqueue_job, queue_for
    from core.records.db import session_factory
    from core.records.models import Job

    source = {**one_file("mine", text, entry, [32, 1, 1], [1, 32]), **stored}
    with session_factory(settings)() as db:
        job = Job(status="queued", kind="bench", variants=["mine"], sizes=[[8, 8, 8]], tunables={}, sources=[source],
                  queue=queue_for(None), progress_total=1)
        db.add(job)
        db.commit()
        job_id, queue = job.id, job.queue
    enqueue_job(job_id, queue, settings)
    return wait_for_job(client, job_id, timeout=90)


def test_a_stored_job_with_a_hostile_include_is_refused_by_the_worker_too(stack, start_worker):
    """A row written past the API meets layer 1 again in the worker: the job fails naming the
    include, and nothing is compiled."""
    settings, client = stack
    worker = start_worker(settings)
    job = job_past_layer_1(settings, client, '#include "/proc/self/environ"\n' + KERNEL)
    assert job["status"] == "failed" and "mine.cu, line 1" in job["error"] and "#include" in job["error"], job
    assert "cannot open source file" not in job["error"] and "compile error" not in job["error"]
    assert_nothing_leaked(worker.log())


def test_a_job_that_gets_past_layer_1_leaks_nothing_into_its_error_or_the_logs(stack, start_worker, past_layer_one):
    """Must-show 1 on CI: the worker holds secrets in its environment; a job whose source
    includes /proc/self/environ (and /etc/passwd) reaches the compile step (layer 1 taken out of
    the worker) and fails with neither file's content nor any secret in its error or in the
    worker's log."""
    settings, client = stack
    # The worker's own DATABASE_URL and BROKER_URL are real here (it must reach them): they are
    # checked as they are, the other canaries as planted.
    worker = start_worker(settings, **{k: v for k, v in CANARIES.items() if not k.endswith("_URL")}, **past_layer_one)
    for path in ("/proc/self/environ", "/etc/passwd"):
        job = job_past_layer_1(settings, client, f'#include "{path}"\n' + KERNEL)
        assert job["status"] == "failed", job
        assert "cannot open source file" in job["error"] and "Permission denied" in job["error"]
        assert_nothing_leaked(job["error"])
        assert settings.resolved_database_url not in job["error"] and settings.broker_url not in job["error"]
    assert_nothing_leaked(worker.log())
    honest = job_past_layer_1(settings, client, KERNEL)  # and the worker goes on
    assert honest["status"] == "succeeded", honest["error"]


# A GPU target as a stored kernel could carry it (the registry's "arch"; a job's own source has no such
# field at the API, but a row written past it can): each would put NVRTC options of its own choosing
# beside -arch, or be read by NVRTC up to a NUL byte.
HOSTILE_TARGETS = ["sm_90 --include-path=/etc", "sm_90a -I/proc/self", "sm_90\x00 -I/etc", "sm_90a\n",
                   "--include-path=/etc", "compute_90", "sm_90a -default-device", ""]


def stored_launch(text: str = KERNEL, **fields) -> Launch:
    """A Launch as a row written past the API could make one: no field checked on the way."""
    base = dict(variant="mine", files={"mine.cu": text}, source="mine.cu", include_dirs=(), entry="k",
                args=("M", "N", "K", "alpha", "A", "B", "beta", "C"), form=GemmForm(), block=(32, 1, 1),
                grid_exprs=("tile", 1, 32, "n_first"), dynamic_smem_expr=0, defines={}, scope={})
    return Launch(**{**base, **fields})


@pytest.mark.parametrize("target", HOSTILE_TARGETS)
def test_a_target_that_is_not_one_never_reaches_nvrtc(tmp_path, target, monkeypatch):
    monkeypatch.setattr(compiler, "compile_kernel", lambda *a, **k: pytest.fail(f"{target!r} reached NVRTC"))
    spec = stored_launch('#include "passwd"\n' + KERNEL, target=target)
    with pytest.raises(CompileRefused, match="not a GPU target"):
        compiler.compile_launch(spec, "9.0", make_settings(tmp_path, f"sqlite:///{tmp_path}/x.db"))


# -D options as a stored row could carry them: a name with an option, a NUL or a newline in it, a
# value that is text (NVRTC took "-DBK=8 -I/etc" and "-DX\0 -I/etc" without complaint when tried).
HOSTILE_DEFINES = [{"BK": "8 -I/etc"}, {"X\x00 -I/etc": 1}, {"X --include-path=/etc": 1}, {"-I/etc": 1},
                   {"X\n": 1}, {"X": 1.5}, {"X": True}, {"": 1}, {"\uff38": 1}, {"X": "1\n-I/etc"}, {"X\u200b": 1}]


@pytest.mark.parametrize("defines", HOSTILE_DEFINES, ids=repr)
def test_a_define_that_is_not_name_equals_integer_never_reaches_nvrtc(tmp_path, defines, monkeypatch):
    monkeypatch.setattr(compiler, "compile_kernel", lambda *a, **k: pytest.fail(f"{defines!r} reached NVRTC"))
    spec = stored_launch(defines={"BK": 8, **defines})
    with pytest.raises(CompileRefused, match="not a -D NAME=integer"):
        compiler.compile_launch(spec, "9.0", make_settings(tmp_path, f"sqlite:///{tmp_path}/x.db"))


def test_a_stored_target_with_options_in_it_fails_its_job_and_compiles_nothing(stack, start_worker):
    settings, client = stack
    worker = start_worker(settings)
    job = job_past_layer_1(settings, client, KERNEL, target="sm_90 --include-path=/etc")
    assert job["status"] == "failed" and "the job's kernel 'mine': target" in job["error"], job
    assert "root:" not in job["error"] and "cannot open source file" not in job["error"]
    assert "compile" not in job["error"] and "root:" not in worker.log()


def test_a_runaway_compile_fails_its_job_through_a_real_worker(stack, start_worker):
    settings, client = stack
    start_worker(settings, GEMMWATCH_COMPILE_TIMEOUT_S="2", GEMMWATCH_CASE_TIMEOUT_S="60")
    job = job_with(client, RUNAWAY)
    assert job["status"] == "failed"
    assert "compile stopped: compile exceeded the 2 s compile time limit" in job["error"]


def test_a_worker_without_confinement_refuses_job_sources(stack, start_worker, no_landlock):
    settings, client = stack
    worker = start_worker(settings)
    job = job_with(client, KERNEL)
    assert job["status"] == "failed" and "cannot be confined" in job["error"]
    assert "cannot confine the compiler" in worker.log()  # said at start-up, not only per job


def test_a_part_the_source_names_itself_keeps_its_diagnostics(tmp_path):
    """The ladder's preludes reach a job behind #line markers; their diagnostics are the job's own."""
    source = '#line 1 "common.cuh"\n__device__ int broken = ;\n#line 1 "mine.cu"\n' + KERNEL
    with pytest.raises(CompileError) as failed:
        build(cfg(tmp_path), source, name="mine.cu")
    assert "common.cuh(1): error" in str(failed.value) and WITHHELD not in str(failed.value)


def test_a_cached_cubin_serves_a_job_the_log_filtered_for_a_job(tmp_path, no_landlock):
    """One of our kernels and a job's identical source share a cubin. The log that comes with it is
    filtered for whoever asks: the job never reads a line located in another file, even when
    ours compiled first and put it in the cache."""
    settings = cfg(tmp_path, GEMMWATCH_UNCONFINED_SOURCES="warn")
    elsewhere = tmp_path / "elsewhere.cuh"  # a file outside the job's own: unconfined, NVRTC reads it
    elsewhere.write_text("__device__ void elsewhere_secret() { int elsewhere_unused; }\n")
    source = f'#include "{elsewhere}"\n' + KERNEL
    ours = build(settings, source, untrusted=False)
    theirs = build(settings, source, untrusted=True)
    assert not ours.cached and theirs.cached and theirs.cubin_path == ours.cubin_path
    assert "elsewhere.cuh(1): warning" in ours.log  # what the cache holds: the raw log
    assert WITHHELD in theirs.log and "elsewhere" not in theirs.log


def test_a_compile_stopped_at_one_limit_is_tried_again_under_another(tmp_path):
    """A failure remembered at a 2 s time limit (issue 37, row 7) is not recalled where the limits
    differ: the same runaway source then meets the memory limit it was given."""
    with pytest.raises(CompileRefused, match="time limit"):
        build(cfg(tmp_path, GEMMWATCH_COMPILE_MEMORY_MB=4096, GEMMWATCH_COMPILE_TIMEOUT_S=2), RUNAWAY)
    with pytest.raises((CompileError, CompileRefused), match="out of memory|memory limit"):
        build(cfg(tmp_path, GEMMWATCH_COMPILE_MEMORY_MB=512, GEMMWATCH_COMPILE_TIMEOUT_S=120), RUNAWAY)
