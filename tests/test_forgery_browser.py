"""Forms that can't be forged, text that stays text: issue 20's browser findings, in Debian's
chromium (Playwright) against the real server (uvicorn in its own process).

The attacker's page is served from another port of the same host, 127.0.0.1: the same *site* as
the dashboard, so the browser sends the visitor's SameSite=Lax session cookie along with its form
(findings 4 and 5 were reproduced that way). Every form post of the dashboard must now come from
the dashboard's own origin (api/same_origin.py).
"""

import threading
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest
from sqlalchemy import func, select

from core.records.db import session_factory, upgrade_database
from core.records.models import ApiToken, DashboardSession, Job
from core.records.tokens import create_token
from dashboard.login import COOKIE
from tests.conftest import HTTP_TIMEOUT_S, make_settings
from tests.fake_results import add_job
from tests.test_browser import browser  # noqa: F401  (the real chromium, shared fixture)

EVIL_GPU_NAME = '<a href="https://evil.example/">x</a><span style="font-size:60px">big</span>'


@pytest.fixture
def site(tmp_path, live_server):
    cfg = make_settings(tmp_path, f"sqlite:///{tmp_path / 'gemmwatch.db'}")
    upgrade_database(cfg)
    with session_factory(cfg)() as db:
        tokens = {"visitor": create_token(db, "visitor", scopes=("admin",)),
                  "attacker": create_token(db, "attacker", scopes=("jobs", "results"))}
    return {"url": live_server(cfg, GEMMWATCH_AUTH_READS="true"), "cfg": cfg, "tokens": tokens}


@contextmanager
def attacker_site(html: str):
    """A page on another port of 127.0.0.1, as anything else running on the dashboard's host could serve."""
    body = html.encode()

    class Page(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Page)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        thread.join(10)


def auto_submit(action: str, fields: dict[str, str] | None = None) -> str:
    inputs = "".join(f'<input type="hidden" name="{k}" value="{v}">' for k, v in (fields or {}).items())
    return (f'<html><body><form id="f" method="post" action="{action}">{inputs}</form>'
            '<script>document.getElementById("f").submit()</script></body></html>')


@pytest.fixture
def visitor(browser, site):  # noqa: F811
    """A browser that logged in to the dashboard with the visitor's token."""
    context = browser.new_context()
    page = context.new_page()
    page.goto(site["url"] + "/login?next=/jobs")
    page.fill("#token", site["tokens"]["visitor"])
    with page.expect_navigation():
        page.click("#log-in")
    assert page.url == site["url"] + "/jobs"
    yield context, page
    context.close()


def session_cookie(context) -> str:
    return next(c["value"] for c in context.cookies() if c["name"] == COOKIE)


def sessions_of(cfg, token_name: str) -> int:
    with session_factory(cfg)() as db:
        return db.scalar(select(func.count()).select_from(DashboardSession).join(ApiToken)
                         .where(ApiToken.name == token_name, DashboardSession.ended_at.is_(None)))


def test_finding_4_a_page_on_another_port_cannot_press_cancel(site, visitor):
    context, page = visitor
    job_id = add_job(site["cfg"], None, [], status="queued", total=3)
    target = f"{site['url']}/jobs/{job_id}/cancel"
    with attacker_site(auto_submit(target)) as evil:
        with page.expect_response(lambda r: r.url == target and r.request.method == "POST") as answer:
            page.goto(evil)
    assert answer.value.status == 403 and "refused" in answer.value.text()
    with session_factory(site["cfg"])() as db:
        assert db.get(Job, job_id).status == "queued"
    # The visitor's own button, on the job page, still works (same origin).
    page.goto(f"{site['url']}/jobs/{job_id}")
    with page.expect_navigation():
        page.click("#cancel-job")
    assert page.inner_text("#status") == "cancelled"


def test_finding_5_a_page_on_another_port_cannot_log_the_visitor_in_as_someone_else(site, visitor):
    context, page = visitor
    before = session_cookie(context)
    target = f"{site['url']}/login"
    with attacker_site(auto_submit(target, {"token": site["tokens"]["attacker"], "next": "/jobs"})) as evil:
        with page.expect_response(lambda r: r.url == target and r.request.method == "POST") as answer:
            page.goto(evil)
    assert answer.value.status == 403
    assert session_cookie(context) == before  # still the visitor's own session
    assert sessions_of(site["cfg"], "attacker") == 0 and sessions_of(site["cfg"], "visitor") == 1


def test_logging_out_ends_the_session_on_the_server(browser, site, visitor):  # noqa: F811
    context, page = visitor
    kept = session_cookie(context)
    with page.expect_navigation():
        page.click("#log-out button")
    assert "/login" in page.url and sessions_of(site["cfg"], "visitor") == 0
    replay = httpx.get(site["url"] + "/jobs", cookies={COOKIE: kept}, follow_redirects=False, timeout=HTTP_TIMEOUT_S)
    assert replay.status_code == 303 and replay.headers["location"].startswith("/login")


def test_no_other_page_may_frame_the_dashboard(browser, site):  # noqa: F811
    context = browser.new_context()
    page = context.new_page()
    with attacker_site(f'<iframe src="{site["url"]}/login"></iframe>') as evil:
        with page.expect_console_message(predicate=lambda msg: "frame-ancestors" in msg.text, timeout=15_000) as refusal:
            page.goto(evil)
    context.close()
    assert "has been blocked" in refusal.value.text and "frame-ancestors 'none'" in refusal.value.text


def test_finding_7_a_gpu_name_is_drawn_as_text_in_the_chart(browser, site):  # noqa: F811
    gpu = {"uuid": "GPU-evil-0001", "name": EVIL_GPU_NAME, "model": "H100", "sm_count": 132}
    batch = {"run_id": "run-evil-000001", "gpu": gpu,
             "results": [{"variant": "naive", "m": 128, "n": 128, "k": 128, "verified": True, "median_ms": 0.01,
                          "gflops": 419.4, "n_samples": 10}]}
    posted = httpx.post(site["url"] + "/api/results", json=batch,
                        headers={"Authorization": f"Bearer {site['tokens']['attacker']}"}, timeout=HTTP_TIMEOUT_S)
    assert posted.status_code == 201, posted.text
    context = browser.new_context(extra_http_headers={"Authorization": f"Bearer {site['tokens']['visitor']}"})
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(site["url"] + "/?size=128x128x128")
    page.wait_for_function("() => { const el = document.getElementById('ladder-0'); return el && el._fullLayout; }")
    drawn = page.evaluate("""() => {
        const chart = document.getElementById('ladder-0');
        return {links: chart.querySelectorAll('a').length,
                big: Array.from(chart.querySelectorAll('*')).filter(e => getComputedStyle(e).fontSize === '60px').length,
                title: chart.querySelector('.gtitle').textContent};
    }""")
    context.close()
    assert drawn["links"] == 0 and drawn["big"] == 0, drawn
    assert drawn["title"].startswith(EVIL_GPU_NAME), drawn  # shown, as the characters it is made of
    assert errors == []


def test_every_page_works_under_the_policy_without_one_violation(browser, tmp_path, live_server):  # noqa: F811
    """The dashboard's own scripts and Plotly run under `script-src 'self'` (no inline script, no eval)."""
    from tests.fake_results import add_demo_history

    cfg = make_settings(tmp_path, f"sqlite:///{tmp_path / 'demo.db'}")
    upgrade_database(cfg)
    add_demo_history(cfg)
    running = add_job(cfg, None, [("naive", (1024, 1024, 1024), 900.0, True)], status="running", total=3)
    url = live_server(cfg)
    context = browser.new_context()
    context.add_init_script("window.__violations = [];"
                            "document.addEventListener('securitypolicyviolation',"
                            " e => window.__violations.push(e.violatedDirective + ' ' + e.blockedURI));")
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    charts = {"/": "ladder-0", "/history": "history-chart", "/sweep": "sweep-chart", "/compare": "compare-chart",
              "/roofline": "roofline-chart",
              f"/jobs/{running}": "job-chart", "/jobs": None, "/fleet": None, "/login": None}
    for path, chart_id in charts.items():
        policy = page.goto(url + path).headers["content-security-policy"]
        assert "script-src 'self';" in policy and "frame-ancestors 'none'" in policy, path
        if chart_id:
            page.wait_for_function("id => { const el = document.getElementById(id); return el && el._fullLayout; }",
                                   arg=chart_id, timeout=15_000)
        assert page.evaluate("window.__violations") == [], path
    # The filters still submit themselves (dashboard.js, not an onchange attribute).
    page.goto(url + "/history")
    with page.expect_navigation():
        page.select_option("#gpu", "A100")
    assert "gpu=A100" in page.url
    context.close()
    assert errors == []
