"""Dashboard pages render from the database; the chart shows verified results only."""

import json
import re

from tests.fake_results import add_result


def chart_data(html: str) -> list[dict]:
    """The traces Plotly was given, read back out of the page."""
    match = re.search(r'Plotly\.newPlot\(\s*"history-chart",\s*(\[.*?\]),\s*\{', html, re.S)
    assert match, "no chart on the page"
    return json.loads(match.group(1))


def test_plotly_js_is_served_locally(client):
    resp = client.get("/static/plotly/plotly.min.js")
    assert resp.status_code == 200 and b"plotly.js" in resp.content[:200]
    page = client.get("/").text
    assert 'src="/static/plotly/plotly.min.js"' in page and "cdn" not in page.lower()


def test_empty_history_says_why(client):
    page = client.get("/history").text
    assert 'id="no-chart"' in page and "No verified results" in page


def test_history_draws_one_point_per_commit_per_variant(client, cfg):
    for i, sha in enumerate(["aaaa01", "bbbb02", "cccc03"]):
        add_result(cfg, "naive", (4096, 4096, 4096), sha, gflops=5000.0 + i, commit_index=i)
        add_result(cfg, "smem_tiled", (4096, 4096, 4096), sha, gflops=9000.0 + i, commit_index=i)
    add_result(cfg, "naive", (1024, 1024, 1024), "dddd04", gflops=1.0, commit_index=3)  # other size
    add_result(cfg, "smem_tiled", (4096, 4096, 4096), "eeee05", gflops=1e9, verified=False, commit_index=4)

    traces = {t["name"]: t for t in chart_data(client.get("/history?gpu=H100&m=4096&n=4096&k=4096&mode=cold").text)}
    assert traces["naive"]["x"] == ["aaaa01", "bbbb02", "cccc03"]
    assert traces["naive"]["y"] == [5000.0, 5001.0, 5002.0]
    # The unverified result (commit eeee05) is not drawn as a speed.
    assert traces["smem_tiled"]["x"] == ["aaaa01", "bbbb02", "cccc03"]
    assert "cuBLAS (same jobs)" in traces

    other = {t["name"]: t for t in chart_data(client.get("/history?gpu=H100&m=1024&n=1024&k=1024&mode=cold").text)}
    assert other["naive"]["x"] == ["dddd04"] and "smem_tiled" not in other

    none = client.get("/history?gpu=A100&m=4096&n=4096&k=4096&mode=cold").text
    assert 'id="no-chart"' in none and "A100" in none


def test_jobs_and_job_pages(client, cfg):
    job_id = add_result(cfg, "naive", (64, 64, 64), "aaaa01", gflops=123.0)
    bad_id = add_result(cfg, "smem_tiled", (64, 64, 64), "aaaa01", gflops=1.0, verified=False)
    listing = client.get("/").text
    assert f'href="/jobs/{job_id}"' in listing and "succeeded" in listing
    page = client.get(f"/jobs/{job_id}").text
    assert "naive" in page and "123" in page
    bad = client.get(f"/jobs/{bad_id}").text
    assert 'class="unverified"' in bad and "wrong result" in bad
    assert client.get("/jobs/424242").status_code == 404
