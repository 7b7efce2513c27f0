"""The job page's Cancel button in a real browser (Debian's chromium through Playwright).

Someone who opened the page without a session types a write token into the form; someone who
logged in (/login, the signed cookie) just presses the button. A wrong token cancels nothing.
"""

import pytest
from playwright.sync_api import sync_playwright

from core.records.tokens import create_token
from core.records.db import session_factory, upgrade_database
from core.records.models import Job
from tests.conftest import make_settings
from tests.fake_results import add_job
from tests.test_browser import CHROMIUM, CHROMIUM_ARGS


@pytest.fixture
def site(tmp_path, live_server):
    cfg = make_settings(tmp_path, f"sqlite:///{tmp_path / 'gemmwatch.db'}")
    upgrade_database(cfg)
    with session_factory(cfg)() as db:
        token = create_token(db, "browser", scopes=("admin",))  # the page owner: these jobs are no token's
    return {"url": live_server(cfg), "cfg": cfg, "token": token}


@pytest.fixture
def page(site):
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing (apt-get install -y chromium)", pytrace=False)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        context = browser.new_context(base_url=site["url"])
        pg = context.new_page()
        errors: list[str] = []
        pg.on("pageerror", lambda exc: errors.append(str(exc)))
        yield pg
        browser.close()
    assert not errors, f"JavaScript errors on the page: {errors}"


def status(site, job_id: int) -> str:
    with session_factory(site["cfg"])() as db:
        return db.get(Job, job_id).status


def test_without_a_session_the_button_asks_for_a_token(page, site):
    job_id = add_job(site["cfg"], None, [], status="queued", total=3)
    page.goto(f"/jobs/{job_id}")
    assert page.is_visible("#cancel-token")

    page.fill("#cancel-token", "gw_not-a-real-token")
    with page.expect_navigation():
        page.click("#cancel-job")
    assert "write token is needed" in page.inner_text("#cancel-message")
    assert status(site, job_id) == "queued" and page.inner_text("#status") == "queued"

    page.fill("#cancel-token", site["token"])
    with page.expect_navigation():
        page.click("#cancel-job")
    assert page.inner_text("#status") == "cancelled" and status(site, job_id) == "cancelled"
    assert page.inner_text("#cancel-message").startswith("Cancelled")
    assert page.locator("#cancel-job").count() == 0  # nothing left to cancel


def test_after_logging_in_the_button_alone_cancels_a_running_job(page, site):
    job_id = add_job(site["cfg"], None, [("naive", (64, 64, 64), 100.0, True)], status="running", total=4,
                     current_case="smem_tiled 64x64x64")
    page.goto(f"/login?next=/jobs/{job_id}")
    page.fill("#token", site["token"])
    with page.expect_navigation():
        page.click("#log-in")
    assert page.inner_text("#status") == "running"
    assert page.locator("#cancel-token").count() == 0  # the session stands for the token

    with page.expect_navigation():
        page.click("#cancel-job")
    assert page.inner_text("#status") == "cancelled" and status(site, job_id) == "cancelled"
    assert page.locator("#results tr").count() == 2  # the result it had is kept

    ended = add_job(site["cfg"], None, [("naive", (64, 64, 64), 100.0, True)])
    page.goto(f"/jobs/{ended}")
    assert page.locator("#cancel-form").count() == 0  # a finished job offers no button
