"""/metrics in the Prometheus text format (prometheus-client).

Two sources: the state of things is read from the database at scrape time (jobs by state, queue
depth, workers by model and state, results stored, case wall times), so every API process
answers the same whichever one is scraped; HTTP latency is observed in this process as requests
pass (one scrape target per server process).
"""

import time
from collections import Counter
from collections.abc import Iterator

from fastapi import APIRouter, Request
from fastapi.responses import Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from sqlalchemy import case, func, select

from core.records.db import session_factory
from core.jobs.fleet import load_fleet
from core.records.models import Job, Result
from core.settings import Settings
from core.jobs.job_states import JOB_STATES

# A case compiles, verifies and times a kernel beside cuBLAS: from well under a second to minutes.
CASE_BUCKETS_S = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)

router = APIRouter(tags=["metrics"])


class DatabaseCollector:
    def __init__(self, cfg: Settings):
        self.cfg = cfg

    def collect(self) -> Iterator[Metric]:
        with session_factory(self.cfg)() as db:
            by_state = dict(db.execute(select(Job.status, func.count()).group_by(Job.status)).all())
            jobs = GaugeMetricFamily("gemmwatch_jobs", "Jobs by state", labels=["state"])
            for state in JOB_STATES:
                jobs.add_metric([state], by_state.get(state, 0))
            yield jobs

            fleet = load_fleet(db, self.cfg)
            depth = GaugeMetricFamily("gemmwatch_queue_depth", "Jobs queued, per queue (gpu.<model>)", labels=["queue"])
            for queue, n in sorted(fleet.queued.items()):
                depth.add_metric([queue], n)
            yield depth
            workers = GaugeMetricFamily("gemmwatch_workers", "Registered workers by GPU model and state",
                                        labels=["model", "state"])
            for (model, state), n in sorted(Counter((w.row.model, w.state) for w in fleet.workers).items()):
                workers.add_metric([model, state], n)
            yield workers
            online = GaugeMetricFamily("gemmwatch_workers_online", "Live workers (idle or running)")
            online.add_metric([], sum(w.live for w in fleet.workers))
            yield online

            stored = CounterMetricFamily("gemmwatch_results_stored", "Result rows stored")
            stored.add_metric([], db.scalar(select(func.count()).select_from(Result)))
            yield stored
            yield self._case_durations(db)

    @staticmethod
    def _case_durations(db) -> Metric:
        # One pass over the column: a cumulative count per bucket, as a Prometheus histogram wants.
        timed = Result.case_s.is_not(None)
        columns = [func.sum(case((timed & (Result.case_s <= le), 1), else_=0)) for le in CASE_BUCKETS_S]
        row = db.execute(select(func.count(Result.case_s), func.coalesce(func.sum(Result.case_s), 0.0), *columns)).one()
        count, total, per_bucket = row[0], row[1], [int(v or 0) for v in row[2:]]
        hist = HistogramMetricFamily("gemmwatch_case_duration_seconds",
                                     "Wall time of a case in the GPU process (compile, verify, time)")
        hist.add_metric([], [(str(le), n) for le, n in zip(CASE_BUCKETS_S, per_bucket)] + [("+Inf", count)], total)
        return hist


class Metrics:
    """The app's registry: the database collector and the HTTP latency histogram."""

    def __init__(self, cfg: Settings):
        self.registry = CollectorRegistry()
        self.registry.register(DatabaseCollector(cfg))
        self.http_latency = Histogram("gemmwatch_http_request_duration_seconds", "HTTP request latency",
                                      ["method", "route", "status"], registry=self.registry,
                                      buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.25, 0.5, 1.0, 2.5, 5.0))


class LatencyMiddleware:
    """Plain ASGI (no per-request task as BaseHTTPMiddleware makes): times every HTTP request,
    labelled by its route's template so /api/jobs/{job_id} is one series, not one per job."""

    def __init__(self, app, metrics: Metrics):
        self.app, self.metrics = app, metrics

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        start, status = time.perf_counter(), [500]

        async def send_and_note(message):
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_and_note)
        finally:
            route = getattr(scope.get("route"), "path", "unmatched")
            self.metrics.http_latency.labels(scope["method"], route, str(status[0])).observe(
                time.perf_counter() - start)


@router.get("/metrics", include_in_schema=False)
def metrics(request: Request) -> Response:
    return Response(generate_latest(request.app.state.metrics.registry), media_type=CONTENT_TYPE_LATEST)


def install_metrics(app, cfg: Settings, dependencies=()) -> None:
    app.state.metrics = Metrics(cfg)
    app.add_middleware(LatencyMiddleware, metrics=app.state.metrics)
    app.include_router(router, dependencies=list(dependencies))
