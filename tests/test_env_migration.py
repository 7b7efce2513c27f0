"""Migration 0013: results stored before env had a declared shape are made to fit it, so no reader
meets a stored env it cannot serialise or render (issue 20, findings 1 and 2, for old rows).

The hostile values are written as raw JSON text, as the older API stored them; then `alembic
upgrade head` runs, and every API read and page that shows the rows answers 200.
"""

import json

from alembic import command
from fastapi.testclient import TestClient
from sqlalchemy import create_engine, select, text

from api.app import create_app
from core.records.db import alembic_config, session_factory
from core.records.models import Result
from tests.conftest import make_settings
from tests.fake_results import add_job

WORKER_ENV = {"notes": ["cuBLAS baseline: cupy.matmul, FP32 compute, TF32 off"],
              "gpu": {"name": "NVIDIA H100 80GB HBM3", "model": "H100", "uuid": "GPU-test-h100", "sm_count": 132,
                      "compute_capability": "9.0", "max_sm_clock_mhz": 1980, "gpu_process_pid": 4242},
              "resources": {"registers_per_thread": 64, "limited_by": "registers", "occupancy": 0.5,
                            "limits": {"shared memory": 4, "registers": 2}},
              "stats": {"median_ms": 0.1}, "runner": "tests.fake_gpu:CpuRunner"}  # the CPU double's own keys


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def test_stored_envs_are_made_to_fit_and_every_read_answers(tmp_path, database_url):
    cfg = make_settings(tmp_path, database_url)
    alembic = alembic_config(database_url)
    # Written by today's models, then the schema taken back to 0012 (downgrades keep rows): the
    # models write every column they have, so they cannot write to the older schema itself.
    command.upgrade(alembic, "head")
    job_id = add_job(cfg, "abcd01", [("naive", (128, 128, 128), 100.0 + i, True) for i in range(7)])
    command.downgrade(alembic, "0012")
    postgres = database_url.startswith("postgresql")
    hostile = [
        '{"a": %s}' % nested(300),  # finding 1: every read of it answered 500
        '{"gpu": "H100", "notes": ["kept"]}',  # finding 2: the overview failed on it
        '{"resources": [1, 2], "launch": {"block": [16, 16, 1], "swizzle": "nt"}}',  # the job page failed on it
        json.dumps(WORKER_ENV),
        '"not an object"',
        # Deeper than Python's JSON parser goes; and an infinity (SQLite keeps it, PostgreSQL has none).
        '{"a": %s}' % nested(1500) if not postgres else "{}",
        '{"convergence": {"variant": {"median_ci_rel": Infinity, "drift_rel": 0.001}}}' if not postgres else "{}",
    ]
    engine = create_engine(database_url)
    with engine.begin() as conn:
        ids = list(conn.scalars(select(Result.id).where(Result.job_id == job_id).order_by(Result.case_index)))
        for row_id, env in zip(ids, hostile):
            conn.execute(text("UPDATE result SET env = " + ("CAST(:env AS JSON)" if postgres else ":env")
                              + " WHERE id = :id"), {"env": env, "id": row_id})
    engine.dispose()

    command.upgrade(alembic, "head")

    with session_factory(cfg)() as db:
        envs = [db.get(Result, i).env for i in ids]
    assert envs[0] == {"extra": {"dropped_at_upgrade": ["a"]}}
    assert envs[1] == {"notes": ["kept"], "extra": {"dropped_at_upgrade": ["gpu"]}}
    assert envs[2] == {"launch": {"block": [16, 16, 1]}, "extra": {"launch.swizzle": "nt", "dropped_at_upgrade": ["resources"]}}
    fitted = {k: v for k, v in WORKER_ENV.items() if k not in ("stats", "runner")}
    assert envs[3] == {**fitted, "extra": {"stats": {"median_ms": 0.1}, "runner": "tests.fake_gpu:CpuRunner"}}
    assert envs[4]["extra"]["dropped_at_upgrade"] == ["(env was not an object, or too deep to read)"]
    if not postgres:
        assert envs[5]["extra"]["dropped_at_upgrade"] == ["(env was not an object, or too deep to read)"]
        assert envs[6] == {"convergence": {"variant": {"median_ci_rel": None, "drift_rel": 0.001}}}

    client = TestClient(create_app(cfg))
    for path in ("/api/results", f"/api/jobs/{job_id}", *(f"/api/results/{i}" for i in ids), "/",
                 "/?size=128x128x128", "/?format=csv", f"/jobs/{job_id}", f"/jobs/{job_id}?format=json", "/compare"):
        assert client.get(path).status_code == 200, path
    assert "NVIDIA H100 80GB HBM3" in client.get("/").text
