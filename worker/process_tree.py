"""Ending a process with everything it started, whatever session or group they put themselves in.

The GPU process starts the confined compile process (which starts nvcc, and nvcc cicc, ptxas and the
host compiler, in a session of their own so a compile time limit can end them all) and a
launcher's confined process. Killing the GPU process alone, at a job's budget or a case's time
limit, left those running under init for up to the compile limit (issue 49, row 9). Here the tree
is read from /proc (each process's parent), stopped from the top down so no one starts another,
then killed.
"""

import os
import signal


def descendants(pid: int) -> list[int]:
    """Every process below `pid`, parents before children (Linux /proc; [] elsewhere)."""
    try:
        entries = [e for e in os.listdir("/proc") if e.isdigit()]
    except OSError:
        return []
    children: dict[int, list[int]] = {}
    for entry in entries:
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue  # gone meanwhile
        # pid (comm) state ppid ...: the command may hold spaces and parentheses, so read after the last ')'.
        fields = stat[stat.rindex(b")") + 2:].split()
        children.setdefault(int(fields[1]), []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(0), []):
            out.append(child)
            todo.append(child)
    return out


def kill_tree(pid: int) -> list[int]:
    """SIGKILL `pid` and every process below it; the pids below it that were found."""
    _signal(pid, signal.SIGSTOP)  # it starts nothing more while its tree is read
    below = descendants(pid)
    for child in below:
        _signal(child, signal.SIGSTOP)
    below += [p for p in descendants(pid) if p not in below]  # started between the first read and the stops
    for target in [pid, *below]:
        _signal(target, signal.SIGKILL)
    return below


def _signal(pid: int, signum: int) -> None:
    try:
        os.kill(pid, signum)
    except (ProcessLookupError, PermissionError):
        pass
