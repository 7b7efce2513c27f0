"""Engine and session wiring, and the one way the schema is created: Alembic."""

from functools import lru_cache
from pathlib import Path

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.orm import Session, sessionmaker

from core.settings import Settings

MIGRATIONS_DIR = Path(__file__).resolve().parents[2] / "migrations"  # the project root, above core/records/


# A pool keeps this many connections open between uses; past it, up to its capacity, it opens
# one for a use and closes it after.
KEPT_CONNECTIONS = 5


@lru_cache(maxsize=8)
def engine_for(url: str, connections: int = 15) -> Engine:
    """The engine for a database, whose pool opens at most `connections` at once
    (Settings.db_connections says how many an API process needs)."""
    pool = {"pool_size": min(KEPT_CONNECTIONS, connections), "max_overflow": max(0, connections - KEPT_CONNECTIONS)}
    if url.startswith("sqlite"):
        # The API threads and the worker processes share one file: wait on locks
        # instead of failing, and let readers proceed while a writer commits (WAL).
        engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 30}, **pool)

        @event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_conn, _record):
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.close()

        return engine
    # pre_ping: a restarted PostgreSQL costs one failed ping, not a failed request.
    return create_engine(url, pool_pre_ping=True, **pool)


def engine_of(cfg: Settings) -> Engine:
    return engine_for(cfg.resolved_database_url, cfg.db_connections)


def session_factory(cfg: Settings) -> sessionmaker[Session]:
    return _sessionmaker_for(engine_of(cfg))


@lru_cache(maxsize=8)
def _sessionmaker_for(engine: Engine) -> sessionmaker[Session]:
    # One per engine (a new engine after engine_for.cache_clear() gets its own): a sessionmaker
    # builds a Session subclass when made, which cost every API request ~1 ms of CPU.
    return sessionmaker(engine, expire_on_commit=False)


def alembic_config(url: str):
    # Alembic (and Mako under it) imported here, not at the top: every worker and GPU process
    # imports this module, and only the processes that migrate need them.
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return cfg


def upgrade_database(cfg: Settings) -> None:
    url = cfg.resolved_database_url
    if url.startswith("sqlite:///"):
        Path(url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
    from alembic import command  # as alembic_config says: only a migrating process needs Alembic

    command.upgrade(alembic_config(url), "head")
