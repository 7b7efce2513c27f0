"""The dashboard in a real browser: Debian's chromium, headless, driven by Playwright.

The real app runs under uvicorn on a free loopback port, on a database filled with result
rows as the worker writes them (tests/fake_results.py). Each page is opened, a filter is
changed, and the chart's points are read back from the page (Plotly keeps them on the
chart's element) to see that they changed. Screenshots go to pytest's temporary folder, or
to $GEMMWATCH_SCREENSHOT_DIR: `GEMMWATCH_SCREENSHOT_DIR=docs/screenshots make test` refreshes
the ones docs/DASHBOARD.md shows (a test run leaves the repository's files as they are).
"""

import math
import os
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import pytest
import uvicorn
from playwright.sync_api import Page, sync_playwright
from sqlalchemy import update

from api.app import create_app
from core.records.db import session_factory, upgrade_database
from core.records.models import Job
from tests.conftest import make_settings
from tests.parallel import free_port
from tests.fake_results import (REGRESSION_AT, SKINNY_M, SKINNY_N, H100, add_demo_history, add_job,
                                add_skinny_results, demo_sha)

# One xdist worker takes this whole module, so its sites and its browser are made once.
pytestmark = pytest.mark.xdist_group("browser")

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
SHOTS = Path(os.environ["GEMMWATCH_SCREENSHOT_DIR"]) if os.environ.get("GEMMWATCH_SCREENSHOT_DIR") else None
H100_4096 = "gpu=H100&size=4096x4096x4096&mode=cold"


@contextmanager
def serving(cfg):
    """The real app under uvicorn on a free loopback port; yields its base URL."""
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(create_app(cfg), host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 120  # a loaded machine
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The real app on a real port, and its settings (the test moves a running job along)."""
    tmp = tmp_path_factory.mktemp("browser")
    cfg = make_settings(tmp, f"sqlite:///{tmp / 'gemmwatch.db'}")
    upgrade_database(cfg)
    add_demo_history(cfg)
    running = add_job(cfg, None, [("naive", (4096, 4096, 4096), 5900.0, True, 51_300.0),
                                  ("smem_tiled", (4096, 4096, 4096), 8900.0, True, 51_200.0)],
                      status="running", total=5, current_case="thread_tile_8x8 4096x4096x4096", gpu=H100)
    add_job(cfg, None, [], status="queued", total=3)  # waits for a worker all along
    with serving(cfg) as url:
        yield {"url": url, "cfg": cfg, "running_job": running}


@pytest.fixture(scope="module")
def skinny_site(tmp_path_factory):
    """A second app, on a database of skinny shapes only (tests/fake_results.py SKINNY), so the
    cube demo above and its screenshots stay as they are."""
    tmp = tmp_path_factory.mktemp("browser-skinny")
    cfg = make_settings(tmp, f"sqlite:///{tmp / 'gemmwatch.db'}")
    upgrade_database(cfg)
    add_skinny_results(cfg)
    with serving(cfg) as url:
        yield {"url": url}


PAIRS_VARIANTS, PAIRS_SIZES = 50, (1024, 2048, 4096, 8192)  # 200 result pairs


@pytest.fixture(scope="module")
def pairs_site(tmp_path_factory):
    """Two commits of 50 variants at 4 sizes each on one GPU: the compare view at 200 pairs."""
    import random

    tmp = tmp_path_factory.mktemp("browser-pairs")
    cfg = make_settings(tmp, f"sqlite:///{tmp / 'gemmwatch.db'}")
    upgrade_database(cfg)
    rng = random.Random(5)
    base = [(f"kernel_variant_{i:02d}", (d, d, d), rng.uniform(5_000, 50_000)) for i in range(PAIRS_VARIANTS)
            for d in PAIRS_SIZES]
    add_job(cfg, "a11ce0001", [(v, size, g, True) for v, size, g in base], gpu=H100)
    add_job(cfg, "a11ce0002", [(v, size, g * rng.uniform(0.8, 1.25), True) for v, size, g in base], gpu=H100,
            commit_index=1)
    with serving(cfg) as url:
        yield {"url": url}


@pytest.fixture(scope="module")
def browser():
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: install Debian's chromium (apt-get install -y chromium; "
                    "`make test` does it through scripts/services.sh)", pytrace=False)
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield b
        b.close()


@contextmanager
def opened(browser, url: str):
    context = browser.new_context(viewport={"width": 1200, "height": 820}, base_url=url)
    pg = context.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda exc: errors.append(str(exc)))
    yield pg
    context.close()
    assert not errors, f"JavaScript errors on the page: {errors}"


@pytest.fixture
def page(browser, site):
    with opened(browser, site["url"]) as pg:
        yield pg


@pytest.fixture
def pairs_page(browser, pairs_site):
    with opened(browser, pairs_site["url"]) as pg:
        yield pg


@pytest.fixture
def skinny_page(browser, skinny_site):
    with opened(browser, skinny_site["url"]) as pg:
        yield pg


def axis(page: Page, div_id: str, name: str = "xaxis") -> dict:
    """An axis of the drawn chart, as Plotly settled it (type, tick values)."""
    return page.evaluate("([id, name]) => { const a = document.getElementById(id)._fullLayout[name];"
                         " return {type: a.type, tickvals: Array.from(a.tickvals || [])}; }", [div_id, name])


def chart(page: Page, div_id: str) -> dict[str, dict]:
    """The chart's traces by name, read from the live Plotly element once it has drawn."""
    page.wait_for_function("id => { const el = document.getElementById(id); return el && el._fullLayout; }",
                           arg=div_id, timeout=15_000)
    traces = page.evaluate(
        "id => document.getElementById(id).data.map(t => ({name: t.name, type: t.type,"
        " x: Array.from(t.x || []), y: Array.from(t.y || [])}))", div_id)
    return {t["name"]: t for t in traces}


@pytest.fixture(scope="module", autouse=True)
def screenshot_dir(tmp_path_factory):
    global SHOTS
    if SHOTS is None:
        SHOTS = tmp_path_factory.mktemp("screenshots")


def shoot(page: Page, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"))


def test_overview_ladder_and_size_filter(page):
    page.goto(f"/?{H100_4096}")
    ladder = chart(page, "ladder-0")
    bars = ladder["GFLOPS"]
    assert "warp_tile" in bars["x"] and "smem_swizzle_xor" not in bars["x"]  # broken: no speed
    assert ladder["failed verification"]["x"] == ["smem_swizzle_xor"] and ladder["failed verification"]["y"] == [0]
    assert any(name.startswith("cuBLAS") for name in ladder) and any(name.startswith("FP32 peak") for name in ladder)
    assert "of peak" in page.inner_text("#ladder-0")
    shoot(page, "overview")

    with page.expect_navigation():
        page.select_option("#size", "1024x1024x1024")
    assert "size=1024x1024x1024" in page.url  # the filter is in the permalink
    smaller = chart(page, "ladder-0")["GFLOPS"]
    assert smaller["x"] and smaller["y"] != bars["y"] and max(smaller["y"]) < max(bars["y"])


def test_history_regression_marker_and_size_filter(page):
    page.goto(f"/history?{H100_4096}")
    traces = chart(page, "history-chart")
    assert len(traces["warp_tile"]["x"]) == 12 and "warp_tile noise" in traces
    regression = traces["regression"]
    assert regression["x"] and set(regression["x"]) <= set(traces["warp_tile"]["x"][9:])
    assert "smem_swizzle_xor" in traces and len(traces["smem_swizzle_xor"]["x"]) == 11  # the broken commit is absent
    shoot(page, "history")

    before = traces["warp_tile"]["y"]
    with page.expect_navigation():
        page.select_option("#size", "2048x2048x2048")
    after = chart(page, "history-chart")
    assert "size=2048x2048x2048" in page.url
    assert after["warp_tile"]["y"] != before and len(after["warp_tile"]["y"]) == 12


def test_sweep_variant_filter(page):
    page.goto("/sweep?mode=cold")
    traces = chart(page, "sweep-chart")
    assert {"warp_tile · H100", "naive · A100"} <= set(traces)
    assert traces["warp_tile · H100"]["x"] == ["1024×1024×1024", "2048×2048×2048", "4096×4096×4096"]
    assert traces["failed verification"]["y"] == [0] * 6  # smem_swizzle_xor on both GPUs at 3 sizes
    shoot(page, "sweep")

    with page.expect_navigation():
        page.uncheck("#variants input[value=warp_tile]")
    after = chart(page, "sweep-chart")
    assert "warp_tile · H100" not in after and "naive · H100" in after
    assert "variant=naive" in page.url and "variant=warp_tile" not in page.url


def test_sweep_of_m_at_n_k_4096_over_skinny_shapes(skinny_page):
    page = skinny_page
    page.goto("/sweep?mode=cold&vary=m&n=4096&k=4096")
    traces = chart(page, "sweep-chart")
    assert {"warp_tile · H100", "naive · A100"} <= set(traces)
    for name in ("warp_tile · H100", "naive · A100"):
        assert traces[name]["x"] == list(SKINNY_M)  # M itself, not a size label, ascending
    warp = traces["warp_tile · H100"]["y"]
    assert warp == sorted(warp) and warp[0] < warp[-1] / 20  # a 128-row tile at M=1 does 1/128 real work
    assert axis(page, "sweep-chart") == {"type": "log", "tickvals": list(SKINNY_M)}
    assert page.input_value("#vary") == "m" and page.input_value("#n") == "4096" and page.input_value("#k") == "4096"
    shoot(page, "sweep-skinny")

    with page.expect_navigation():  # walk N instead: M is then held, at 4096 where N has its line
        page.select_option("#vary", "n")
    assert "vary=n" in page.url
    assert chart(page, "sweep-chart")["warp_tile · H100"]["x"] == list(SKINNY_N)
    assert page.input_value("#m") == "4096" and page.input_value("#k") == "4096"

    page.goto("/history?gpu=H100&mode=cold")  # the size menus list skinny shapes as M×N×K
    labels = page.eval_on_selector_all("#size option", "os => os.map(o => o.textContent)")
    assert {"16×4096×4096", "4096×16×4096", "64×8192×8192", "8192×8192×64"} <= set(labels)


def test_compare_commits_and_gpus(page):
    page.goto("/compare?gpu=H100&mode=cold")  # the two newest commits
    traces = chart(page, "compare-chart")
    labels = {y for t in traces.values() for y in t["y"]}
    assert "naive 4096×4096×4096" in labels and not any(y.startswith("smem_swizzle_xor") for y in labels)
    assert "failed verification" in page.inner_text("#compare-table")  # smem_swizzle_xor at the newest commit
    for width in (1200, 1400):  # every column inside the window (once cut at 1400 px)
        page.set_viewport_size({"width": width, "height": 820})
        overflow = page.evaluate("() => document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 0, f"/compare runs {overflow} px past a {width} px window"
    shoot(page, "compare")

    options = page.eval_on_selector_all("#a option", "os => os.map(o => o.value).filter(Boolean)")
    with page.expect_navigation():
        page.select_option("#a", options[-1])  # the oldest commit: warp_tile's 9 % regression shows
    assert f"a={options[-1]}" in page.url
    slower = chart(page, "compare-chart").get("B slower")
    assert slower and {y for y in slower["y"] if y.startswith("warp_tile ")} == {
        "warp_tile 1024×1024×1024", "warp_tile 2048×2048×2048", "warp_tile 4096×4096×4096"}
    assert all(0.88 < x < 0.94 for x, y in zip(slower["x"], slower["y"]) if y.startswith("warp_tile "))

    with page.expect_navigation():
        page.select_option("#by", "gpu")
    chart(page, "compare-chart")
    title = page.evaluate("() => document.getElementById('compare-chart')._fullLayout.title.text")
    assert title.startswith("B/A speed: H100 over A100 (GPU models)")


def tick_boxes(page: Page, div_id: str, axis_class: str) -> list[dict]:
    """Where each tick label of an axis was drawn (the SVG's own layout), top to bottom."""
    return page.eval_on_selector_all(
        f"#{div_id} .{axis_class} text",
        "ts => ts.map(t => { const b = t.getBoundingClientRect();"
        " return {text: t.textContent, left: b.left, right: b.right, top: b.top, bottom: b.bottom}; })")


def overlapping(boxes: list[dict]) -> list[tuple[str, str]]:
    return [(a["text"], b["text"]) for i, a in enumerate(boxes) for b in boxes[i + 1:]
            if a["left"] < b["right"] and b["left"] < a["right"] and a["top"] < b["bottom"] and b["top"] < a["bottom"]]


def test_compare_by_ratio_at_200_pairs_draws_every_label_apart(pairs_page):
    page = pairs_page
    page.goto("/compare?gpu=H100&mode=cold")
    traces = chart(page, "compare-chart")
    dots = sum(len(t["x"]) for name, t in traces.items() if name.startswith("B "))
    assert dots == PAIRS_VARIANTS * len(PAIRS_SIZES)
    labels = tick_boxes(page, "compare-chart", "yaxislayer-above .ytick")
    assert len(labels) == dots and len({b["text"] for b in labels}) == dots  # every pair named, once
    assert overlapping(labels) == [], "compare labels collide"
    assert overlapping(tick_boxes(page, "compare-chart", "xaxislayer-above .xtick")) == []
    # Sorted by change: the ratios read top to bottom only grow, and the table leads with the largest change.
    ratios = page.evaluate("() => { const d = document.getElementById('compare-chart');"
                           " const pts = d.data.flatMap(t => Array.from(t.y).map((y, i) => [y, t.x[i]]));"
                           " const order = d._fullLayout.yaxis.categoryarray;"
                           " const at = Object.fromEntries(pts); return order.map(y => at[y]); }")
    assert ratios == sorted(ratios)
    first = page.inner_text("#compare-table tr[data-direction] td:nth-child(5)")
    biggest = max(ratios, key=lambda r: abs(math.log(r)))
    assert first.startswith(f"{biggest:.3f}")
    shoot(page, "compare-200")  # the top of it: 200 rows run some 3,800 px down


def test_compare_and_roofline_empty_states_say_why(page):
    page.goto("/compare?by=mode&gpu=H100")  # the demo has cold results only
    assert "needs two timing modes" in page.inner_text("#compare-chart-reason")
    page.goto("/roofline?gpu=H100&mode=cold&size=64x64x64")
    assert "No results on H100 at 64×64×64" in page.inner_text("#roofline-chart-reason")


def test_roofline_puts_each_variant_under_the_gpus_roofs(page):
    page.goto(f"/roofline?{H100_4096.replace('size=4096x4096x4096&', '')}")
    traces = chart(page, "roofline-chart")
    assert {"memory 3.35 TB/s", "FP32 peak 67 TFLOPS", "cuBLAS FP32", "warp_tile", "naive"} <= set(traces)
    assert len(traces["warp_tile"]["x"]) == 3 and "smem_swizzle_xor" not in traces  # its newest results are wrong
    assert all(y < 66_908.16 for name, t in traces.items() if not name.startswith(("memory", "FP32")) for y in t["y"])
    assert overlapping(tick_boxes(page, "roofline-chart", "xaxislayer-above .xtick")) == []
    assert overlapping(tick_boxes(page, "roofline-chart", "yaxislayer-above .ytick")) == []
    assert "% of peak" in page.inner_text("#roofline-table")
    shoot(page, "roofline")
    with page.expect_navigation():
        page.select_option("#gpu", "A100")
    a100 = chart(page, "roofline-chart")
    assert "memory 2.04 TB/s" in a100 and "FP32 peak 19 TFLOPS" in a100


def test_job_page_shows_live_progress_then_results(page, site):
    job_id = site["running_job"]
    page.goto(f"/jobs/{job_id}")
    assert page.inner_text("#progress-text") == "2/5"
    assert "thread_tile_8x8" in page.inner_text("#current-case")
    shoot(page, "job-running")

    with session_factory(site["cfg"])() as db:  # the worker moves on: the page follows by itself
        db.execute(update(Job).where(Job.id == job_id).values(current_case="warp_tile 4096x4096x4096", progress_total=6))
        db.commit()
    page.wait_for_function("() => document.getElementById('progress-text').textContent === '2/6'", timeout=10_000)
    assert "warp_tile" in page.inner_text("#current-case")

    with page.expect_navigation(timeout=10_000):  # the page reloads itself once the job ends
        with session_factory(site["cfg"])() as db:
            db.execute(update(Job).where(Job.id == job_id).values(status="succeeded", current_case=None))
            db.commit()
    assert page.inner_text("#status") == "succeeded"
    results = chart(page, "job-chart")
    assert results["variant"]["x"] == ["naive 4096x4096x4096", "smem_tiled 4096x4096x4096"]
    assert page.locator("#results tr").count() == 3


def test_jobs_list_and_exports(page):
    page.goto("/jobs")
    assert page.locator("#jobs tr").count() > 10
    shoot(page, "jobs")
    with page.expect_navigation():
        page.select_option("#status", "queued")
    assert page.locator("#jobs tr").count() == 2 and "status=queued" in page.url
    csv = page.request.get(page.get_attribute("#export-csv", "href")).text()
    assert csv.startswith("id,status") and len(csv.splitlines()) == 2 and ",queued," in csv


def test_commit_page_puts_the_regressions_first_and_each_summary_link_lands_on_its_row(page):
    sha = demo_sha(REGRESSION_AT)
    page.goto(f"/commits/{sha}")
    statuses = page.eval_on_selector_all("#commit-results tr[data-status]", "rows => rows.map(r => r.dataset.status)")
    assert len(statuses) == 30 and statuses[:3] == ["regression"] * 3 and "regression" not in statuses[3:]
    first = page.eval_on_selector("#commit-results tr[data-status]", "r => r.id")
    # What `gemmwatch ci` links to: the page with the row's anchor, which the browser brings into view.
    page.goto(f"/commits/{sha}#{first}")
    assert page.evaluate("() => decodeURIComponent(location.hash.slice(1))") == first
    assert page.locator(f"#{first}").is_visible() and "warp_tile" in page.locator(f"#{first}").inner_text()
    wide = page.evaluate("() => document.documentElement.scrollWidth > window.innerWidth")
    assert not wide, "the commit table runs past the window"
    page.screenshot(path=str(SHOTS / "commit.png"), full_page=True)
    page.goto("/commits/0123456789abcdef")
    assert "No commit 0123456789abcdef has been measured" in page.locator("#commit-reason").inner_text()


def test_the_api_docs_render_with_no_internet(browser, site):
    """/docs is Swagger UI served whole by gemmwatch (a GPU cluster's server often has no internet):
    every request that leaves this server is refused here, and the page still lists the API."""
    with opened(browser, site["url"]) as pg:
        left: list[str] = []

        def only_here(route):
            if route.request.url.startswith(site["url"]):
                route.continue_()
            else:
                left.append(route.request.url)
                route.abort()

        pg.route("**/*", only_here)
        pg.goto("/docs")
        pg.wait_for_selector("text=POST/api/jobs", timeout=30_000)
        assert "gemmwatch" in pg.locator(".information-container .title").inner_text()
        assert left == [], left
        pg.goto("/redoc")
        assert pg.url.endswith("/docs")
