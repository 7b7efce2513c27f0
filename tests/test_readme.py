"""A newcomer's first ten minutes, as README.md tells them: in a fresh copy of the repository,
`make up PORT=...` in the background, then every shell example of the README verbatim (read
from README.md's code blocks, so an example that stops working fails here), then the command
the empty front page suggests. All must work; on a machine without a GPU a job fails with
"no CUDA device", which is what the README says happens there.

The copy is made from the working tree (tracked and new files, as a commit would have them)
and committed in a git repository of its own, as a clone would be. It uses this test run's
virtualenv (a symlink: a second install would take a minute and the network), so `make`'s
install step must already be up to date there; the test checks that before it runs anything.
"""

import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from tests.conftest import HAVE_GPU, HTTP_TIMEOUT_S, ROOT
from tests.parallel import free_port
from tests.readme_examples import PRELUDE, front_page_hint, runnable, shell_blocks

VENV = Path(os.environ.get("VIRTUAL_ENV") or Path(os.sys.executable).parent.parent)


def fresh_copy(dest: Path) -> Path:
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, check=True,
                           capture_output=True).stdout.decode().split("\0")
    for name in filter(None, files):
        src = ROOT / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)  # with its time: make compares it with the venv's stamp
    (dest / ".venv").symlink_to(VENV)
    git = ["git", "-c", "user.name=readme", "-c", "user.email=readme@test", "-c", "commit.gpgsign=false"]
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=dest, check=True)
    subprocess.run(["git", "add", "-A"], cwd=dest, check=True)
    subprocess.run([*git, "commit", "-q", "-m", "fresh copy"], cwd=dest, check=True)
    return dest


def shell_env(repo: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("GEMMWATCH_", "FAKE_GPU_")) and k not in ("DATABASE_URL", "BROKER_URL", "VIRTUAL_ENV")}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if not p.startswith(str(VENV)))
    env["GEMMWATCH_README_HAVE_GPU"] = "1" if HAVE_GPU else ""
    env["COLUMNS"] = "80"
    return env


def run_example(repo: Path, text: str, env: dict[str, str], what: str) -> str:
    done = subprocess.run(["bash", "-c", PRELUDE + text], cwd=repo, env=env, capture_output=True, text=True,
                          timeout=300)
    output = done.stdout + done.stderr
    assert done.returncode == 0, f"{what} failed (exit {done.returncode}):\n{text}\n--- output ---\n{output}"
    return output


@pytest.fixture
def made_up(tmp_path):
    """`make up PORT=...` in a fresh copy, in the background; yields (copy, base URL)."""
    repo = fresh_copy(tmp_path / "gemmwatch")
    env = shell_env(repo)
    stale = subprocess.run(["make", "-q", "install"], cwd=repo, env=env)
    assert stale.returncode == 0, "this run's virtualenv is older than pyproject.toml: run `make install` first"
    port = free_port()
    log = open(tmp_path / "make-up.log", "wb")
    # A session of its own, so the whole of make, gemmwatch up and its workers is stopped as one.
    up = subprocess.Popen(["make", "up", f"PORT={port}"], cwd=repo, env=env, stdout=log, stderr=subprocess.STDOUT,
                          start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 240  # a loaded machine starts `make up` slowly
        while True:
            try:
                if httpx.get(f"{base}/healthz", timeout=5).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert up.poll() is None, f"make up exited:\n{(tmp_path / 'make-up.log').read_text()}"
            assert time.monotonic() < deadline, f"make up did not serve in 240 s:\n{(tmp_path / 'make-up.log').read_text()}"
            time.sleep(0.1)
        yield repo, base, env
    finally:
        os.killpg(up.pid, signal.SIGTERM)
        try:
            up.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(up.pid, signal.SIGKILL)
            up.wait()


def test_every_readme_example_runs_verbatim_after_make_up(made_up):
    repo, base, env = made_up
    # `make up` says where it serves, for the CLI and the examples to find it.
    assert (repo / ".gemmwatch" / "server").read_text().strip() == base
    readme = (repo / "README.md").read_text()
    assert [b.where for b in shell_blocks(readme)][0] == "setup", "the README starts with `make up` and `make test`"
    assert re.search(r"^make up\b", shell_blocks(readme)[0].text, re.M)
    examples = runnable(readme)
    assert len(examples) >= 3, "the README's examples were not found"
    outputs = [run_example(repo, block.text, env, f"README.md example at line {block.line}") for block in examples]

    # What the examples say they do, checked on the server they talked to.
    jobs = httpx.get(f"{base}/api/jobs", timeout=HTTP_TIMEOUT_S).json()
    assert jobs, "the examples posted no job"
    by_id = {j["id"]: j for j in jobs}
    assert by_id[2]["queue"] == "gpu.H100" and by_id[2]["status"] == "cancelled"  # the README's cancel example
    # The import example: an nvbench run stored whole as a posted run, under its commit, in nvbench's modes.
    imported = [j for j in jobs if j["queue"] == "posted"]
    assert [j["status"] for j in imported] == ["succeeded"], imported
    results = httpx.get(f"{base}/api/results", params={"sha": "5e1d2b7"}, timeout=HTTP_TIMEOUT_S).json()
    assert len(results) == 12 and {r["mode"] for r in results} == {"nvbench:cold", "nvbench:batch"}, results
    if not HAVE_GPU:
        assert {j["status"] for j in jobs if j["queue"] != "posted"} <= {"failed", "cancelled", "queued"}, jobs
        assert by_id[1]["status"] == "failed" and by_id[1]["error"].startswith("no CUDA device")
        # The job for an H100 said at once why it waits: in the POST's answer and from `gemmwatch submit`.
        said = [out for out in outputs if "waiting: no live worker serves gpu.H100; last seen never" in out]
        assert len(said) == 2, outputs

    # The command the front page suggests while it has no result to show works too. (The imported
    # run, and on a GPU machine the jobs, are results by now: the hint is read from an empty install.)
    page = httpx.get(f"{base}/", timeout=HTTP_TIMEOUT_S).text
    hint = front_page_hint(empty_front_page(repo) if "gemmwatch submit" not in page else page)
    run_example(repo, ". .venv/bin/activate\n" + hint, env, f"the front page's hint `{hint}`")


def empty_front_page(repo: Path) -> str:
    from fastapi.testclient import TestClient

    from api.app import create_app
    from core.records.db import upgrade_database
    from core.settings import Settings

    cfg = Settings(GEMMWATCH_DATA_DIR=str(repo / "empty"))
    upgrade_database(cfg)
    return TestClient(create_app(cfg)).get("/").text
