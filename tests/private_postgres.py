"""A PostgreSQL server of one test's own, so that test can restart it.

tests/test_faults.py restarts the database under a running API and worker. Restarting the
machine's cluster cut every other test's connections at that moment: tests running beside it
in other xdist workers, and anyone else's tests on the machine. This one is the same
PostgreSQL (the machine's binaries), made with initdb in a folder of its own, listening on a
port of this xdist worker's range.
"""

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path

from tests.parallel import free_port


def _bindir() -> Path:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
    if not found:
        raise RuntimeError("no PostgreSQL server binaries under /usr/lib/postgresql (scripts/services.sh installs them)")
    return Path(found[-1]).parent


class PrivatePostgres:
    def __init__(self):
        self.bindir = _bindir()
        self.port = free_port()
        # Not under pytest's tmp_path: that is private to root (0700), and PostgreSQL refuses to
        # run as root, so the server runs as the postgres user in a folder it owns.
        self.folder = Path(tempfile.mkdtemp(prefix="gemmwatch-pg-"))
        self.data = self.folder / "data"
        self.log = self.folder / "server.log"
        self._as_owner = []
        if os.geteuid() == 0:
            owner = pwd.getpwnam("postgres")
            os.chown(self.folder, owner.pw_uid, owner.pw_gid)
            self._as_owner = ["runuser", "-u", "postgres", "--"]

    @property
    def url(self) -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, *args: str) -> None:
        done = subprocess.run([*self._as_owner, *args], capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            log = self.log.read_text() if self.log.exists() else ""
            raise RuntimeError(f"{' '.join(args)} failed:\n{done.stdout}{done.stderr}{log}")

    def _pg_ctl(self, action: str) -> None:
        options = (f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.folder} "
                   "-c fsync=off -c synchronous_commit=off -c full_page_writes=off")
        # -w: returns once the server accepts connections (or has stopped).
        self._run(str(self.bindir / "pg_ctl"), action, "-w", "-m", "fast", "-D", str(self.data),
                  "-l", str(self.log), "-o", options)

    def start(self) -> "PrivatePostgres":
        self._run(str(self.bindir / "initdb"), "-D", str(self.data), "-U", "postgres", "--auth=trust",
                  "-E", "UTF8", "--no-sync", "--locale=C")
        self._pg_ctl("start")
        return self

    def restart(self) -> None:
        self._pg_ctl("restart")

    def stop(self) -> None:
        try:
            self._pg_ctl("stop")
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)
