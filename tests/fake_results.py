"""Rows written straight into the database, for tests of the read side (API, dashboard)."""

from datetime import datetime, timedelta, timezone

from api.db import session_factory
from api.models import Job, Result
from api.schemas import CommitIn
from api.store import upsert_commit, upsert_gpu

H100 = {"uuid": "GPU-test-h100", "name": "NVIDIA H100 80GB HBM3", "model": "H100", "sm_count": 132}
_T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


def add_result(cfg, variant, size, sha, gflops, verified=True, commit_index=0, gpu=H100, mode="cold"):
    m, n, k = size
    with session_factory(cfg)() as db:
        commit = upsert_commit(db, CommitIn(sha=sha, committed_at=_T0 + timedelta(hours=commit_index)))
        gpu_row = upsert_gpu(db, gpu)
        job = Job(status="succeeded", variants=[variant], sizes=[list(size)], queue="gpu.any",
                  commit=commit, gpu_id=gpu_row.id, progress_total=1, progress_done=1)
        db.add(job)
        db.flush()
        ms = 2 * m * n * k / (gflops * 1e9) * 1e3
        db.add(Result(job_id=job.id, case_index=0, variant=variant, m=m, n=n, k=k, mode=mode,
                      gpu_id=gpu_row.id, commit_id=commit.id, verified=verified,
                      rel_error=1e-7 if verified else 0.5, median_ms=ms if verified else None,
                      gflops=gflops if verified else None, cublas_gflops=2 * gflops if verified else None,
                      pct_of_cublas=50.0 if verified else None, n_samples=10, noise=0.003, converged=True,
                      error=None if verified else "wrong result"))
        db.commit()
        return job.id
