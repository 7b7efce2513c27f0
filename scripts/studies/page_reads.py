#!/usr/bin/env python3
"""How long the dashboard and API take to answer every read of a database, in-process.

The reads are the route walk's (tests/route_walk.py: every page in HTML, CSV and JSON, every
export and API read, for every GPU, size, job and result stored), made one after another through
the app (FastAPI's TestClient, no server process), so the figure is the app's own time.
A database the route walk left behind serves well:
  .venv/bin/python -m pytest -q "tests/test_route_walk.py::test_no_writer_breaks_a_reader[sqlite]" --basetemp=/tmp/rw
  .venv/bin/python scripts/studies/page_reads.py /tmp/rw/test_no_writer_breaks_a_reader0/gemmwatch.db
"""

import argparse
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from fastapi.testclient import TestClient  # noqa: E402

from api.app import create_app  # noqa: E402
from core.records.db import session_factory  # noqa: E402
from core.settings import Settings  # noqa: E402
from core.records.tokens import create_token  # noqa: E402
from tests import route_walk  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("database", type=Path, help="a SQLite file gemmwatch has written")
    ap.add_argument("--top", type=int, default=10, help="how many routes to list, slowest first")
    args = ap.parse_args()
    cfg = Settings(GEMMWATCH_DATA_DIR=tempfile.mkdtemp(prefix="page-reads-"),
                   DATABASE_URL=f"sqlite:///{args.database.resolve()}")
    with session_factory(cfg)() as db:
        token = create_token(db, f"page-reads-{uuid.uuid4().hex[:8]}")
    client = TestClient(create_app(cfg), headers={"Authorization": f"Bearer {token}"})
    urls = route_walk.read_urls(route_walk.stored(cfg))
    seconds, reads, wrong = Counter(), Counter(), 0
    for path, query, allowed in urls:
        started = time.perf_counter()
        status = client.get(path, params=query).status_code
        key = f"{route_walk.route_of(path)} {query.get('format', '')}".strip()
        seconds[key] += time.perf_counter() - started
        reads[key] += 1
        wrong += status not in allowed
    print(f"{len(urls)} reads in {sum(seconds.values()):.1f} s ({wrong} answered other than expected)")
    for key, total in seconds.most_common(args.top):
        print(f"  {total:6.2f} s  {reads[key]:4d} reads  {1000 * total / reads[key]:6.1f} ms each  {key}")


if __name__ == "__main__":
    main()
