"""Alembic environment: the URL comes from the caller's config or from Settings."""

from alembic import context
from sqlalchemy import engine_from_config, pool

from core.records.models import Base
from core.settings import settings

config = context.config
url = config.get_main_option("sqlalchemy.url") or settings.resolved_database_url


def run_migrations_offline() -> None:
    context.configure(url=url, target_metadata=Base.metadata, literal_binds=True, render_as_batch=True)
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connectable = engine_from_config({"sqlalchemy.url": url}, prefix="sqlalchemy.", poolclass=pool.NullPool)
    with connectable.connect() as connection:
        # Batch mode lets later migrations alter SQLite tables (which lack ALTER COLUMN).
        context.configure(connection=connection, target_metadata=Base.metadata, render_as_batch=True)
        with context.begin_transaction():
            context.run_migrations()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
