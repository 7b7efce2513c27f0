"""Issue 49, row 9: a GPU process ended at a job's budget or a case's time limit takes what it
started with it (worker/process_tree.py): here a parent whose child put itself in a session of its
own, as the compile process's nvcc does, and whose grandchild sleeps."""

import os
import subprocess
import sys
import time

from worker.process_tree import descendants, kill_tree

TREE = """
import subprocess, sys, time
subprocess.Popen([sys.executable, "-c", "import subprocess, sys, time; "
                  "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)']); time.sleep(600)"],
                 start_new_session=True)
time.sleep(600)
"""


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def test_a_process_is_killed_with_its_whole_tree_whatever_session_they_took():
    parent = subprocess.Popen([sys.executable, "-c", TREE])
    deadline = time.monotonic() + 60
    while len(descendants(parent.pid)) < 2:  # the child and the grandchild, started by now
        assert time.monotonic() < deadline, "the tree did not start"
        time.sleep(0.05)
    below = kill_tree(parent.pid)
    assert len(below) == 2
    parent.wait(30)
    deadline = time.monotonic() + 30
    while any(alive(p) for p in below):  # reaped by init once killed
        assert time.monotonic() < deadline, [p for p in below if alive(p)]
        time.sleep(0.05)
    assert os.getpid() not in below
