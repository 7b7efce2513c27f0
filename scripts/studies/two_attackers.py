"""Issue 49's must-show 2, measured: two attackers posting worst-case sources and worst-case results at
once against `gemmwatch serve --processes 2`, while another user posts trivial jobs and a reader reads.

Attacker A posts, in a loop, a job whose one source is GEMMWATCH_MAX_SOURCE_BYTES of the source guard's
slowest character class (trigraphs and spaced splices: all four readings; docs/SECURITY.md), its
text changed each time (the guard remembers texts it judged); attacker
B posts runs of 300 results with 99 KB errors (about 30 MB each). The victim posts a one-variant job
every 0.5 s and a reader GETs /api/results?limit=100 every 0.1 s, each timed. The server processes'
memory is read from /proc throughout (resident, and proportional: shared pages divided). SQLite in a temporary data folder; no worker (the
jobs stay queued).

  python3 scripts/studies/two_attackers.py --seconds 60
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from core.records.db import session_factory, upgrade_database  # noqa: E402
from core.settings import Settings  # noqa: E402
from core.records.tokens import create_token  # noqa: E402
from worker.process_tree import descendants  # noqa: E402


def memory_mb(pids: list[int], field: str, where: str) -> float:
    """The sum of a /proc field over the processes: VmRSS (status) counts a page shared by forked
    processes once in each; Pss (smaps_rollup) divides it among them, the memory they take together."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/{where}") as f:
                total += next(int(line.split()[1]) for line in f if line.startswith(field))
        except (OSError, StopIteration):
            pass
    return total / 1024


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--port", type=int, default=8877)
    args = ap.parse_args()
    data = tempfile.mkdtemp(prefix="gemmwatch-attack-")
    # The victim's jobs stay queued (no worker): the per-token cap is raised so they are all taken.
    env = {**os.environ, "GEMMWATCH_DATA_DIR": data, "BROKER_URL": "redis://127.0.0.1:6379/7",
           "PYTHONPATH": str(ROOT), "GEMMWATCH_MAX_QUEUED_JOBS_PER_TOKEN": "100000"}
    cfg = Settings(GEMMWATCH_DATA_DIR=data)
    upgrade_database(cfg)
    with session_factory(cfg)() as db:
        tokens = {who: create_token(db, who) for who in ("attacker-a", "attacker-b", "victim")}
    server = subprocess.Popen([sys.executable, "-m", "cli.main", "serve", "--port", str(args.port), "--processes", "2"],
                              cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{args.port}"
    for _ in range(600):
        try:
            if httpx.get(f"{base}/healthz", timeout=2).status_code == 200:
                break
        except httpx.HTTPError:
            time.sleep(0.1)
    piece = "??=\\ \n#\n"
    text = piece * (cfg.max_source_bytes // len(piece) - 1)
    worst_job = {"sources": [{"name": "worst", "files": {"worst.cu": text}, "source": "worst.cu", "entry": "worst",
                              "block": [16], "grid": {"tile": [16, 16]}}], "sizes": [[64, 64, 64]]}
    heavy = [{"variant": "naive", "m": 64, "n": 64, "k": 64 + i, "verified": False, "error": "e" * 99_000,
              "n_samples": 0} for i in range(300)]
    def varied(job: dict, n: int) -> dict:
        """Another text each time: the guard remembers the texts it judged (core/description/source_guard.py)."""
        source = dict(job["sources"][0])
        source["files"] = {"worst.cu": f"// {n}\n" + text}
        return {**job, "sources": [source]}

    stop = time.monotonic() + args.seconds
    seen: dict[str, list[float]] = {"victim_post": [], "reader_get": [], "attacker_a": [], "attacker_b": []}
    statuses: dict[str, list[int]] = {k: [] for k in seen}
    memory: list[float] = []
    proportional: list[float] = []

    def loop(name: str, call, pause: float) -> None:
        n = 0
        with httpx.Client(timeout=120) as client:
            while time.monotonic() < stop:
                started = time.monotonic()
                try:
                    status = call(client, n).status_code
                except httpx.HTTPError:
                    status = -1
                seen[name].append(time.monotonic() - started)
                statuses[name].append(status)
                n += 1
                time.sleep(pause)

    def auth(who: str) -> dict:
        return {"Authorization": f"Bearer {tokens[who]}"}

    threads = [
        threading.Thread(target=loop, args=("attacker_a", lambda c, n: c.post(
            f"{base}/api/jobs", json=varied(worst_job, n), headers=auth("attacker-a")), 0.0)),
        threading.Thread(target=loop, args=("attacker_b", lambda c, n: c.post(
            f"{base}/api/results", json={"run_id": f"heavy-run-{n:06d}", "gpu": {"uuid": "GPU-attacker",
                                         "name": "NVIDIA H100 80GB HBM3", "model": "H100"}, "results": heavy},
            headers=auth("attacker-b")), 0.0)),
        threading.Thread(target=loop, args=("victim_post", lambda c, n: c.post(
            f"{base}/api/jobs", json={"variants": ["naive"], "sizes": [[64, 64, 64]]}, headers=auth("victim")), 0.5)),
        threading.Thread(target=loop, args=("reader_get", lambda c, n: c.get(
            f"{base}/api/results", params={"limit": 100}), 0.1)),
    ]
    for t in threads:
        t.start()
    while time.monotonic() < stop:
        tree = [server.pid, *descendants(server.pid)]
        memory.append(memory_mb(tree, "VmRSS:", "status"))
        proportional.append(memory_mb(tree, "Pss:", "smaps_rollup"))
        time.sleep(1)
    for t in threads:
        t.join()
    server.terminate()
    server.wait(30)
    report = {}
    for name, times in seen.items():
        ordered = sorted(times)
        report[name] = {"requests": len(times), "p50_s": round(statistics.median(ordered), 3) if ordered else None,
                        "p99_s": round(ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))], 3) if ordered else None,
                        "max_s": round(ordered[-1], 3) if ordered else None,
                        "statuses": sorted(set(statuses[name]))}
    report["server_rss_mb_max"] = round(max(memory), 1) if memory else None
    report["server_pss_mb_max"] = round(max(proportional), 1) if proportional else None
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
