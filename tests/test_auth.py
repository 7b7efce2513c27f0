"""Writes need a valid token; a missing, wrong or revoked one gets 401 and writes nothing."""

import subprocess
import sys

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from api.app import create_app
from core.records.tokens import create_token, hash_token, revoke_token
from core.records.db import session_factory
from core.records.models import ApiToken, Job
from tests.conftest import ROOT

BODY = {"variants": ["naive"], "sizes": [[8, 8, 8]]}


def jobs(cfg) -> int:
    with session_factory(cfg)() as db:
        return db.scalar(select(func.count()).select_from(Job))


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer gw_wrong"}, {"Authorization": "Basic dXNlcjpwdw=="}])
def test_write_without_a_valid_token_is_401_and_writes_nothing(cfg, headers):
    client = TestClient(create_app(cfg))
    resp = client.post("/api/jobs", json=BODY, headers=headers)
    assert resp.status_code == 401 and resp.headers["www-authenticate"] == "Bearer"
    assert "gemmwatch token create" in resp.json()["detail"]
    assert jobs(cfg) == 0


def test_a_revoked_token_stops_working(cfg):
    with session_factory(cfg)() as db:
        token = create_token(db, "ci")
    client = TestClient(create_app(cfg), headers={"Authorization": f"Bearer {token}"})
    assert client.post("/api/jobs", json=BODY).status_code == 202
    with session_factory(cfg)() as db:
        assert revoke_token(db, "ci")
        assert not revoke_token(db, "ci")  # already revoked
    assert client.post("/api/jobs", json=BODY).status_code == 401
    assert jobs(cfg) == 1


def test_tokens_are_stored_hashed_and_names_are_unique(cfg):
    with session_factory(cfg)() as db:
        token = create_token(db, "bench")
        row = db.scalar(select(ApiToken).where(ApiToken.name == "bench"))
        assert row.token_hash == hash_token(token) and token not in row.token_hash
        with pytest.raises(ValueError, match="exists already"):
            create_token(db, "bench")


def test_reads_are_public_unless_configured(tmp_path, sqlite_url):
    from core.records.db import upgrade_database
    from tests.conftest import make_settings

    open_cfg = make_settings(tmp_path, sqlite_url)
    upgrade_database(open_cfg)
    assert TestClient(create_app(open_cfg)).get("/api/jobs").status_code == 200
    closed = make_settings(tmp_path, sqlite_url, GEMMWATCH_AUTH_READS="true")
    assert TestClient(create_app(closed)).get("/api/jobs").status_code == 401
    assert TestClient(create_app(closed)).get("/healthz").status_code == 200
    with session_factory(closed)() as db:
        token = create_token(db, "reader")
    assert TestClient(create_app(closed), headers={"Authorization": f"Bearer {token}"}).get("/api/jobs").status_code == 200


def test_cli_creates_lists_and_revokes_tokens(tmp_path):
    env = {"GEMMWATCH_DATA_DIR": str(tmp_path), "PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)}
    cli = [sys.executable, "-m", "cli.main", "token"]
    created = subprocess.run(cli + ["create", "laptop"], env=env, capture_output=True, text=True, check=True)
    token = created.stdout.strip()
    assert token.startswith("gw_") and len(token) > 40
    listed = subprocess.run(cli + ["list"], env=env, capture_output=True, text=True, check=True).stdout
    assert "laptop" in listed and "active" in listed and token not in listed
    assert subprocess.run(cli + ["revoke", "laptop"], env=env, capture_output=True, text=True).returncode == 0
    assert "revoked" in subprocess.run(cli + ["list"], env=env, capture_output=True, text=True).stdout
    again = subprocess.run(cli + ["revoke", "laptop"], env=env, capture_output=True, text=True)
    assert again.returncode == 2
