"""Dashboard pages render from the database; charts show verified results only.

Each test runs on SQLite and on PostgreSQL (the `client`/`cfg` fixtures).
"""

import csv
import io
import json
import re

import plotly.graph_objects as go
import pytest
from sqlalchemy import event, update

from core.records.db import engine_of, session_factory
from core.records.models import Job
from dashboard.roofs import peak
from dashboard.sweep import SweepFilter, settle
from tests.fake_results import A100, H100, add_job, add_result

PAGES = ["/", "/history", "/sweep", "/compare", "/roofline", "/jobs"]
H100_4096 = "gpu=H100&size=4096x4096x4096&mode=cold"
CHART = 'class="chart"'  # what a page with a chart holds (dashboard/templates/_macros.html)


def figure(html: str, div_id: str) -> dict:
    """The figure Plotly is given (static/dashboard.js draws it), read back out of the page."""
    match = re.search(rf'<script type="application/json" id="{div_id}-figure">(.*?)</script>', html, re.S)
    assert match, f"no chart {div_id} on the page"
    fig = json.loads(match.group(1))
    # dashboard/figures.py builds plain dicts: plotly.py's own classes check every property here.
    go.Figure({"data": fig["data"], "layout": fig["layout"]})
    for axis in ("xaxis", "yaxis"):  # Plotly.js reads an axis title as {"text": ...}, never a bare string
        assert set(fig["layout"][axis]["title"]) == {"text"}, fig["layout"][axis]
    return fig


def chart_data(html: str, div_id: str = "history-chart") -> list[dict]:
    """The traces Plotly was given, read back out of the page."""
    return figure(html, div_id)["data"]


def traces(html: str, div_id: str = "history-chart") -> dict[str, dict]:
    return {t["name"]: t for t in chart_data(html, div_id)}


def chart_layout(html: str, div_id: str) -> dict:
    """The layout Plotly was given."""
    return figure(html, div_id)["layout"]


def rows_csv(text: str) -> list[dict]:
    return list(csv.DictReader(io.StringIO(text)))


def test_plotly_js_is_served_locally(client):
    resp = client.get("/static/plotly/plotly.min.js")
    assert resp.status_code == 200 and b"plotly.js" in resp.content[:200]
    for path in PAGES:
        page = client.get(path).text
        assert 'src="/static/plotly/plotly.min.js"' in page and "cdn" not in page.lower(), path


def test_empty_pages_say_why(client):
    reasons = {"/": "No results yet", "/history": "No verified results", "/sweep": "No results",
               "/compare": "needs two commits", "/roofline": "No verified results yet", "/jobs": "No jobs"}
    for path, words in reasons.items():
        page = client.get(path).text
        assert 'class="reason"' in page and words in page, path
        assert CHART not in page, path
        assert client.get(path, params={"format": "json"}).json()["rows"] == []


def test_history_draws_one_point_per_commit_per_variant(client, cfg):
    for i, sha in enumerate(["aaaa01", "bbbb02", "cccc03"]):
        add_result(cfg, "naive", (4096, 4096, 4096), sha, gflops=5000.0 + i, commit_index=i, message=f"step {i}\n\nbody")
        add_result(cfg, "smem_tiled", (4096, 4096, 4096), sha, gflops=9000.0 + i, commit_index=i)
    add_result(cfg, "naive", (1024, 1024, 1024), "dddd04", gflops=1.0, commit_index=3)  # other size
    add_result(cfg, "smem_tiled", (4096, 4096, 4096), "eeee05", gflops=1e9, verified=False, commit_index=4)

    # m/n/k (older links) and size= (the form) name the same view.
    for query in ("gpu=H100&m=4096&n=4096&k=4096&mode=cold", H100_4096):
        t = traces(client.get(f"/history?{query}").text)
        assert t["naive"]["x"] == ["aaaa01", "bbbb02", "cccc03"]
        assert t["naive"]["y"] == [5000.0, 5001.0, 5002.0]
        # The unverified result (commit eeee05) is not drawn as a speed.
        assert t["smem_tiled"]["x"] == ["aaaa01", "bbbb02", "cccc03"]
        assert "cuBLAS (same jobs)" in t and "regression" not in t  # too few commits for a verdict
    hover = t["naive"]["text"][1]  # sha, first line of the message, date, noise
    assert all(part in hover for part in ("bbbb02", "step 1<br>", "2026-01-01 01:00:00 UTC", "noise ±0.30%"))
    band = t["naive noise"]  # ±noise around the series, drawn as one closed shape
    assert band["fill"] == "toself" and band["y"][0] == pytest.approx(5000 * 1.003)
    assert band["y"][-1] == pytest.approx(5000 * 0.997)

    other = traces(client.get("/history?gpu=H100&size=1024x1024x1024&mode=cold").text)
    assert other["naive"]["x"] == ["dddd04"] and "smem_tiled" not in other

    none = client.get("/history?gpu=A100&m=4096&n=4096&k=4096&mode=cold").text
    assert 'id="history-chart-reason"' in none and "A100" in none
    # With nothing in the URL it opens on the series of the most commits (4096³, three), not on the
    # newest verified result's (1024³, one commit alone); a URL that names the size is obeyed.
    opened = client.get("/history").text
    assert traces(opened)["naive"]["x"] == ["aaaa01", "bbbb02", "cccc03"]
    assert traces(client.get("/history?size=1024x1024x1024").text)["naive"]["x"] == ["dddd04"]


def test_history_marks_regressions_with_the_regression_module(client, cfg):
    values = [10_000, 10_030, 9_980, 10_010, 9_990, 10_020, 9_000, 10_000]  # commit 6 drops 10 %
    for i, g in enumerate(values):
        add_result(cfg, "warp_tile", (2048, 2048, 2048), f"c0ffee{i:02d}", gflops=float(g), commit_index=i, noise=0.001)
    page = client.get("/history?gpu=H100&size=2048&mode=cold").text
    t = traces(page)
    assert t["regression"]["x"] == ["c0ffee06"] and t["regression"]["y"] == [9000.0]
    assert "below the mean of 6 earlier results" in t["regression"]["customdata"][0][2]
    assert 'id="regressions"' in page
    rows = client.get("/history?gpu=H100&size=2048&mode=cold&format=json").json()["rows"]
    assert [r["sha"] for r in rows if r["regression"]] == ["c0ffee06"]

    # Only the newest `last` commits are drawn; the older ones still serve as the baseline.
    t = traces(client.get("/history?gpu=H100&size=2048&mode=cold&last=2").text)
    assert t["warp_tile"]["x"] == ["c0ffee06", "c0ffee07"] and t["regression"]["x"] == ["c0ffee06"]


def test_history_of_only_unverified_results_says_why(client, cfg):
    add_result(cfg, "naive", (512, 512, 512), "aaaa01", gflops=100.0)
    add_result(cfg, "broken", (256, 256, 256), "aaaa01", gflops=1e9, verified=False)
    page = client.get("/history?gpu=H100&size=256&mode=cold").text
    assert CHART not in page and "failed verification" in page and "1e+09" not in page


def test_fp32_peak_from_sm_count_lanes_and_max_clock():
    assert peak(132, "9.0", 1980).gflops == pytest.approx(66_908.16)  # the H100 figure in docs/ARCHITECTURE.md
    assert peak(108, "8.0", 1410).gflops == pytest.approx(19_491.84)  # A100: 64 FP32 lanes per SM
    assert peak(132, "9.0", None).gflops is None and "unknown" in peak(132, "9.0", None).how
    assert peak(None, None, 1980).gflops is None
    assert peak(132, "9.0", 1980, "bf16").gflops == pytest.approx(1_070_530.56)  # 4096 flops per SM per clock
    assert peak(40, "7.5", 1590, "bf16").gflops is None  # Turing: no BF16 tensor cores


def test_overview_shows_each_gpus_latest_ladder_and_failures(client, cfg):
    size = (4096, 4096, 4096)
    add_job(cfg, "aaaa01", [("naive", size, 5000.0, True, 50_000.0), ("warp_tile", size, 30_000.0, True, 50_000.0),
                            ("smem_tiled", size, 8000.0, True, 50_000.0)])
    # Newer results replace older ones; a newest result that fails verification is a failure, not a speed.
    add_job(cfg, "bbbb02", [("warp_tile", size, 33_000.0, True, 52_000.0), ("smem_tiled", size, 9e9, False)],
            commit_index=1)
    add_job(cfg, "bbbb02", [("naive", size, 2000.0, True, 17_000.0)], gpu=A100, commit_index=1)
    add_job(cfg, "bbbb02", [("naive", size, 1.0, True)], gpu={**H100, "uuid": "GPU-other", "name": "Mystery H100",
                                                              "max_sm_clock_mhz": None}, commit_index=1)
    page = client.get("/?size=4096x4096x4096&mode=cold").text
    h100 = traces(page, "ladder-2")  # ladders sorted by GPU name: Mystery H100, NVIDIA A100-SXM4-80GB, NVIDIA H100 80GB HBM3
    assert h100["GFLOPS"]["x"] == ["naive", "warp_tile"] and h100["GFLOPS"]["y"] == [5000.0, 33_000.0]
    assert h100["failed verification"]["x"] == ["smem_tiled"] and h100["failed verification"]["y"] == [0]
    assert "9000000000" not in page and "9,000,000,000" not in page
    assert h100["cuBLAS 51,000 GFLOPS"]["y"][0] == 51_000.0 and "FP32 peak 66,908 GFLOPS" in h100
    assert h100["GFLOPS"]["text"] == ["7.5% of peak", "49.3% of peak"]
    assert "FP32 peak 66.9 TFLOPS = 132 SMs × 128 lanes × 2 × 1980 MHz" in page
    assert "FP32 peak 19.5 TFLOPS = 108 SMs × 64 lanes" in page
    assert "FP32 peak unknown: no maximum SM clock recorded" in page  # never an invented number
    assert not any(name.startswith("FP32 peak") for name in traces(page, "ladder-0"))

    only_a100 = client.get("/?gpu=A100&size=4096x4096x4096&mode=cold").text
    assert "ladder-1" not in only_a100 and traces(only_a100, "ladder-0")["GFLOPS"]["y"] == [2000.0]
    missing = client.get("/?size=64x64x64&mode=cold").text
    assert 'id="overview-reason"' in missing and "64×64×64" in missing

    rows = rows_csv(client.get("/?size=4096x4096x4096&mode=cold&gpu=H100&format=csv").text)
    smem = next(r for r in rows if r["gpu"] == "NVIDIA H100 80GB HBM3" and r["variant"] == "smem_tiled")
    assert smem["verified"] == "False" and smem["gflops"] == "" and smem["error"] == "wrong result"
    warp = next(r for r in rows if r["variant"] == "warp_tile")
    assert float(warp["pct_of_fp32_peak"]) == pytest.approx(100 * 33_000 / 66_908.16)


def test_sweep_plots_gflops_against_size(client, cfg):
    for dim, g in ((2048, 20_000.0), (1024, 10_000.0), (4096, 30_000.0)):
        add_result(cfg, "warp_tile", (dim, dim, dim), "aaaa01", gflops=g)
        add_result(cfg, "naive", (dim, dim, dim), "aaaa01", gflops=g / 5)
        add_result(cfg, "naive", (dim, dim, dim), "aaaa01", gflops=g / 6, gpu=A100)
    add_result(cfg, "warp_tile", (8192, 8192, 8192), "bbbb02", gflops=1e9, verified=False, commit_index=1)
    t = traces(client.get("/sweep?mode=cold").text, "sweep-chart")
    assert set(t) == {"warp_tile · H100", "naive · H100", "naive · A100", "failed verification"}
    assert t["warp_tile · H100"]["x"] == ["1024×1024×1024", "2048×2048×2048", "4096×4096×4096"]  # by flop count
    assert t["warp_tile · H100"]["y"] == [10_000.0, 20_000.0, 30_000.0]
    assert t["failed verification"]["x"] == ["8192×8192×8192"] and t["failed verification"]["y"] == [0]

    chosen = traces(client.get("/sweep?mode=cold&variant=naive&gpu=A100").text, "sweep-chart")
    assert set(chosen) == {"naive · A100"}
    at_commit = traces(client.get("/sweep?mode=cold&sha=aaaa").text, "sweep-chart")
    assert "failed verification" not in at_commit  # the broken result belongs to bbbb02
    assert CHART not in client.get("/sweep?mode=hot").text


SKINNY_CASES = [  # (size, GFLOPS) of one variant; GFLOPS made distinct so each point is known by it
    ((1, 4096, 4096), 100.0), ((16, 4096, 4096), 1600.0), ((64, 4096, 4096), 6400.0), ((4096, 4096, 4096), 40_000.0),
    ((4096, 16, 4096), 1700.0), ((4096, 64, 4096), 6500.0), ((64, 8192, 8192), 9000.0), ((8192, 8192, 64), 8000.0),
]


def test_sweep_one_dimension_with_the_others_held(client, cfg):
    add_job(cfg, "aaaa01", [("warp_tile", size, g, True) for size, g in SKINNY_CASES])
    add_job(cfg, "aaaa01", [("warp_tile", size, g / 2, True) for size, g in SKINNY_CASES[:3]], gpu=A100)
    add_result(cfg, "naive", (16, 4096, 4096), "bbbb02", gflops=1e9, verified=False, commit_index=1)

    page = client.get("/sweep?mode=cold&vary=m&n=4096&k=4096").text
    t, layout = traces(page, "sweep-chart"), chart_layout(page, "sweep-chart")
    assert t["warp_tile · H100"]["x"] == [1, 16, 64, 4096] and t["warp_tile · H100"]["y"] == [100.0, 1600.0, 6400.0, 40_000.0]
    assert t["warp_tile · A100"]["x"] == [1, 16, 64] and t["warp_tile · A100"]["y"] == [50.0, 800.0, 3200.0]
    assert t["failed verification"]["x"] == [16] and t["failed verification"]["y"] == [0]
    assert layout["xaxis"]["type"] == "log" and layout["xaxis"]["tickvals"] == [1, 16, 64, 4096]
    assert layout["title"]["text"] == "GFLOPS against M at N=4096, K=4096, cold L2"
    # The held dimensions' menus list the values measured, with the held one chosen.
    assert re.search(r'<select name="n".*?<option value="4096" selected>4096</option>', page, re.S)
    k_menu = re.findall(r'<select name="k".*?</select>', page, re.S)[0]
    assert re.findall(r'<option value="(\d+)"', k_menu) == ["64", "4096", "8192"]  # every K measured, ascending
    assert '<select name="m"' not in page

    # N walked at M=K=4096; M=4096 and K=4096 chosen by themselves, as the longest line.
    page = client.get("/sweep?mode=cold&vary=n").text
    t = traces(page, "sweep-chart")
    assert t == {"warp_tile · H100": t["warp_tile · H100"]} and t["warp_tile · H100"]["x"] == [16, 64, 4096]
    assert chart_layout(page, "sweep-chart")["title"]["text"] == "GFLOPS against N at M=4096, K=4096, cold L2"
    # K walked at M=8192, N=8192 has the one shape; held values nothing was measured at say so.
    k_sweep = traces(client.get("/sweep?mode=cold&vary=k&m=8192&n=8192").text, "sweep-chart")
    assert k_sweep["warp_tile · H100"]["x"] == [64]
    nothing = client.get("/sweep?mode=cold&vary=m&n=4096&k=16").text
    assert CHART not in nothing and "No results at N=4096, K=16" in nothing
    assert re.search(r'<select name="k".*?<option value="16" selected>16</option>', nothing, re.S)

    # The exports carry the same filter and hold only its rows.
    body = client.get("/sweep?mode=cold&vary=m&n=4096&k=4096&gpu=H100&format=json").json()
    assert body["filters"] == {"gpus": ["H100"], "variants": [], "mode": "cold", "sha": None, "vary": "m",
                               "m": None, "n": 4096, "k": 4096, "precision": "fp32", "form": "rrr"}
    assert [(r["m"], r["n"], r["k"], r["gflops"]) for r in body["rows"]] == [
        (16, 4096, 4096, None), (1, 4096, 4096, 100.0), (16, 4096, 4096, 1600.0), (64, 4096, 4096, 6400.0),
        (4096, 4096, 4096, 40_000.0)]
    rows = rows_csv(client.get("/sweep?mode=cold&vary=n&m=4096&k=4096&format=csv").text)
    assert [(r["m"], r["n"], r["k"]) for r in rows] == [("4096", "16", "4096"), ("4096", "64", "4096"), ("4096", "4096", "4096")]

    # The default still walks every size by flop count (a tie by M, N, K), skinny ones among them.
    every = traces(client.get("/sweep?mode=cold&gpu=H100").text, "sweep-chart")["warp_tile · H100"]
    assert every["x"] == ["1×4096×4096", "16×4096×4096", "4096×16×4096", "64×4096×4096", "4096×64×4096",
                          "64×8192×8192", "8192×8192×64", "4096×4096×4096"]
    assert client.get("/sweep?vary=mnk").status_code == 422 and client.get("/sweep?vary=m&n=0").status_code == 422


def test_sweep_holds_what_the_url_leaves_out_on_the_longest_line():
    sizes = [(1, 4096, 4096), (16, 4096, 4096), (64, 4096, 4096), (64, 8192, 8192), (128, 8192, 8192),
             (4096, 16, 4096)]
    assert settle(SweepFilter(vary="m"), sizes) == SweepFilter(vary="m", n=4096, k=4096)
    assert settle(SweepFilter(vary="m", n=8192), sizes) == SweepFilter(vary="m", n=8192, k=8192)
    assert settle(SweepFilter(vary="m", m=16, n=8192, k=4096), sizes) == SweepFilter(vary="m", n=8192, k=4096)
    assert settle(SweepFilter(vary="k", m=4096), sizes) == SweepFilter(vary="k", m=4096, n=16)
    assert settle(SweepFilter(vary="n", m=5), sizes) == SweepFilter(vary="n", m=5, k=None)  # nothing there
    # A tie between lines goes to the larger held values; the default ignores m, n, k.
    assert settle(SweepFilter(vary="m"), [(1, 8, 8), (2, 8, 8), (1, 9, 9), (2, 9, 9)]) == SweepFilter(vary="m", n=9, k=9)
    assert settle(SweepFilter(m=1, n=2, k=3), sizes) == SweepFilter()


def test_size_menus_list_skinny_shapes_as_m_n_k(client, cfg):
    for size, g in SKINNY_CASES:
        add_result(cfg, "warp_tile", size, "aaaa01", gflops=g)
    for path in ("/history?gpu=H100&mode=cold&size=16x4096x4096", "/?gpu=H100&mode=cold&size=16x4096x4096"):
        menu = re.findall(r'<select name="size".*?</select>', client.get(path).text, re.S)[0]
        options = re.findall(r'<option value="([^"]*)" ?(selected)?>([^<]*)</option>', menu)
        assert [(v, label) for v, _, label in options][:3] == [
            ("1x4096x4096", "1×4096×4096"), ("16x4096x4096", "16×4096×4096"), ("4096x16x4096", "4096×16×4096")], path
        assert len(options) == len(SKINNY_CASES) and [v for v, chosen, _ in options if chosen] == ["16x4096x4096"]
    history = client.get("/history?gpu=H100&mode=cold&size=4096x16x4096").text
    assert chart_layout(history, "history-chart")["title"]["text"].startswith("GFLOPS by commit: H100, 4096×16×4096")
    assert traces(history)["warp_tile"]["y"] == [1700.0]
    ladder = traces(client.get("/?gpu=H100&mode=cold&size=8192x8192x64").text, "ladder-0")
    assert ladder["GFLOPS"]["y"] == [8000.0]


def test_compare_two_commits_and_two_gpus(client, cfg):
    size = (4096, 4096, 4096)
    add_job(cfg, "aaaa01", [("naive", size, 5000.0, True), ("warp_tile", size, 30_000.0, True)])
    add_job(cfg, "bbbb02", [("naive", size, 5500.0, True), ("warp_tile", size, 1e9, False)], commit_index=1)
    add_job(cfg, "bbbb02", [("naive", size, 2000.0, True)], gpu=A100, commit_index=1)

    page = client.get("/compare?by=commit&gpu=H100&mode=cold").text  # defaults: the two newest commits
    t = traces(page, "compare-chart")  # B's speed over A's: one dot per variant and size both sides have
    assert t["B faster"]["y"] == ["naive 4096×4096×4096"] and t["B faster"]["x"] == [pytest.approx(1.1)]
    assert "+10.0%" in page and "failed verification" in page
    rows = client.get("/compare?a=aaaa&b=bbbb02&gpu=H100&mode=cold&format=json").json()["rows"]
    assert [(r["variant"], r["delta_pct"]) for r in rows] == [("naive", pytest.approx(10.0)), ("warp_tile", None)]

    gpus = traces(client.get("/compare?by=gpu&a=H100&b=A100&mode=cold&sha=bbbb02").text, "compare-chart")
    assert gpus["B slower"]["y"] == ["naive 4096×4096×4096"] and gpus["B slower"]["x"] == [pytest.approx(2000 / 5500)]

    assert "same commit" in client.get("/compare?a=aaaa01&b=aaaa01&gpu=H100").text
    assert "no commit &#39;ffff&#39; is known" in client.get("/compare?a=ffff&b=aaaa01&gpu=H100").text
    add_result(cfg, "naive", size, "aaaa99", gflops=1.0, commit_index=2)
    assert "start of 2 commits" in client.get("/compare?a=aaaa&b=bbbb02&gpu=H100").text
    assert "two GPU models" in client.get("/compare?by=gpu&a=H100").text


def test_every_view_exports_csv_and_json_with_its_filters(client, cfg):
    job_id = add_result(cfg, "naive", (64, 64, 64), "aaaa01", gflops=123.0)
    add_result(cfg, "naive", (64, 64, 64), "bbbb02", gflops=124.0, commit_index=1)
    for path in [*PAGES, f"/jobs/{job_id}"]:
        html = client.get(path).text
        assert 'id="export-csv"' in html and 'id="export-json"' in html, path
        resp = client.get(path, params={"format": "csv"})
        assert resp.status_code == 200 and resp.headers["content-type"].startswith("text/csv"), path
        assert "attachment" in resp.headers["content-disposition"] and rows_csv(resp.text), path
        body = client.get(path, params={"format": "json"}).json()
        assert body["rows"] and "filters" in body, path
    # The export link carries the page's filters: the permalink and the download agree.
    page = client.get("/history?gpu=H100&size=64x64x64&mode=cold").text
    assert 'href="/history?gpu=H100&amp;size=64x64x64&amp;mode=cold&amp;format=csv"' in page
    history = client.get("/history?gpu=H100&size=64x64x64&mode=cold&format=json").json()
    assert history["filters"] == {"gpu": "H100", "size": "64x64x64", "mode": "cold", "last": 100, "precision": "fp32",
                                  "form": "rrr"}
    assert [r["sha"] for r in history["rows"]] == ["aaaa01", "bbbb02"]


def test_bad_filters_are_422_naming_the_field(client):
    resp = client.get("/history?size=big")
    assert resp.status_code == 422 and "size" in resp.text
    assert client.get("/?format=xml").status_code == 422
    assert client.get("/history?last=0").status_code == 422
    assert client.get("/sweep?sha=not-hex").status_code == 422
    assert client.get("/compare?by=branch").status_code == 422


def test_jobs_and_job_pages(client, cfg):
    job_id = add_result(cfg, "naive", (64, 64, 64), "aaaa01", gflops=123.0)
    bad_id = add_result(cfg, "smem_tiled", (64, 64, 64), "aaaa01", gflops=1.0, verified=False)
    listing = client.get("/jobs").text
    assert f'href="/jobs/{job_id}"' in listing and "succeeded" in listing
    assert 'href="/jobs"' in client.get("/").text  # the list moved; the nav keeps it one click away
    page = client.get(f"/jobs/{job_id}").text
    assert "naive" in page and "123" in page
    bad = client.get(f"/jobs/{bad_id}").text
    assert 'class="unverified"' in bad and "wrong result" in bad
    assert client.get(f"/jobs/{bad_id}?format=json").json()["rows"][0]["gflops"] is None
    assert client.get("/jobs/424242").status_code == 404
    assert f'href="/jobs/{job_id}"' not in client.get("/jobs?status=running").text


def test_running_job_page_shows_progress_and_polls(client, cfg):
    job_id = add_job(cfg, "aaaa01", [("naive", (64, 64, 64), 100.0, True)], status="running", total=4,
                     current_case="smem_tiled 64x64x64")
    page = client.get(f"/jobs/{job_id}").text
    assert 'id="progress-text">1/4<' in page and "running smem_tiled 64x64x64" in page
    assert '<script src="/static/dashboard/job.js"' in page  # it polls ?format=json (dashboard/static/job.js)
    assert "?format=json" in client.get("/static/dashboard/job.js").text
    with session_factory(cfg)() as db:
        db.execute(update(Job).where(Job.id == job_id).values(progress_done=2, current_case="warp_tile 64x64x64"))
        db.commit()
    live = client.get(f"/jobs/{job_id}?format=json").json()["job"]
    assert (live["status"], live["progress_done"], live["progress_total"], live["current_case"]) == (
        "running", 2, 4, "warp_tile 64x64x64")
    with session_factory(cfg)() as db:
        db.execute(update(Job).where(Job.id == job_id).values(status="succeeded", current_case=None))
        db.commit()
    assert "job.js" not in client.get(f"/jobs/{job_id}").text


def test_history_aggregates_in_sql(client, cfg):
    """Many results of one commit and variant reach Python as one grouped row."""
    add_job(cfg, "aaaa01", [("naive", (128, 128, 128), 100.0 + i, True) for i in range(40)])
    statements: list[str] = []
    engine = engine_of(cfg)

    def capture(conn, cursor, statement, params, context, executemany):
        statements.append(statement)

    event.listen(engine, "before_cursor_execute", capture)
    try:
        rows = client.get("/history?gpu=H100&size=128&mode=cold&format=json").json()["rows"]
    finally:
        event.remove(engine, "before_cursor_execute", capture)
    assert len(rows) == 1 and rows[0]["n_results"] == 40 and rows[0]["gflops"] == pytest.approx(119.5)
    # Each read of the result table either groups, counts, or fetches at most one row (the
    # menus' loose index scans and the newest-result lookup).
    reads = [s for s in statements if re.search(r"\bFROM result\b", s)]
    assert reads and all(re.search(r"GROUP BY|count\(|max\(|LIMIT", s) for s in reads), reads
    assert any("GROUP BY result.variant" in s for s in reads)


def test_drawn_verdicts_agree_with_flag_series():
    """The history page's shortcut (points short of the floor are not judged in full) flags
    exactly what api/regression.flag_series flags."""
    import random

    from core.verdicts.regression import Point, Thresholds, flag_series
    from dashboard.history import flag_drawn

    rng = random.Random(3)
    th = Thresholds()
    for _ in range(20):
        points = [Point(10_000 * rng.gauss(1, 0.01) * (0.9 if rng.random() < 0.1 else 1), rng.random() * 0.01, 10)
                  for _ in range(90)]
        full = flag_series(points, th)
        fast = flag_drawn(points, [True] * len(points), th)
        assert [v.regression for v in fast] == [v.regression for v in full]
        assert [v.reason for v in fast if v.regression] == [v.reason for v in full if v.regression]


def test_each_precision_has_its_own_charts_and_they_never_mix(client, cfg):
    """FP32 by default; ?precision=tf32 or bf16 shows that precision's results alone, against
    cuBLAS in it, with its own peak; an unknown precision is a 422, not an empty chart."""
    from sqlalchemy import update

    from core.records.db import session_factory
    from core.records.models import Result

    for i, sha in enumerate(["aaaa01", "bbbb02"]):
        add_result(cfg, "naive", (4096, 4096, 4096), sha, gflops=5000.0 + i, commit_index=i)
        for variant, mode, dtype in (("tf32_kernel", "tf32", "float32"), ("bf16_kernel", "bf16", "bfloat16"),
                                     ("fp8_kernel", "fp8", "float8_e4m3")):
            job = add_result(cfg, variant, (4096, 4096, 4096), sha, gflops=300_000.0 + i, commit_index=i)
            with session_factory(cfg)() as db:
                db.execute(update(Result).where(Result.job_id == job).values(compute_mode=mode, dtype=dtype))
                db.commit()
    page = client.get("/history?gpu=H100&size=4096x4096x4096&mode=cold").text
    assert "naive" in traces(page) and "tf32_kernel" not in traces(page) and "bf16_kernel" not in traces(page)
    assert "tf32_kernel" not in client.get("/?size=4096x4096x4096&mode=cold").text
    bf16 = client.get("/history?gpu=H100&size=4096x4096x4096&mode=cold&precision=bf16").text
    assert set(traces(bf16)) >= {"bf16_kernel"} and "naive" not in traces(bf16) and "tf32_kernel" not in traces(bf16)
    assert chart_layout(bf16, "history-chart")["title"]["text"].endswith("cold L2, BF16")
    assert re.search(r'<select name="precision".*?<option value="bf16" selected>bf16</option>', bf16, re.S)
    ladder = client.get("/?size=4096x4096x4096&mode=cold&precision=bf16").text
    assert "bf16_kernel" in ladder and "naive" not in traces(ladder, "ladder-0") and "% of BF16 peak" in ladder
    for view in ("sweep", "compare"):
        tf32 = client.get(f"/{view}?mode=cold&precision=tf32&format=json").json()
        assert {r.get("variant") for r in tf32["rows"]} == {"tf32_kernel"}, view
    fp8 = client.get("/history?gpu=H100&size=4096x4096x4096&mode=cold&precision=fp8").text
    assert set(traces(fp8)) >= {"fp8_kernel"} and "bf16_kernel" not in traces(fp8)
    assert "% of FP8 peak" in client.get("/?size=4096x4096x4096&mode=cold&precision=fp8").text
    assert client.get("/history?precision=fp4").status_code == 422


def test_each_gemm_form_has_its_own_lines_and_the_menu_offers_each(client, cfg):
    """One FP16 variant, size, GPU and pair of commits measured as NN (rrr) and as TN with FP16 sums
    (rcr+ab+acc16): the default page shows rrr alone, with no form menu while rrr is all there is; once
    both exist the menu offers both, labelled; ?form=rcr%2Bab%2Bacc16 shows the TN line alone, its form
    said in the title (a "+" typed into the URL means the same); every view, export and verdict holds
    one form; the commit page says each row's form."""
    from core.description.gemm_form import label
    from core.records.models import Result

    tn, h = "rcr+ab+acc16", f"{H100_4096}&precision=fp16"

    def add(form: str, gflops: float) -> int:
        jobs = [add_result(cfg, "hgemm", (4096, 4096, 4096), sha, gflops=gflops + i, commit_index=i, form=form)
                for i, sha in enumerate(["aaaa01", "bbbb02"])]
        with session_factory(cfg)() as db:  # FP16 kernels, both: only the form tells them apart
            db.execute(update(Result).values(compute_mode="fp16", dtype="float16"))
            db.commit()
        return jobs[-1]

    add("rrr", 100_000.0)
    page = client.get(f"/history?{h}").text
    assert traces(page)["hgemm"]["y"] == [100_000.0, 100_001.0] and '<select name="form"' not in page
    tn_job = add(tn, 150_000.0)

    page = client.get(f"/history?{h}").text
    assert traces(page)["hgemm"]["y"] == [100_000.0, 100_001.0]
    assert "form" not in chart_layout(page, "history-chart")["title"]["text"]
    menu = re.search(r'<select name="form".*?</select>', page, re.S).group(0)
    assert re.findall(r'<option value="([^"]+)"', menu) == ["rrr", tn] and 'value="rrr" selected' in menu
    assert f"{tn}: A row, B col, C row · C = A·B · FP16 accumulate" in menu
    for url in (f"/history?{h}&form=rcr%2Bab%2Bacc16", f"/history?{h}&form=rcr+ab+acc16"):
        other = client.get(url).text
        assert traces(other)["hgemm"]["y"] == [150_000.0, 150_001.0], url
        title = chart_layout(other, "history-chart")["title"]
        assert title["text"].endswith("cold L2, FP16, form rcr+ab+acc16") and title["subtitle"]["text"].startswith(label(tn))
        assert f'value="{tn}" selected' in other
    assert "form=rcr%2Bab%2Bacc16&amp;format=csv" in client.get(f"/history?{h}&form={tn}".replace("+", "%2B")).text
    body = client.get(f"/history?{h}&form=rcr%2Bab%2Bacc16&format=json").json()
    assert body["filters"]["form"] == tn and {(r["form"], r["gflops"]) for r in body["rows"]} == {
        (tn, 150_000.0), (tn, 150_001.0)}
    assert client.get(f"/history?{h}&form=rcr%2Bzz").status_code == 422

    # The other views: each holds the form asked for (the default one where none is).
    for form, gflops in (("rrr", 100_001.0), (tn, 150_001.0)):
        q = f"size=4096x4096x4096&mode=cold&precision=fp16&form={form.replace('+', '%2B')}&format=json"
        assert [r["gflops"] for r in client.get(f"/?{q}").json()["rows"]] == [gflops], form
        assert [r["gflops"] for r in client.get(f"/sweep?{q}").json()["rows"]] == [gflops], form
        assert [r["b_gflops"] for r in client.get(f"/compare?{q}").json()["rows"]] == [gflops], form
        assert [r["gflops"] for r in client.get(f"/roofline?gpu=H100&{q}").json()["rows"]
                if r["variant"] == "hgemm"] == [gflops], form
    assert [r["gflops"] for r in client.get("/?size=4096x4096x4096&mode=cold&precision=fp16&format=json").json()[
        "rows"]] == [100_001.0]

    # One commit, both forms: each judged against its own form's history (1 GFLOPS up, not 50 %).
    rows = client.get("/commits/bbbb02?format=json").json()["rows"]
    assert {r["form"]: r["delta"] for r in rows} == {"rrr": pytest.approx(1e-5, rel=0.01),
                                                       tn: pytest.approx(1 / 150_000, rel=0.01)}
    commit_page = client.get("/commits/bbbb02").text
    assert f'<td class="form" title="{label(tn)}">{tn}</td>' in commit_page
    assert tn in client.get(f"/jobs/{tn_job}").text


def test_the_menus_loose_index_scan_finds_every_distinct_value_in_one_statement(cfg):
    """dashboard/queries.distinct against SELECT DISTINCT, on values that tie on leading columns
    (sizes sharing M, or M and N) and names that sort close ("a" < "a_" < "ab"), in each mode."""
    from sqlalchemy import select

    from core.records.models import Result
    from dashboard.queries import distinct

    sizes = [(64, 64, 64), (64, 64, 32), (64, 128, 8), (1, 4096, 4096), (4096, 1, 1), (64, 64, 64)]
    for i, variant in enumerate(["ab", "a", "a_", "naive", "Z"]):
        add_job(cfg, f"cafe{i:02d}", [(variant, size, 100.0 + j, j % 2 == 0) for j, size in enumerate(sizes[i:])],
                commit_index=i, mode="cold" if i % 2 else "warm")
    statements: list[str] = []
    engine = engine_of(cfg)

    def capture(conn, cursor, statement, *_):
        statements.append(statement)

    event.listen(engine, "before_cursor_execute", capture)
    try:
        with session_factory(cfg)() as db:
            cases = [([Result.variant], []), ([Result.mode], []),
                     *(([Result.m, Result.n, Result.k], [Result.mode == mode]) for mode in ("cold", "warm", "none"))]
            for cols, where in cases:
                before = len(statements)
                found = distinct(db, cols, where)
                assert len(statements) == before + 1  # one statement, however many values
                assert found == [tuple(row) for row in db.execute(select(*cols).where(*where).distinct().order_by(*cols))]
            every = distinct(db, [Result.variant])
            assert len(every) == 5 and distinct(db, [Result.variant], cap=2) == every[:2]  # in the database's collation
    finally:
        event.remove(engine, "before_cursor_execute", capture)


def test_a_job_that_ended_on_no_gpu_does_not_wait_for_one(client, cfg):
    """A failed job no worker ran (broker down, a refused plan) said "GPU not yet known" forever."""
    from core.records.db import session_factory
    from core.records.models import Job
    from tests.fake_results import add_job

    ended, queued = (add_job(cfg, "aaaa07", [], status=status) for status in ("failed", "queued"))
    with session_factory(cfg)() as db:
        for job_id in (ended, queued):
            db.get(Job, job_id).gpu_id = None
        db.commit()
    assert "GPU none: no worker ran it" in client.get(f"/jobs/{ended}").text
    assert "GPU not yet known" in client.get(f"/jobs/{queued}").text


def test_a_case_not_run_by_design_is_no_rung_of_the_ladder(client, cfg):
    """A kernel built for sm_90a on an A100 (or one whose sizes are compiled in, at another size) has no
    speed and failed nothing: the overview's ladder leaves it out rather than calling it a failure."""
    size = (4096, 4096, 4096)
    add_job(cfg, "aaaa01", [("naive", size, 2000.0, True, 17_000.0)], gpu=A100)
    add_job(cfg, "aaaa01", [("tf32_wgmma", size, 1.0, False)], gpu=A100,
            error="not applicable: tf32_wgmma is built for sm_90a and runs only on compute capability 9.0")
    page = client.get("/?gpu=A100&size=4096x4096x4096&mode=cold").text
    ladder = traces(page, "ladder-0")
    assert ladder["GFLOPS"]["x"] == ["naive"] and "failed verification" not in ladder
    assert "tf32_wgmma" not in page
