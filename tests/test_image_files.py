"""The image the Dockerfile builds imports and serves, from its own files alone.

No Docker runs on the dev machines, so the image's file set is built here from the Dockerfile
itself: its WORKDIR and COPY lines, each source copied to the path the line copies it to, and
nothing else of the checkout. From that folder, with an interpreter that sees the project's
third-party packages but not the checkout (the virtualenv's editable install would import any
folder the image lacks straight from the checkout, hiding the fault), the test runs what
docker-compose.yml runs: `alembic upgrade head` (migrate), `gemmwatch serve` (api, polled on
/healthz, the dashboard and the variants read) and `gemmwatch worker` (worker-gpu0), which takes
a job and ends it: "no CUDA device" here, its results on a GPU machine.

An earlier image lacked core/, and the test that guarded it held the same stale folder list;
the mutated Dockerfiles below (the `COPY core core` line left out, ...) must fail.
"""

import glob
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
import time
from pathlib import Path, PurePosixPath

import httpx
import pytest
import yaml

from tests.conftest import HAVE_GPU, HTTP_TIMEOUT_S, ROOT, free_port

DOCKERFILE = (ROOT / "Dockerfile").read_text()
COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]


# -- the image's files, from the Dockerfile ---------------------------------------------------

def instructions(dockerfile: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) per instruction, continuation lines joined, comments dropped."""
    out, pending = [], ""
    for line in dockerfile.splitlines():
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        text, pending = (pending + line).strip(), ""
        word, _, rest = text.partition(" ")
        out.append((word.upper(), rest.strip()))
    return out


def _copy_args(rest: str) -> list[str]:
    if rest.startswith("["):
        args = json.loads(rest)
    else:
        args = shlex.split(rest)
    return [a for a in args if not a.startswith("--")]  # --chown=..., --chmod=..., --link


def _ignored(_dir, names):
    return [n for n in names if n == "__pycache__" or n.endswith(".pyc")]


def build_image_files(dockerfile: str, context: Path, root: Path) -> Path:
    """Lay out under `root` what the Dockerfile's COPY lines put in the image (from `context`, the
    build context); return the image's last WORKDIR under root (where its commands run)."""
    workdir = PurePosixPath("/")
    root.mkdir(parents=True)
    for word, rest in instructions(dockerfile):
        if word == "WORKDIR":
            workdir = workdir / rest  # an absolute WORKDIR replaces, a relative one nests
            (root / workdir.relative_to("/")).mkdir(parents=True, exist_ok=True)
        elif word in ("COPY", "ADD"):
            *sources, dest = _copy_args(rest)
            assert not any(s.startswith("--from") for s in sources), "multi-stage COPY: teach this test"
            target = root / (workdir / dest).relative_to("/")
            found = [Path(p) for s in sources for p in sorted(glob.glob(str(context / s)))]
            assert found, f"{word} {rest}: nothing in the build context matches"
            into_dir = dest.endswith("/") or len(found) > 1 or any(p.is_dir() for p in found)
            for src in found:
                if src.is_dir():  # a folder's contents go into dest
                    shutil.copytree(src, target, ignore=_ignored, dirs_exist_ok=True)
                else:
                    where = target / src.name if into_dir else target
                    where.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(src, where)
    return root / workdir.relative_to("/")


# -- an interpreter that has the dependencies but not the checkout -------------------------------

def image_python(where: Path) -> Path:
    """A virtualenv whose only addition is a .pth naming this project's site-packages: every
    dependency imports, but the editable install's hook (itself a .pth there, which Python reads
    only in a site folder, not in a folder a .pth names) never runs, so the checkout is not on
    the path. The processes it starts (Celery's worker: sys.executable) inherit the same view."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True, timeout=120,
                   capture_output=True)
    python = where / "bin" / "python"
    site = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    deps = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    Path(site, "gemmwatch_deps.pth").write_text("".join(f"{d}\n" for d in sorted(deps)))
    return python


def image_env(app: Path, data: Path, database_url: str, broker_url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("GEMMWATCH_", "FAKE_GPU_", "PYTHON", "DATABASE_URL", "BROKER_URL", "VIRTUAL_ENV"))}
    env.update(PYTHONPATH=str(app), PYTHONUNBUFFERED="1", PYTHONDONTWRITEBYTECODE="1",
               DATABASE_URL=database_url, BROKER_URL=broker_url, GEMMWATCH_DATA_DIR=str(data))
    return env


def compose_command(service: str) -> list[str]:
    """The service's command as docker-compose.yml runs it, its console script called as
    `python -m` (the image installs it; here the folder is on PYTHONPATH instead)."""
    cmd = list(COMPOSE[service]["command"])
    scripts = {"gemmwatch": ["-m", "cli.main"], "alembic": ["-m", "alembic"]}
    return [*scripts[cmd[0]], *cmd[1:]]


class Problem(AssertionError):
    pass


def run_image(dockerfile: str, tmp: Path, database_url: str, broker_url: str) -> str:
    """Build the file set, then migrate, serve and run a worker from it on PostgreSQL and Redis, as
    docker-compose.yml does; a Problem says what failed. Returns the worker's log."""
    app = build_image_files(dockerfile, ROOT, tmp / "image")
    python = image_python(tmp / "venv")
    env = image_env(app, tmp / "data", database_url, broker_url)

    # Nothing of the checkout is importable: tests/ is not in the image, core comes from the image.
    probe = subprocess.run(
        [python, "-c", "import importlib.util as u, sys; print(u.find_spec('tests')); "
                       "import cli.main; print(sys.modules['cli'].__file__)"],
        cwd=app, env=env, capture_output=True, text=True, timeout=120)
    if probe.returncode != 0:
        raise Problem(f"the image cannot import its CLI:\n{probe.stderr[-3000:]}")
    spec, cli_file = probe.stdout.split()
    assert spec == "None", f"the checkout's tests/ is importable from the image folder: {spec}"
    assert Path(cli_file).is_relative_to(app), cli_file

    migrate = subprocess.run([python, *compose_command("migrate")], cwd=app, env=env, capture_output=True,
                             text=True, timeout=180)
    if migrate.returncode != 0:
        raise Problem(f"migrate (`alembic upgrade head`) failed:\n{(migrate.stdout + migrate.stderr)[-3000:]}")

    port = free_port()
    serve_cmd = [*compose_command("api")]
    serve_cmd[serve_cmd.index("--port") + 1] = str(port)
    serve_cmd[serve_cmd.index("--host") + 1] = "127.0.0.1"
    procs: list[subprocess.Popen] = []
    logs = {name: tmp / f"{name}.log" for name in ("api", "worker")}
    try:
        procs.append(subprocess.Popen([python, *serve_cmd], cwd=app, env={**env, "WEB_CONCURRENCY": "1"},
                                      stdout=open(logs["api"], "wb"), stderr=subprocess.STDOUT))
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 90
        while True:
            try:
                if httpx.get(f"{base}/healthz", timeout=5).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if procs[0].poll() is not None:
                raise Problem(f"`gemmwatch serve` exited with {procs[0].returncode}:\n{logs['api'].read_text()[-3000:]}")
            if time.monotonic() > deadline:
                raise Problem(f"`gemmwatch serve` did not answer /healthz in 90 s:\n{logs['api'].read_text()[-3000:]}")
            time.sleep(0.1)
        for path in ("/", "/api/variants"):
            resp = httpx.get(base + path, timeout=HTTP_TIMEOUT_S)
            if resp.status_code != 200:
                raise Problem(f"GET {path}: {resp.status_code} {resp.text[:2000]}\n{logs['api'].read_text()[-3000:]}")
        assert "naive" in {v["name"] for v in httpx.get(f"{base}/api/variants", timeout=HTTP_TIMEOUT_S).json()}

        token = subprocess.run([python, "-m", "cli.main", "token", "create", "image-test"], cwd=app, env=env,
                               capture_output=True, text=True, timeout=120)
        if token.returncode != 0:
            raise Problem(f"`gemmwatch token create` failed:\n{token.stderr[-3000:]}")
        headers = {"Authorization": f"Bearer {token.stdout.strip()}"}

        procs.append(subprocess.Popen([python, *compose_command("worker-gpu0")], cwd=app, env=env,
                                      stdout=open(logs["worker"], "wb"), stderr=subprocess.STDOUT))
        posted = httpx.post(f"{base}/api/jobs", json={"variants": ["naive"], "sizes": [[64, 64, 64]]},
                            headers=headers, timeout=HTTP_TIMEOUT_S)
        assert posted.status_code == 202, posted.text
        job = posted.json()
        deadline = time.monotonic() + 120
        while job["status"] in ("queued", "running"):
            if procs[1].poll() is not None:
                raise Problem(f"`gemmwatch worker` exited with {procs[1].returncode}:\n{logs['worker'].read_text()[-3000:]}")
            if time.monotonic() > deadline:
                raise Problem(f"the worker did not end job {job['id']} in 120 s (still {job['status']}):\n"
                              f"{logs['worker'].read_text()[-3000:]}")
            time.sleep(0.2)
            job = httpx.get(f"{base}/api/jobs/{job['id']}", timeout=30).json()
        if HAVE_GPU:
            assert job["status"] == "succeeded", job
        else:
            assert job["status"] == "failed" and job["error"].startswith("no CUDA device"), job
        workers = httpx.get(f"{base}/api/workers", timeout=30).json()
        assert [w["queues"] for w in workers] and all("gpu.any" in w["queues"] for w in workers), workers
        return logs["worker"].read_text()
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


# -- the tests ------------------------------------------------------------------------------------

def test_the_dockerfile_is_read_as_docker_reads_it(tmp_path):
    """The parser itself: continuation lines, a folder's contents into its destination, files into
    a folder given with a slash, WORKDIR nesting."""
    (tmp_path / "ctx" / "pkg" / "sub").mkdir(parents=True)
    (tmp_path / "ctx" / "pkg" / "sub" / "m.py").write_text("x = 1\n")
    (tmp_path / "ctx" / "a.txt").write_text("a")
    (tmp_path / "ctx" / "b.txt").write_text("b")
    text = "FROM x\n# COPY nothing here\nWORKDIR /srv\nWORKDIR app\nCOPY a.txt \\\n  b.txt ./\nCOPY pkg lib\n" \
           "COPY [\"a.txt\", \"/etc/a.conf\"]\nRUN true\n"
    app = build_image_files(text, tmp_path / "ctx", tmp_path / "root")
    assert app == tmp_path / "root" / "srv" / "app"
    files = sorted(str(p.relative_to(tmp_path / "root")) for p in (tmp_path / "root").rglob("*") if p.is_file())
    assert files == ["etc/a.conf", "srv/app/a.txt", "srv/app/b.txt", "srv/app/lib/sub/m.py"]


def test_the_image_migrates_serves_and_runs_a_job_from_its_own_files(tmp_path, pg_url, redis_url):
    run_image(DOCKERFILE, tmp_path, pg_url, redis_url)


def _without(line: str) -> str:
    pattern = rf"^{re.escape(line)}\s*$\n"
    assert re.search(pattern, DOCKERFILE, re.M), f"the Dockerfile has no line {line!r} to leave out"
    return re.sub(pattern, "", DOCKERFILE, flags=re.M)


@pytest.mark.parametrize("left_out, says", [
    ("COPY core core", "No module named 'core'"),  # the image that once shipped
    ("COPY migrations migrations", "Path doesn't exist: migrations"),
    ("COPY kernels kernels", "No module named 'kernels'"),
])
def test_an_image_missing_a_folder_fails_this_check(tmp_path, pg_url, redis_url, left_out, says):
    with pytest.raises(Problem) as caught:
        run_image(_without(left_out), tmp_path, pg_url, redis_url)
    assert says in str(caught.value), str(caught.value)
