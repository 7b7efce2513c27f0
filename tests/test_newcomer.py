"""What a newcomer meets first: the CLI finds the server `make up` started, help screens that
fit 80 columns, a job nobody serves that says so in the POST's own answer, and an ended
job's page that reads as ended. (tests/test_readme.py runs the README's examples.)"""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import update

from cli.server import DEFAULT_SERVER, find_server, forget_server, local_url, record_server
from core.records.db import session_factory
from core.records.models import Job
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


# -- `gemmwatch up` says what a person needs, and nothing else -----------------------------------

def _up_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("DATABASE_URL", "BROKER_URL", "COLUMNS") and not k.startswith(("GEMMWATCH_", "FAKE_GPU_"))}
    env.update(PYTHONPATH=str(ROOT), PYTHONUNBUFFERED="1", **extra)
    return env


def _start_up(tmp_path, **extra_env: str) -> tuple[subprocess.Popen, str, Path]:
    from tests.parallel import free_port

    port = free_port()
    log = tmp_path / "up.log"
    # A process group of its own, as a terminal's foreground job is: _stop's Ctrl-C goes to the group.
    proc = subprocess.Popen([sys.executable, "-m", "cli.main", "up", "--port", str(port)], cwd=tmp_path,
                            env=_up_env(**extra_env), stdout=open(log, "wb"), stderr=subprocess.STDOUT,
                            start_new_session=True)
    return proc, f"http://127.0.0.1:{port}", log


def _until(what: str, check, proc: subprocess.Popen, log, timeout: float = 90):
    import time

    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found:
            return found
        assert proc.poll() is None, f"gemmwatch up exited with {proc.returncode} before {what}:\n{log.read_text()}"
        assert time.monotonic() < deadline, f"no {what} after {timeout} s:\n{log.read_text()}"
        time.sleep(0.1)


def _stop(proc: subprocess.Popen) -> None:
    import signal

    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C, as the startup lines say: to the terminal's whole job
    try:
        proc.wait(60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _alive(pid: int) -> bool:
    try:
        state = open(f"/proc/{pid}/status").read().split("State:")[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state not in ("Z", "X")


# What `make up` printed before: Celery's banner, its warning about root, kombu's about the host.
NOISE = ["No hostname was supplied", "SecurityWarning", "superuser privileges", "[config]", ".> transport:",
         "-------------- ", "celery@", "[queues]", "compiler confinement"]


def test_up_prints_where_it_serves_where_the_data_lives_and_how_to_stop_and_no_noise(tmp_path):
    import httpx

    proc, base, log = _start_up(tmp_path)
    try:
        def served():
            try:
                return httpx.get(f"{base}/healthz", timeout=5).status_code == 200
            except httpx.HTTPError:
                return False

        _until("startup lines", lambda: "stop " in log.read_text(), proc, log)
        _until("answer on /healthz", served, proc, log)
        # A job through the worker: by its end the worker has started, connected, registered and
        # said whatever it says at start, and the API has published to the broker.
        token = (tmp_path / ".gemmwatch" / "token").read_text().strip()
        job = httpx.post(f"{base}/api/jobs", json={"variants": ["naive"], "sizes": [[16, 16, 16]]},
                         headers={"Authorization": f"Bearer {token}"}, timeout=30).json()

        def ended():
            seen = httpx.get(f"{base}/api/jobs/{job['id']}", timeout=30).json()
            return seen if seen["status"] not in ("queued", "running") else None

        assert _until("end of the job", ended, proc, log)["status"] in ("succeeded", "failed")
        said = log.read_text()
        workers = [int(c) for c in open(f"/proc/{proc.pid}/task/{proc.pid}/children").read().split()]
        assert workers, "gemmwatch up started no worker"
    finally:
        _stop(proc)
    # Ctrl-C, as the last line says, stopped the API and its workers together.
    import time

    deadline = time.monotonic() + 60
    while any(_alive(pid) for pid in workers):
        assert time.monotonic() < deadline, f"workers {workers} outlived Ctrl-C:\n{log.read_text()}"
        time.sleep(0.1)
    lines = [line for line in said.splitlines() if line.strip()]
    assert lines[0] == f"gemmwatch at {base}/  (API docs at {base}/docs)", said
    assert any(line.split() == ["data", str((tmp_path / ".gemmwatch").resolve()), "(SQLite", "database,", "broker,",
                                "write", "token,", "server", "address)"] for line in lines), said
    assert any("Ctrl-C" in line for line in lines), said
    assert len(lines) <= 6, f"gemmwatch up said more than a person needs:\n{said}"
    for noise in NOISE:
        assert noise not in said, f"{noise!r} in gemmwatch up's output:\n{said}"
    assert token not in said
    # One warm shutdown a worker, asked by `up`: no worker heard the Ctrl-C itself.
    final = log.read_text()
    assert "Hitting Ctrl+C again" not in final and final.count("Warm shutdown") <= len(workers), final
    last = final.strip().splitlines()[-1]
    assert last == f"gemmwatch stopped: the API and {len(workers)} worker(s); the data stays in " \
                   f"{(tmp_path / '.gemmwatch').resolve()}", log.read_text()


def test_up_still_shows_a_real_error(tmp_path):
    """Quiet, not deaf: a worker that cannot reach its broker says so in `up`'s output."""
    from tests.parallel import free_port

    broker = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there
    proc, base, log = _start_up(tmp_path, BROKER_URL=broker)
    try:
        said = _until("broker error", lambda: "Cannot connect to redis://" in log.read_text() and log.read_text(),
                      proc, log)
    finally:
        _stop(proc)
    assert "ERROR" in said and f"  broker    {broker}" in said, said


# -- the CLI's errors say what to do ---------------------------------------------------------------

@pytest.fixture
def served(tmp_path, sqlite_url, live_server):
    """A real `gemmwatch serve` and a write token for it."""
    from core.records.db import upgrade_database
    from core.records.tokens import create_token
    from tests.conftest import make_settings

    cfg = make_settings(tmp_path, sqlite_url)
    upgrade_database(cfg)
    with session_factory(cfg)() as db:
        token = create_token(db, "newcomer")
    return live_server(cfg), token


def _cli(*args: str, cwd, **extra_env: str) -> subprocess.CompletedProcess:
    env = _up_env(**extra_env)
    return subprocess.run([sys.executable, "-m", "cli.main", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=120)


def test_a_mistyped_variant_is_named_with_the_closest_names(served, tmp_path):
    from core.description.builtins import variant_names

    base, token = served
    run = _cli("submit", "--server", base, "--token", token, "--variants", "smem_tiledd,naive", "--size", "8",
               cwd=tmp_path)
    assert run.returncode == 2, run.stdout + run.stderr
    said = run.stdout.strip()
    assert said.startswith("unknown variant 'smem_tiledd': did you mean smem_tiled"), said
    assert "`gemmwatch variants` lists them" in said
    assert len(said.splitlines()) == 1 and "{" not in said, said  # one line, no JSON
    assert "cublas_fp16" not in said  # not the whole list, once or twice

    # ...and what it points to lists every name, whole, where output is not a terminal.
    names = _cli("variants", "--server", base, "--names", cwd=tmp_path)
    assert names.returncode == 0 and names.stdout.split() == variant_names(), names.stdout + names.stderr
    table = _cli("variants", "--server", base, cwd=tmp_path)
    assert table.returncode == 0, table.stderr
    rows = {line.split("│")[1].strip() for line in table.stdout.splitlines() if line.count("│") > 2}
    assert set(variant_names()) <= rows and "…" not in table.stdout, table.stdout
    # One line a variant: the table's frame, its title and header, and a row each.
    assert len(table.stdout.splitlines()) <= len(variant_names()) + 6, table.stdout


def test_a_stopped_server_is_named_with_what_to_do(tmp_path):
    from tests.parallel import free_port

    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    for args in (["submit", "--variants", "naive", "--size", "8", "--token", "x"], ["cancel", "1", "--token", "x"],
                 ["variants"]):
        run = _cli(*args, "--server", url, cwd=tmp_path)
        said = run.stdout + run.stderr
        assert run.returncode == 3, said
        assert f"cannot reach {url}: nothing is listening there (connection refused)" in said, said
        assert "`make up` (or `gemmwatch up`)" in said and "--server URL or $GEMMWATCH_SERVER" in said, said
        assert "Errno" not in said and "Traceback" not in said, said


def test_a_table_is_not_cut_when_the_output_is_not_a_terminal(tmp_path):
    """`gemmwatch token list` into a pipe (a CI log, `| less`): rich took 80 columns there and cut
    the cells; a long name comes out whole."""
    env = {"DATABASE_URL": f"sqlite:///{tmp_path / 'g.db'}", "GEMMWATCH_DATA_DIR": str(tmp_path / "data")}
    name = "ci-runner-for-the-kernels-repository-on-the-h100-node-in-the-basement-rack-7"
    made = _cli("token", "create", name, "--scope", "results", "--scope", "jobs", cwd=tmp_path, **env)
    assert made.returncode == 0, made.stderr
    listed = _cli("token", "list", cwd=tmp_path, **env)
    assert listed.returncode == 0, listed.stderr
    assert any(name in line and "active" in line for line in listed.stdout.splitlines()), listed.stdout
    assert "…" not in listed.stdout


def test_a_second_up_on_a_taken_port_starts_nothing_and_leaves_the_running_ones_record(tmp_path):
    """A second `make up` on the port a stack serves on: it said it served, failed to bind, and
    removed the running stack's record on the way out, so every command then went to the default."""
    import socket

    record = tmp_path / ".gemmwatch" / "server"
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        record.parent.mkdir()
        record.write_text(f"http://127.0.0.1:{port}\n")  # as the running stack wrote it
        run = _cli("up", "--port", str(port), cwd=tmp_path, GEMMWATCH_DATA_DIR=str(tmp_path / ".gemmwatch"))
    said = run.stdout + run.stderr
    assert run.returncode == 1, said
    assert f"port {port} on 127.0.0.1 is taken" in said and "nothing was started" in said, said
    assert "gemmwatch at" not in said and "Errno" not in said and "Traceback" not in said, said
    assert record.read_text() == f"http://127.0.0.1:{port}\n"
    assert not (tmp_path / ".gemmwatch" / "gemmwatch.db").exists()  # nothing was set up either


def test_the_default_address_is_said_to_be_only_the_default(tmp_path):
    """After a `make up PORT=9137` has stopped, commands fall back to :8000: the message says that
    address is a default, not where a stack was seen."""
    run = _cli("variants", cwd=tmp_path, GEMMWATCH_DATA_DIR=str(tmp_path / ".gemmwatch"))
    said = run.stdout + run.stderr
    if "nothing is listening there" not in said:
        pytest.skip("something listens on this machine's 127.0.0.1:8000")
    assert run.returncode == 3, said
    assert f"cannot reach {DEFAULT_SERVER} (the default address: no running `make up` is recorded" in said, said


def test_a_job_without_results_prints_its_error_not_an_empty_table(capsys):
    from cli.main import print_results

    print_results({"id": 7, "status": "failed", "results": [], "error": "no CUDA device: [no GPU] here"})
    said = capsys.readouterr().out
    assert "job 7: failed, no results" in said and "no CUDA device: [no GPU] here" in said, said
    assert "variant" not in said and "GFLOPS" not in said, said  # no header of an empty table


def test_a_case_not_run_by_design_says_not_applicable_and_why_not_a_red_no(capsys):
    from cli.main import print_results

    row = dict(gflops=None, cublas_gflops=None, pct_of_cublas=None, noise=None, verified=False, rel_error=None)
    reason = ("not applicable: tiled runs only where each size is a multiple of its tile (its description's "
              "size_multiple); this case is 1000×1003×997: M 1000 (not a multiple of 128)")
    print_results({"id": 9, "status": "succeeded", "error": None, "results": [
        {**row, "variant": "tiled", "m": 1000, "n": 1003, "k": 997, "status": "not applicable", "error": reason},
        {**row, "variant": "tiled", "m": 1000, "n": 1003, "k": 997, "status": "not applicable", "error": reason},
        {**row, "variant": "wrong", "m": 64, "n": 64, "k": 64, "status": "incorrect", "error": "relative error 0.5"},
        {**row, "variant": "tiled", "m": 4096, "n": 4096, "k": 4096, "status": "passed", "verified": True,
         "gflops": 1000.0, "cublas_gflops": 2000.0, "pct_of_cublas": 50.0, "noise": 0.01}]})
    said = " ".join(capsys.readouterr().out.split())  # the table may wrap a cell
    assert "not applicable" in said and said.count("M 1000 (not a multiple of 128)") == 1, said
    assert "tiled 1000×1003×997: not applicable: tiled runs only where" in said, said
    assert " no " in said and "50.0" in said  # the incorrect one still says no; the passed one its figures


@pytest.mark.parametrize("size, named", [([0, 64, 64], "each of M, N, K must be at least 1"),
                                         ([64, 64, 64, 0], "each of M, N, K and the batch must be at least 1")])
def test_a_zero_size_names_what_was_given(size, named):
    from pydantic import ValidationError

    from api.schemas import JobCreate

    with pytest.raises(ValidationError, match=named):
        JobCreate.model_validate({"variants": ["naive"], "sizes": [size]})
