"""Compare by ratio (issue 24): B's speed over A's per variant and size, with an interval from the
stored samples, sorted by the size of the change; for two commits, two GPUs and two timing modes.
The browser's view of it (200 pairs, labels that do not collide) is in tests/test_browser.py."""

import random

import pytest

from core.results.sample_stats import SpeedRatio, median_ci, speed_ratio
from tests.fake_results import A100, add_job, samples_around
from tests.test_dashboard import traces

SIZE = (4096, 4096, 4096)


def test_a_clear_change_has_an_interval_that_leaves_one_and_no_change_one_that_holds_it():
    base = samples_around(1.0, 0.003, n=60, seed="a")
    clear = speed_ratio(1.0, 0.97, base, samples_around(0.97, 0.003, n=60, seed="b"))
    assert clear.ratio == pytest.approx(1 / 0.97) and clear.low > 1 and clear.direction == "faster"
    assert clear.confidence > 0.999
    slower = speed_ratio(0.97, 1.0, samples_around(0.97, 0.003, n=60, seed="b"), base)
    assert slower.high < 1 and slower.direction == "slower"
    same = speed_ratio(1.0, 1.0002, base, samples_around(1.0002, 0.003, n=60, seed="c"))
    assert same.low < 1 < same.high and same.direction == "within noise" and same.confidence < 0.95


def test_a_clear_change_under_the_band_is_told_apart_from_a_real_one():
    a, b = samples_around(1.0, 0.0005, n=60, seed="a"), samples_around(0.995, 0.0005, n=60, seed="b")
    assert speed_ratio(1.0, 0.995, a, b).direction == "faster"  # no band: any clear change counts
    small = speed_ratio(1.0, 0.995, a, b, band=0.01)
    assert small.low > 1 and small.direction == "under the band"


def test_the_page_reads_the_ci_hooks_band(client, cfg):
    add_job(cfg, "aaaa01", [("naive", SIZE, 20_000.0, True)], noise=0.0005)
    add_job(cfg, "bbbb02", [("naive", SIZE, 20_100.0, True)], noise=0.0005, commit_index=1)
    row, = client.get("/compare?a=aaaa01&b=bbbb02&gpu=H100&mode=cold&format=json").json()["rows"]
    assert row["low"] > 1 and row["direction"] == "under the band"  # +0.5 %, clear, under the 1 % band
    assert "B under the band" in traces(client.get("/compare?a=aaaa01&b=bbbb02&gpu=H100&mode=cold").text,
                                        "compare-chart")


def test_too_few_samples_give_a_ratio_and_no_interval():
    r = speed_ratio(1.0, 0.5, [1.0, 1.0, 1.0], [0.5] * 10)
    assert r == SpeedRatio(2.0) and r.direction == "within noise"
    assert speed_ratio(0.0, 1.0, [1.0] * 10, [1.0] * 10) is None  # a median of 0 has no ratio


def test_the_interval_covers_the_true_ratio_about_95_percent_of_the_time():
    """400 seeded trials of two sides drawn from the same distribution (a skewed one, as GPU
    timings are): an interval meant at ~95 % covers 1 in 90-99.5 % of them (the order statistics
    round outwards, so it leans to more)."""
    rng = random.Random(2024)
    covered = 0
    for _ in range(400):
        a = [1.0 + rng.expovariate(200) for _ in range(40)]
        b = [1.0 + rng.expovariate(200) for _ in range(40)]
        r = speed_ratio(sorted(a)[20], sorted(b)[20], a, b)
        covered += r.low <= 1 <= r.high
    assert 0.90 <= covered / 400 <= 0.995, covered


def test_median_ci_is_the_order_statistics_around_the_middle():
    x = list(range(100))
    lo, hi = median_ci(x)
    assert (lo, hi) == (40, 60)  # 50 -+ 1.96 * sqrt(100) / 2 = 9.8, rounded outwards


def test_two_commits_sorted_by_the_size_of_the_change_either_way(client, cfg):
    add_job(cfg, "aaaa01", [("naive", SIZE, 5000.0, True), ("warp_tile", SIZE, 30_000.0, True),
                            ("smem_tiled", SIZE, 9000.0, True), ("thread_tile", SIZE, 20_000.0, True)])
    add_job(cfg, "bbbb02", [("naive", SIZE, 5500.0, True), ("warp_tile", SIZE, 1e9, False),
                            ("smem_tiled", SIZE, 8000.0, True), ("thread_tile", SIZE, 20_003.0, True)],
            commit_index=1)
    rows = client.get("/compare?a=aaaa01&b=bbbb02&gpu=H100&mode=cold&format=json").json()["rows"]
    # smem_tiled lost 11.1 % (|ln 0.889| = 0.118), naive gained 10 % (0.095): the loss first.
    assert [r["variant"] for r in rows] == ["smem_tiled", "naive", "thread_tile", "warp_tile"]
    smem, naive, thread, warp = rows
    assert smem["ratio"] == pytest.approx(8000 / 9000) and smem["direction"] == "slower" and smem["high"] < 1
    assert naive["ratio"] == pytest.approx(1.1) and naive["direction"] == "faster" and naive["low"] > 1
    assert thread["direction"] == "within noise" and thread["low"] < 1 < thread["high"]
    assert warp["ratio"] is None and warp["b_verified"] is False  # failed verification: no speed, no ratio
    assert 0 < thread["confidence"] < 0.95 < naive["confidence"]
    assert naive["a_pct_of_peak"] == pytest.approx(100 * 5000 / 66_908.16)  # env.peak, as the runner writes it

    page = client.get("/compare?a=aaaa01&b=bbbb02&gpu=H100&mode=cold").text
    t = traces(page, "compare-chart")
    assert t["B slower"]["y"] == ["smem_tiled 4096×4096×4096"] and t["B faster"]["y"] == ["naive 4096×4096×4096"]
    assert t["B within noise"]["y"] == ["thread_tile 4096×4096×4096"]
    low_err = t["B faster"]["error_x"]["arrayminus"][0]
    assert t["B faster"]["x"][0] - low_err == pytest.approx(naive["low"])
    assert "1 with no verified speed on one side" in page and "failed verification" in page
    assert "of peak" in page and "of cuBLAS" in page


def test_two_gpus_and_two_modes(client, cfg):
    add_job(cfg, "aaaa01", [("naive", SIZE, 5000.0, True)])
    add_job(cfg, "aaaa01", [("naive", SIZE, 2000.0, True)], gpu=A100)
    add_job(cfg, "aaaa01", [("naive", SIZE, 5400.0, True)], mode="hot")
    gpus = client.get("/compare?by=gpu&a=H100&b=A100&mode=cold&sha=aaaa01&format=json").json()["rows"]
    assert [(r["variant"], round(r["ratio"], 4), r["direction"]) for r in gpus] == [("naive", 0.4, "slower")]
    modes = client.get("/compare?by=mode&gpu=H100&format=json").json()
    assert modes["filters"]["a"] == "cold" and modes["filters"]["b"] == "hot"  # the two modes, by default
    assert [(r["variant"], round(r["ratio"], 4)) for r in modes["rows"]] == [("naive", 1.08)]
    page = client.get("/compare?by=mode&gpu=H100").text
    assert 'value="mode" selected' in page and "hot over cold (timing modes), on H100" in page


def test_empty_states_say_why(client, cfg):
    assert "needs two timing modes" in client.get("/compare?by=mode").text
    add_job(cfg, "aaaa01", [("naive", SIZE, 5000.0, True)])
    one_mode = client.get("/compare?by=mode&gpu=H100&format=json").json()
    assert one_mode["rows"] == [] and "needs two timing modes" in one_mode["reason"]
    assert "No results for cold or hot on A100" in client.get("/compare?by=mode&gpu=A100&a=cold&b=hot").text
    assert "the same mode (cold)" in client.get("/compare?by=mode&gpu=H100&a=cold&b=cold").text
