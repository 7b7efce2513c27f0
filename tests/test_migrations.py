"""`alembic upgrade head` builds the schema on SQLite and PostgreSQL; downgrade removes it."""

from alembic import command
from sqlalchemy import create_engine, inspect

from api.db import alembic_config


def test_upgrade_creates_tables_and_history_index_then_downgrade_drops_them(database_url):
    cfg = alembic_config(database_url)
    command.upgrade(cfg, "head")
    engine = create_engine(database_url)
    insp = inspect(engine)
    assert {"gpu", "commit", "job", "result", "alembic_version"} <= set(insp.get_table_names())
    indexes = {i["name"]: i["column_names"] for i in insp.get_indexes("result")}
    assert indexes["ix_result_history"] == ["variant", "gpu_id", "m", "n", "k", "commit_id"]
    uniques = {u["name"] for u in insp.get_unique_constraints("result")}
    assert "uq_result_job_case" in uniques

    command.downgrade(cfg, "base")
    assert set(inspect(engine).get_table_names()) <= {"alembic_version"}
    engine.dispose()
