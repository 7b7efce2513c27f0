"""A token's last use is recorded to the minute, not written on every request (the write on
every request made all of a token's requests queue on one row: docs/BENCHMARKS.md), and
revoking a token still stops it at once."""

from datetime import timedelta

from sqlalchemy import select, update

from core.records.tokens import LAST_USED_RESOLUTION, revoke_token
from core.records.db import session_factory
from core.records.models import ApiToken

BODY = {"variants": ["naive"], "sizes": [[8, 8, 8]]}


def last_used(cfg):
    with session_factory(cfg)() as db:
        return db.scalar(select(ApiToken.last_used_at).where(ApiToken.name == "tests"))


def test_last_use_is_written_once_a_minute_and_revocation_is_immediate(cfg, client):
    assert last_used(cfg) is None
    assert client.post("/api/jobs", json=BODY).status_code == 202
    first = last_used(cfg)
    assert first is not None

    assert client.post("/api/jobs", json=BODY).status_code == 202
    assert last_used(cfg) == first  # within the minute: no write

    earlier = first - LAST_USED_RESOLUTION - timedelta(seconds=1)
    with session_factory(cfg)() as db:
        db.execute(update(ApiToken).where(ApiToken.name == "tests").values(last_used_at=earlier))
        db.commit()
    assert client.post("/api/jobs", json=BODY).status_code == 202
    assert last_used(cfg) > first  # a minute on: written again

    with session_factory(cfg)() as db:
        assert revoke_token(db, "tests")
    refused = client.post("/api/jobs", json=BODY)
    assert refused.status_code == 401 and "token" in refused.json()["detail"]
