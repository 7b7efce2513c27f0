"""What a newcomer meets first: the CLI finds the server `make up` started, help screens that
fit 80 columns, a job nobody serves that says so in the POST's own answer, and an ended
job's page that reads as ended. (tests/test_readme.py runs the README's examples.)"""

import os
import re
import subprocess
import sys

import pytest
from sqlalchemy import update

from cli.server import DEFAULT_SERVER, find_server, forget_server, local_url, record_server
from core.db import session_factory
from core.models import Job
from tests.conftest import ROOT, make_client
from tests.fake_results import add_job


# -- which server -----------------------------------------------------------------------------

@pytest.fixture
def data_dir(tmp_path, monkeypatch):
    """The CLI's settings read the data folder from the environment: point it at a fresh one."""
    import core.settings

    monkeypatch.delenv("GEMMWATCH_SERVER", raising=False)
    monkeypatch.setattr(core.settings.settings, "data_dir", tmp_path / ".gemmwatch")
    return tmp_path / ".gemmwatch"


def test_the_server_is_found_in_the_documented_order(data_dir, monkeypatch):
    assert find_server(None) == DEFAULT_SERVER  # nothing recorded: the default
    record_server("http://127.0.0.1:8801")
    assert (data_dir / "server").read_text() == "http://127.0.0.1:8801\n"
    assert find_server(None) == "http://127.0.0.1:8801"  # what `gemmwatch up` recorded
    monkeypatch.setenv("GEMMWATCH_SERVER", "http://ci.example:9000/")
    assert find_server(None) == "http://ci.example:9000"  # the environment before the record
    assert find_server("http://other:1") == "http://other:1"  # --server before all
    monkeypatch.delenv("GEMMWATCH_SERVER")
    forget_server("http://127.0.0.1:9999")  # another `up`'s record is left alone
    assert find_server(None) == "http://127.0.0.1:8801"
    forget_server("http://127.0.0.1:8801")
    assert find_server(None) == DEFAULT_SERVER


def test_a_server_listening_everywhere_is_reached_on_loopback():
    assert local_url("0.0.0.0", 8801) == "http://127.0.0.1:8801"
    assert local_url("::", 8801) == "http://[::1]:8801"
    assert local_url("10.1.2.3", 80) == "http://10.1.2.3:80"


def test_submit_goes_where_up_recorded(tmp_path):
    """A real `gemmwatch submit` with no --server, after `up` recorded a port nothing listens on:
    it tries that port, not 8000."""
    from tests.parallel import free_port

    port = free_port()
    (tmp_path / ".gemmwatch").mkdir()
    (tmp_path / ".gemmwatch" / "server").write_text(f"http://127.0.0.1:{port}\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("GEMMWATCH_")}
    env["PYTHONPATH"] = str(ROOT)
    run = subprocess.run([sys.executable, "-m", "cli.main", "submit", "--variants", "naive", "--size", "8",
                          "--token", "x"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert run.returncode == 3
    assert f"cannot reach http://127.0.0.1:{port}" in run.stdout


# -- help screens -------------------------------------------------------------------------------

def _commands(app) -> list[list[str]]:
    import typer.main

    paths = [[]]
    group = typer.main.get_command(app)

    def walk(cmd, prefix):
        for name, sub in getattr(cmd, "commands", {}).items():
            paths.append(prefix + [name])
            walk(sub, prefix + [name])

    walk(group, [])
    return paths


def test_every_help_screen_fits_80_columns_and_names_each_option_whole():
    import typer.main

    from cli.main import app

    from typer.testing import CliRunner

    paths = _commands(app)
    assert ["ci"] in paths and ["token", "create"] in paths
    group = typer.main.get_command(app)
    for path in paths:
        run = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "80", "TERMINAL_WIDTH": None})
        assert run.exit_code == 0, run.output
        screen = run.output
        where = f"`gemmwatch {' '.join(path)} --help`"
        assert max(len(line) for line in screen.splitlines()) <= 80, f"{where} is wider than 80 columns:\n{screen}"
        assert "…" not in screen and "<bool>" not in screen, f"{where}:\n{screen}"
        cmd = group
        for name in path:
            cmd = cmd.commands[name]
        for param in cmd.params:
            for opt in [*param.opts, *param.secondary_opts]:
                if opt.startswith("--"):
                    assert re.search(rf"(^|[\s,/]){re.escape(opt)}(\s|$|,|=)", screen, re.M), f"{where} lacks {opt}"


# -- a job nobody serves, an ended job ----------------------------------------------------------

def test_the_post_answer_says_why_a_job_will_wait(cfg):
    client = make_client(cfg)
    posted = client.post("/api/jobs", json={"variants": ["naive"], "sizes": [[16, 16, 16]], "gpu": "A100"})
    assert posted.status_code == 202
    assert posted.json()["waiting"] == "waiting: no live worker serves gpu.A100; last seen never"
    page = client.get(f"/jobs/{posted.json()['id']}").text
    assert "waiting: no live worker serves gpu.A100" in page


@pytest.mark.parametrize("status, says", [
    ("failed", "the job failed before any case finished"),
    ("cancelled", "the job was cancelled before any case finished"),
])
def test_an_ended_job_without_results_reads_as_ended(client, cfg, status, says):
    job_id = add_job(cfg, None, [], status="running", total=2)
    assert "No results yet" in client.get(f"/jobs/{job_id}").text  # still running: more may come
    with session_factory(cfg)() as db:
        db.execute(update(Job).where(Job.id == job_id).values(status=status, error="no CUDA device: none here",
                                                                finished_at=Job.created_at))
        db.commit()
    page = client.get(f"/jobs/{job_id}").text
    assert says in page and "No results yet" not in page and "appear here" not in page
    assert "· ended " in page and "setTimeout(poll" not in page
