"""A smaller run of scripts/load_test.py in the suite: concurrent POSTs against the real stack
(uvicorn, PostgreSQL, Redis, two Celery workers with the CPU double); every job stored once and
processed. The 1,000-job figures are in docs/BENCHMARKS.md."""

import importlib.util
import json
import os

from api.auth import create_token
from api.db import session_factory, upgrade_database
from tests.conftest import ROOT, make_settings

spec = importlib.util.spec_from_file_location("load_test", ROOT / "scripts" / "load_test.py")
load_test = importlib.util.module_from_spec(spec)
spec.loader.exec_module(load_test)


def test_concurrent_posts_are_all_stored_once_and_processed(tmp_path, pg_url, redis_url, start_worker, live_server):
    cfg = make_settings(tmp_path, pg_url, redis_url)
    upgrade_database(cfg)
    with session_factory(cfg)() as db:
        token = create_token(db, "load")
    url = live_server(cfg)
    fast = {"GEMMWATCH_CASE_TIME_CAP_S": "0.01"}
    start_worker(cfg, **fast)
    start_worker(cfg, **fast)
    # The benchmark in docs/BENCHMARKS.md is this test with GEMMWATCH_LOAD_JOBS=1000, _CLIENTS=50.
    jobs = int(os.environ.get("GEMMWATCH_LOAD_JOBS", "120"))
    clients = int(os.environ.get("GEMMWATCH_LOAD_CLIENTS", "12"))
    report = load_test.run(url, token, pg_url, jobs=jobs, clients=clients, drain_timeout=1200)
    print(json.dumps(report, indent=1))
    assert report["status_codes"] == {"202": jobs}
    assert report["stored"] == jobs
    assert report["succeeded"] == jobs and report["still_open"] == 0
