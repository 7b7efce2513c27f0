"""FastAPI dependencies: the settings the app was built with, and a database session.

Both are `async def` on purpose: FastAPI runs a plain `def` dependency on a worker thread, and
each such hop costs a request a turn in the thread pool's queue. Neither does I/O when it is
made (a Session takes a connection only when first used), so neither needs a thread. A write
then takes one hop, its endpoint, which checks the token first (api/auth.py authorize_write),
and a new job none: it is stored by the job intake's thread (api/intake.py). Under 50 clients,
six hops per POST had been most of its latency (docs/BENCHMARKS.md).
"""

from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import Depends, Request
from sqlalchemy.orm import Session

from core.db import session_factory
from core.settings import Settings


async def get_settings(request: Request) -> Settings:
    return request.app.state.settings


async def get_db(request: Request) -> AsyncIterator[Session]:
    session = session_factory(request.app.state.settings)()
    try:
        yield session
    finally:
        # Closed here, not on a thread: a session still holding a connection (a read that did
        # not commit) gives it back with one ROLLBACK round trip. Waiting for a thread instead
        # would hold the connection meanwhile, and with every thread waiting for a connection
        # held that way the API deadlocks (seen with a small thread pool, docs/BENCHMARKS.md).
        session.close()


SessionDep = Annotated[Session, Depends(get_db)]
SettingsDep = Annotated[Settings, Depends(get_settings)]
