"""The reaper queues a running job again only when both its heartbeat and its worker's beat are
stale: a worker alive and beating keeps its job, however late the job's heartbeat (a loaded
machine's run had a job's heartbeat 11 s behind while its worker ran it, and the worker's own
reaper took it back)."""

from datetime import timedelta

from sqlalchemy import select

from core.records.db import session_factory, upgrade_database
from core.records.models import Job, Worker, utcnow
from tests.conftest import make_settings
from worker.reaper import reap


def test_a_late_heartbeat_under_a_beating_worker_is_no_death(tmp_path, database_url, redis_url):
    cfg = make_settings(tmp_path, database_url, redis_url, GEMMWATCH_HEARTBEAT_STALE_S="10")
    upgrade_database(cfg)
    now, long_ago = utcnow(), utcnow() - timedelta(seconds=60)
    with session_factory(cfg)() as db:
        db.add_all([Worker(name="alive@a", host="a", model="H100", queues=["gpu.H100"], version="t", state="online",
                           last_beat_at=now),
                    Worker(name="dead@b", host="b", model="H100", queues=["gpu.H100"], version="t", state="online",
                           last_beat_at=long_ago)])
        jobs = {who: Job(status="running", variants=["naive"], sizes=[[64, 64, 64]], queue="gpu.H100", worker=who,
                         heartbeat_at=long_ago, tunables={}, sources=[]) for who in ("alive@a", "dead@b", "unknown@c")}
        db.add_all(jobs.values())
        db.commit()
        ids = {who: job.id for who, job in jobs.items()}

    requeued = reap(cfg)

    assert sorted(requeued) == sorted([ids["dead@b"], ids["unknown@c"]])
    with session_factory(cfg)() as db:
        status = dict(db.execute(select(Job.worker, Job.status)).all())
    assert status == {"alive@a": "running", "dead@b": "queued", "unknown@c": "queued"}
