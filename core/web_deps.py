"""The web app's FastAPI dependencies, shared by the API's routes (api/routes/) and the dashboard's
pages (dashboard/): the settings the app was built with, and a database session.

Both are `async def` on purpose: FastAPI runs a plain `def` dependency on a worker thread, and
each such hop costs a request a turn in the thread pool's queue. Neither does I/O when it is
made (a Session takes a connection only when first used), so neither needs a thread. A write
then takes one hop, its endpoint, which checks the token first (api/auth.py authorize_write),
and a new job none: it is stored by the job intake's thread (api/intake.py). Under 50 clients,
six hops per POST had been most of its latency (docs/BENCHMARKS.md).

The session is bounded and short. A sync endpoint's session takes a connection on its first
query and holds it until closed, and between its endpoint and its close a request hops to a
thread once more (FastAPI validates a sync endpoint's response on one). With more requests in
flight than the pool has connections, the threads all waited for a connection while every
connection was held by a request waiting for a thread: 25 clients polling GET /api/jobs stalled
the API for the pool's 30 s timeout, then 500s (issue 37, docs/BENCHMARKS.md). So a request waits
on the event loop for one of GEMMWATCH_API_SESSIONS slots before its session is made, and the
pool has a connection for every slot and every thread beside them (core/records/db.py). And the session
is closed when the endpoint's response is built (scope="function"), not after it is sent: a
client that reads its answer slowly holds a socket, not a connection.
"""

from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import Depends, Request
from sqlalchemy.orm import Session

from core.records.db import session_factory
from core.settings import Settings


def settings_of(request: Request) -> Settings:
    """The settings the app was built with (api/app.py create_app): the one way a request reaches
    them; an endpoint takes them as `cfg: SettingsDep`, code that holds only the request calls this."""
    return request.app.state.settings


async def get_settings(request: Request) -> Settings:
    return settings_of(request)


async def get_db(request: Request) -> AsyncIterator[Session]:
    async with request.app.state.session_slots():
        session = session_factory(settings_of(request))()
        try:
            yield session
        finally:
            # Closed here, not on a thread: a session still holding a connection (a read that did
            # not commit) gives it back with one ROLLBACK round trip. Waiting for a thread instead
            # would hold the connection meanwhile.
            session.close()


SessionDep = Annotated[Session, Depends(get_db, scope="function")]
SettingsDep = Annotated[Settings, Depends(get_settings)]
