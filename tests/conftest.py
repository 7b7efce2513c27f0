"""Shared fixtures: real PostgreSQL, SQLite, Redis and Celery worker processes.

The test command (`make test`) starts Redis and PostgreSQL first; if they are still not
reachable these fixtures fail loudly rather than skip. Only the GPU is replaced, by
tests/fake_gpu.py, and only where no GPU exists; `gpu`-marked tests skip there.

`make test` runs the tests in pytest-xdist workers side by side; tests/parallel.py says what
each worker owns (its Redis database, its ports) so that they never meet.
"""

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import psycopg
import pytest
import redis
from fastapi.testclient import TestClient

from api.app import create_app
from core.records.db import upgrade_database
from core.settings import Settings
from cli.local_stack import die_with_parent
from tests import parallel
from tests.parallel import free_port  # noqa: F401 (the tests import it from here)

ROOT = Path(__file__).resolve().parent.parent
PG_ADMIN_DSN = os.environ.get("GEMMWATCH_TEST_PG", "postgresql://postgres@127.0.0.1:5432/postgres")
REDIS_URL = parallel.redis_url()  # this xdist worker's own database (GEMMWATCH_TEST_REDIS)
FAKE_RUNNER = "tests.fake_gpu:CpuRunner"
# Every test's HTTP client waits this long for an answer (httpx's default, 5 s, is shorter than a
# loaded 2-core machine's first POST /api/jobs: two ReadTimeouts in a fresh-clone `make test`).
HTTP_TIMEOUT_S = 120


def cuda_available() -> bool:
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:
        return False


HAVE_GPU = cuda_available()


def pytest_collection_modifyitems(config, items):
    skip = pytest.mark.skip(reason="needs a CUDA GPU (runs on the lent H100)")
    for item in items:
        if "gpu" in item.keywords and not HAVE_GPU:
            item.add_marker(skip)
    # Longest first (every xdist worker collects the same order): the short tests then fill the
    # workers' gaps instead of one long test running alone at the end of the run.
    items.sort(key=lambda item: "long" not in item.keywords)


@pytest.fixture(scope="session")
def shared_kernel_cache(tmp_path_factory) -> Path:
    """One compile cache for this test run, shared by its xdist workers (GEMMWATCH_KERNEL_CACHE_DIR):
    the tests that compile every built-in at every configuration (tests/test_kernel_compile.py, and
    a worker's jobs in tests/test_kernel_paths.py) compile each once per run. It starts empty each
    run; worker/compile/compiler.py keys it by content and writes it atomically, so workers racing on one
    kernel both write the same bytes. Tests of the cache itself keep their own."""
    base = tmp_path_factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base  # xdist: popen-gwN under the run's folder
    path = root / "kernel-cache"
    path.mkdir(exist_ok=True)
    return path


@pytest.fixture
def redis_url() -> str:
    """This xdist worker's Redis database, emptied for each test: a message a stopped worker left
    unacknowledged, or a queue another test filled, must not reach this test's workers (job ids
    start at 1 in every test's database)."""
    client = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=3)
    try:
        client.flushdb()
    except redis.RedisError as exc:
        pytest.fail(f"Redis is not reachable at {REDIS_URL} ({exc}); run the tests with `make test`", pytrace=False)
    return REDIS_URL


def _pg_admin():
    try:
        return psycopg.connect(PG_ADMIN_DSN, autocommit=True, connect_timeout=5)
    except psycopg.Error as exc:
        pytest.fail(f"PostgreSQL is not reachable at {PG_ADMIN_DSN} ({exc}); run the tests with `make test`", pytrace=False)


@pytest.fixture
def pg_url():
    """A fresh, empty PostgreSQL database for one test, dropped afterwards."""
    name = f"gemmwatch_test_{uuid.uuid4().hex[:12]}"
    with _pg_admin() as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    base = PG_ADMIN_DSN.rsplit("/", 1)[0].replace("postgresql://", "postgresql+psycopg://", 1)
    yield f"{base}/{name}"
    from core.records.db import engine_for

    engine_for.cache_clear()
    with _pg_admin() as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def sqlite_url(tmp_path):
    return f"sqlite:///{tmp_path / 'gemmwatch.db'}"


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request):
    """Each test that takes this runs once on SQLite and once on PostgreSQL."""
    return request.getfixturevalue({"sqlite": "sqlite_url", "postgresql": "pg_url"}[request.param])


def make_settings(tmp_path, database_url: str, broker_url: str | None = None, **extra) -> Settings:
    values = {"GEMMWATCH_DATA_DIR": str(tmp_path / "data"), "DATABASE_URL": database_url}
    if broker_url:
        values["BROKER_URL"] = broker_url
    values.update(extra)
    return Settings(**values)


@pytest.fixture
def cfg(tmp_path, database_url) -> Settings:
    """Settings on a migrated database, with the embedded (filesystem) broker."""
    settings = make_settings(tmp_path, database_url)
    upgrade_database(settings)
    return settings


def make_client(cfg: Settings, token_name: str = "tests") -> TestClient:
    """A client of the real app that writes with a real token (created in cfg's database)."""
    from core.records.tokens import create_token
    from core.records.db import session_factory

    with session_factory(cfg)() as db:
        token = create_token(db, token_name)
    return TestClient(create_app(cfg), headers={"Authorization": f"Bearer {token}"})


@pytest.fixture
def client(cfg) -> TestClient:
    return make_client(cfg)


class WorkerProcess:
    """A real `celery worker` process, as `gemmwatch worker` would run it."""

    def __init__(self, env: dict[str, str], queues: str, log_path: Path, host: str = "%h"):
        self.name = f"test-{uuid.uuid4().hex[:8]}"
        self.host = host  # the node's host name as the fleet sees it (%h: this machine's)
        self.env = env
        self.log_path = log_path
        self.queues = queues
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 240) -> "WorkerProcess":  # a loaded 2-core machine starts one slowly
        from cli.local_stack import worker_command

        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            worker_command(self.queues.split(","), self.name, host=self.host), cwd=ROOT, env=self.env, stdout=log,
            stderr=log, preexec_fn=die_with_parent,  # a killed test run leaves no worker taking others' jobs
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"celery worker exited with {self.proc.returncode}:\n{self.log()}")
            if b"ready." in self.log_path.read_bytes():
                return self
            time.sleep(0.05)  # a read of a short log: cheap to look often
        raise RuntimeError(f"celery worker not ready after {timeout} s:\n{self.log()}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-5000:]

    def stop(self) -> None:
        self.terminate()
        self.wait()

    def terminate(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()

    def wait(self) -> None:
        if self.proc:
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def worker_env(cfg: Settings, runner: str | None = FAKE_RUNNER, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GEMMWATCH_", "FAKE_GPU_"))}
    env.update(
        GEMMWATCH_DATA_DIR=str(cfg.data_dir),
        DATABASE_URL=cfg.resolved_database_url,
        GEMMWATCH_CASE_TIME_CAP_S="0.3",
        GEMMWATCH_MIN_TIME_S="0",
        # Off unless a test asks (tests/test_warm_up.py): a warm-up's cases would meet a test's holds
        # and fake faults before its job does.
        GEMMWATCH_WARM_UP="0",
        PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        PYTHONUNBUFFERED="1",
    )
    if cfg.broker_url:
        env["BROKER_URL"] = cfg.broker_url
    if runner:
        env["GEMMWATCH_RUNNER"] = runner
    env.update(extra)
    return env


@pytest.fixture
def start_worker(tmp_path):
    """Start real Celery workers for a test; each is stopped when the test ends."""
    started: list[WorkerProcess] = []

    def start(cfg: Settings, queues: str = "gpu.any", runner: str | None = FAKE_RUNNER, host: str = "%h", **extra: str):
        w = WorkerProcess(worker_env(cfg, runner, **extra), queues, tmp_path / f"worker{len(started)}.log", host)
        started.append(w)
        return w.start()

    yield start
    for w in started:  # all asked to stop first, so their shutdowns overlap
        w.terminate()
    for w in started:
        w.wait()


@pytest.fixture
def hold(tmp_path):
    """A hold on the CPU double's cases (tests/fake_gpu.py Hold, FAKE_GPU_HOLD_DIR): start a worker with
    **hold.env, wait with hold.reached(n) for case n to be held, hold.release(n) to let it go on. Name it
    after start_worker: its teardown releases every case first, so no stopping worker waits on one."""
    from tests.fake_gpu import Hold

    h = Hold(tmp_path / "hold")
    yield h
    h.release()


def wait_for_job(client: TestClient, job_id: int, timeout: float = 180, until=("succeeded", "failed", "cancelled")):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = client.get(f"/api/jobs/{job_id}").json()
        if job["status"] in until:
            return job
        time.sleep(0.1)
    raise AssertionError(f"job {job_id} still {job['status']} after {timeout} s: {job}")


@pytest.fixture
def live_server(tmp_path):
    """Start the real app under uvicorn for a test (the CLI speaks HTTP); yields its base URL."""
    import httpx

    procs = []

    def start(cfg: Settings, processes: int = 1, **extra_env: str) -> str:
        port = free_port()
        env = worker_env(cfg, runner=None, **extra_env)  # e.g. GEMMWATCH_AUTH_READS="true"
        log = open(tmp_path / f"server{len(procs)}.log", "ab")
        proc = subprocess.Popen([sys.executable, "-m", "cli.main", "serve", "--port", str(port), "--processes", str(processes)],
                                cwd=ROOT, env=env, stdout=log, stderr=log, preexec_fn=die_with_parent)
        procs.append(proc)
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 240  # a loaded 2-core machine starts a server slowly
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                if httpx.get(f"{base}/healthz", timeout=HTTP_TIMEOUT_S).status_code == 200:
                    return base
            except httpx.HTTPError:
                time.sleep(0.05)
        raise RuntimeError(f"server did not start: {log.name}: {Path(log.name).read_text()}")

    start.procs = procs  # type: ignore[attr-defined]  # the servers' processes, for a test that ends one itself
    yield start
    for proc in procs:
        proc.terminate()
        proc.wait(20)


@pytest.fixture
def gpu_stack(tmp_path, sqlite_url, redis_url, start_worker):
    """A client of an API whose worker runs on this machine's real GPU (runner=None), with room for
    nvcc builds: the GPU tests that go through a job (tests/test_gpu_nvcc.py, test_gpu_forms.py)."""
    cfg = make_settings(tmp_path, sqlite_url, redis_url)
    upgrade_database(cfg)
    start_worker(cfg, runner=None, GEMMWATCH_CASE_TIME_CAP_S="1", GEMMWATCH_COMPILE_TIMEOUT_S="300")
    return make_client(cfg)
