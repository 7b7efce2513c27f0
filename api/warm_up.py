"""Connections made when the API process starts, not by its first requests; the size of its
thread pool (GEMMWATCH_API_THREADS).

A fresh process under a burst of clients made its first requests each import the broker's
transport, open the publishing connection and fill the database pool while the others
queued behind them: most of the load test's worst latencies (docs/BENCHMARKS.md). The first
write also configured the ORM's mappers (11 ms), compiled the token lookup (5 ms) and loaded
Celery's result backend and the publishing channel's Redis connection (13 ms); all of that is
done here, before the first request.
"""

import gc
from contextlib import asynccontextmanager

import anyio.to_thread
from fastapi import FastAPI
from sqlalchemy import text
from sqlalchemy.orm import configure_mappers

from api import validation_pool
from core.records.tokens import find_token
from core.jobs.broker import publisher
from core.records.db import engine_of, session_factory


@asynccontextmanager
async def lifespan(app: FastAPI):
    anyio.to_thread.current_default_thread_limiter().total_tokens = app.state.settings.api_threads
    await anyio.to_thread.run_sync(warm_up, app.state.settings)
    # Everything imported and built so far lives as long as the process: ~136,000 objects, the
    # dashboard's Plotly most of them. Left in the collector's care, every full collection walked
    # them all, ~100 ms with the process idle and ~200 ms under load, and the jobs of whichever
    # group was then being written waited that long: the load test's whole p99. Frozen, a
    # collection walks only what requests made since.
    gc.collect()
    gc.freeze()
    yield
    # Jobs handed in before the shutdown are stored and answered, not dropped.
    await anyio.to_thread.run_sync(app.state.intake.close)
    validation_pool.shut_down()


def warm_up(cfg) -> None:
    configure_mappers()
    # A service that is down is no reason not to start: requests will say so themselves.
    try:
        with engine_of(cfg).connect() as conn:
            conn.execute(text("SELECT 1"))
        with session_factory(cfg)() as db:
            find_token(db, "")  # matches no token; compiles the lookup every write runs
    except Exception:
        pass
    try:
        app = publisher(cfg)
        with app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1)
        app.backend  # noqa: B018 (loaded on first use: an entry-point scan)
        with app.producer_or_acquire() as producer:
            client = getattr(producer.channel, "client", None)  # Redis: the channel's own connection
            if client is not None:
                client.ping()
    except Exception:
        pass
