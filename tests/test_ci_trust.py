"""Issue 37, row 9: `gemmwatch ci` (and `run --post`) takes its server, token and libraries from
its flags and the environment only, never from files of the checked-out tree (in CI, a pull
request's).

The tree commits a `.env` naming the attacker's data folder, server and libnvrtc, and that data
folder's `server` record (and `.gemmwatch/server`, the default data folder's); the attacker's
server is a listener of this test that records every request. `gemmwatch ci` runs there with the
CI's token in $GEMMWATCH_TOKEN: the listener must hear nothing, with or without $GEMMWATCH_SERVER.
"""

import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from core.records.db import session_factory
from core.records.tokens import create_token
from tests.conftest import FAKE_RUNNER, HTTP_TIMEOUT_S, ROOT

CI_TOKEN_NAME = "ci-runner"


@pytest.fixture
def attacker():
    """A listener on 127.0.0.1 that records each request's line and Authorization header."""
    heard: list[tuple[str, str | None]] = []

    class Recorder(BaseHTTPRequestHandler):
        def _record(self):
            heard.append((self.requestline, self.headers.get("Authorization")))
            self.send_response(404)
            self.end_headers()

        do_GET = do_POST = _record

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}", heard
    server.shutdown()


def hostile_tree(root: Path, attacker_url: str) -> Path:
    """A checked-out repository whose committed files point gemmwatch at the attacker."""
    root.mkdir()
    (root / ".env").write_text(f"GEMMWATCH_DATA_DIR=.attacker\nGEMMWATCH_SERVER={attacker_url}\n"
                               "GEMMWATCH_NVRTC_LIBRARY=./evil.so\nGEMMWATCH_NVCC=./evil-nvcc\n")
    for folder in (".attacker", ".gemmwatch"):
        (root / folder).mkdir()
        (root / folder / "server").write_text(attacker_url + "\n")
        (root / folder / "token").write_text("gw_the-attackers-own\n")
    git = ["git", "-c", "user.name=pr", "-c", "user.email=pr@test", "-c", "commit.gpgsign=false"]
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    subprocess.run(["git", "add", "-A"], cwd=root, check=True)
    subprocess.run([*git, "commit", "-q", "-m", "a pull request"], cwd=root, check=True)
    return root


def ci_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GEMMWATCH_")}
    return {**env, "PYTHONPATH": str(ROOT), **extra}


def gemmwatch_ci(tree: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "cli.main", "ci", "--commit", "ab12cd34", "--parents", "", "--variants", "naive",
           "--size", "64", "--timeout", "1", "--no-confirm", *args]
    return subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True, timeout=120)


def test_gemmwatch_ci_sends_the_token_nowhere_the_tree_names(tmp_path, cfg, live_server, attacker):
    attacker_url, heard = attacker
    tree = hostile_tree(tmp_path / "checkout", attacker_url)
    with session_factory(cfg)() as db:
        token = create_token(db, CI_TOKEN_NAME, scopes=("jobs",))

    # The CI forgot $GEMMWATCH_SERVER: refused, naming what to set, rather than sent to the record.
    alone = gemmwatch_ci(tree, ci_env(GEMMWATCH_TOKEN=token))
    assert alone.returncode == 2, alone.stdout + alone.stderr
    assert "--server or $GEMMWATCH_SERVER" in alone.stderr and "does not trust" in alone.stderr

    # With the CI's own server: the job goes there, under the CI's token.
    base = live_server(cfg)
    real = gemmwatch_ci(tree, ci_env(GEMMWATCH_TOKEN=token, GEMMWATCH_SERVER=base))
    assert real.returncode == 3, real.stdout + real.stderr  # no worker here: it times out waiting
    jobs = httpx.get(f"{base}/api/jobs", timeout=HTTP_TIMEOUT_S).json()
    assert [j["commit"]["sha"] for j in jobs] == ["ab12cd34"]

    assert heard == [], f"the attacker's server heard: {heard}"


def test_gemmwatch_run_post_follows_no_record_of_the_tree_either(tmp_path, attacker):
    """A self-hosted runner measuring a pull request's kernels: refused before it measures."""
    attacker_url, heard = attacker
    tree = hostile_tree(tmp_path / "checkout", attacker_url)
    cmd = [sys.executable, "-m", "cli.main", "run", "--variants", "naive", "--size", "32", "--post", "--commit", "ab12cd34"]
    run = subprocess.run(cmd, cwd=tree, env=ci_env(GEMMWATCH_TOKEN="gw_the-ci-secret", GEMMWATCH_RUNNER=FAKE_RUNNER),
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 2 and "--server or $GEMMWATCH_SERVER" in run.stderr, run.stdout + run.stderr
    assert "which gemmwatch run --post does not trust" in run.stderr, run.stderr  # its own name, not ci's
    assert heard == []


def test_no_setting_comes_from_a_dotenv_of_the_working_directory(tmp_path, attacker):
    tree = hostile_tree(tmp_path / "checkout", attacker[0])
    seen = subprocess.run(
        [sys.executable, "-c", "from core.settings import Settings; s = Settings();"
                               "print(s.data_dir, s.nvrtc_library, s.nvcc)"],
        cwd=tree, env=ci_env(), capture_output=True, text=True, check=True).stdout.split()
    assert seen == [".gemmwatch", "None", "None"]


def test_local_takes_the_server_and_token_gemmwatch_up_recorded(tmp_path, attacker):
    """--local is this machine's own `make up` (the README's example): its record and token are used."""
    attacker_url, heard = attacker
    tree = hostile_tree(tmp_path / "checkout", attacker_url)
    gemmwatch_ci(tree, ci_env(), "--local")
    assert heard and all(auth == "Bearer gw_the-attackers-own" for _, auth in heard)


def test_local_from_a_folder_without_a_record_says_where_it_looked(tmp_path):
    """`gemmwatch ci --local` run from another folder than `make up`'s: no record there, so no
    token either; it says so and where, rather than sending the job unsigned (a "401: 401: ...")."""
    done = gemmwatch_ci(tmp_path, ci_env(), "--local")
    assert done.returncode == 2, done.stdout + done.stderr
    said = " ".join((done.stdout + done.stderr).split())
    assert "--local reads the server and token `gemmwatch up` recorded" in said and ".gemmwatch" in said, said
    assert "401" not in said


def test_a_commit_named_as_git_names_it_is_taken_as_its_sha(tmp_path, monkeypatch):
    """`--commit HEAD` (or a branch) in a checkout is its sha; a name git does not know is refused
    before anything is posted, saying how to get one (it was the server's regex)."""
    from cli.ci import commit_sha

    tree = tmp_path / "tree"
    tree.mkdir()
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run(["git", "init", "-q"], cwd=tree, check=True)
    (tree / "a.txt").write_text("a\n")
    subprocess.run(["git", "add", "-A"], cwd=tree, check=True)
    subprocess.run([*git, "commit", "-q", "-m", "one"], cwd=tree, check=True)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=tree, capture_output=True, text=True, check=True).stdout.strip()
    assert commit_sha("ABCDEF12") == "abcdef12"
    monkeypatch.chdir(tree)
    assert commit_sha("HEAD") == head
    with pytest.raises(ValueError, match="`git rev-parse HEAD` prints the current one"):
        commit_sha("no-such-branch")
    monkeypatch.undo()
    done = gemmwatch_ci(tmp_path, ci_env(GEMMWATCH_SERVER="http://127.0.0.1:9"), "--commit", "HEAD~7")
    assert done.returncode == 2 and "not a sha, and not a commit git knows" in " ".join(done.stderr.split()), done.stderr
