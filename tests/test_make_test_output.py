"""Issue 51: an interrupted `make test` (a CI's time limit, a killed job) names the failures it had
already seen: the Makefile's pytest line prints each failure as it happens (pytest-instafail), not
only in the summary at the end, which a killed run never reaches."""

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

FAILS_THEN_IS_KILLED = '''
import os, signal, time
from pathlib import Path

def test_a_fails():
    assert 1 == 2, "the-first-failure"

def test_b_kills_the_run():
    # Once the run's output shows the failure (or after a minute, where it never does), the
    # controller is killed as a CI's time limit would: no summary at the end.
    out = Path(os.environ["RUN_OUTPUT"])
    deadline = time.monotonic() + 60
    while "the-first-failure" not in out.read_text() and time.monotonic() < deadline:
        time.sleep(0.2)
    os.kill(os.getppid(), signal.SIGKILL)
'''


def makefile_pytest_flags() -> list[str]:
    """The flags `make test` gives pytest, one worker (so the tests run in their order)."""
    recipe = re.search(r"^test:.*\n\t(.*)$", (ROOT / "Makefile").read_text(), re.M).group(1)
    flags = recipe.split("-m pytest", 1)[1].replace("$(TEST_WORKERS)", "1").replace("$(PYTEST_ARGS)", "")
    return flags.split()


def test_a_killed_run_has_already_printed_its_failure(tmp_path):
    (tmp_path / "test_order.py").write_text(FAILS_THEN_IS_KILLED)
    output = tmp_path / "output.txt"
    env = {**os.environ, "RUN_OUTPUT": str(output), "PYTHONUNBUFFERED": "1"}
    with output.open("w") as out:
        subprocess.run([sys.executable, "-m", "pytest", *makefile_pytest_flags(), "-p", "no:cacheprovider",
                        "-o", "addopts=", "test_order.py"], cwd=tmp_path, env=env, stdout=out,
                       stderr=subprocess.STDOUT, timeout=300)
    said = output.read_text()
    assert "short test summary" not in said  # killed before its end, as a timed-out CI job is
    assert "AssertionError: the-first-failure" in said, said
