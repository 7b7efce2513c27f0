"""Connections made when the API process starts, not by its first requests.

A fresh process under a burst of clients made its first requests each import the broker's
transport, open the publishing connection and fill the database pool while the others
queued behind them: most of the load test's worst latencies (docs/BENCHMARKS.md).
"""

from contextlib import asynccontextmanager

import anyio.to_thread
from fastapi import FastAPI
from sqlalchemy import text

from api.broker import publisher
from api.db import engine_for


@asynccontextmanager
async def lifespan(app: FastAPI):
    await anyio.to_thread.run_sync(warm_up, app.state.settings)
    yield


def warm_up(cfg) -> None:
    # A service that is down is no reason not to start: requests will say so themselves.
    try:
        with engine_for(cfg.resolved_database_url).connect() as conn:
            conn.execute(text("SELECT 1"))
    except Exception:
        pass
    try:
        with publisher(cfg).connection_for_write() as conn:
            conn.ensure_connection(max_retries=1)
    except Exception:
        pass
