"""The roofline (issue 24): each variant's GFLOPS against its GEMM's arithmetic intensity, under the
GPU's compute roof for the precision and its memory roof, cuBLAS beside them; the formulas
(dashboard/roofs.py) checked against data-sheet figures, the page on both databases, its exports
and its empty states. The browser's view of it is in tests/test_browser.py."""

import pytest

from dashboard.roofs import bandwidth, intensity, peak
from tests.fake_results import A100, H100, add_job
from tests.test_dashboard import chart_layout, rows_csv, traces


def test_memory_roof_from_the_bus_and_clock_matches_the_data_sheets():
    assert bandwidth(5120, 2619).gbs == pytest.approx(3352.32)  # H100 SXM: 3.35 TB/s
    assert bandwidth(5120, 1593).gbs == pytest.approx(2039.04)  # A100 SXM 80 GB: 2,039 GB/s
    assert bandwidth(384, 10501).gbs == pytest.approx(1008.1, rel=1e-4)  # RTX 4090 (GDDR6X): 1,008 GB/s
    unknown = bandwidth(None, 2619)
    assert unknown.gbs is None and "memory_bus_bits" in unknown.how


def test_arithmetic_intensity_counts_a_and_b_once_and_c_once_in_the_precisions_types():
    assert intensity(1024, 1024, 1024, "fp32") == pytest.approx(2 * 1024 / 12)  # 170.7 flop/byte
    assert intensity(1024, 1024, 1024, "bf16") == pytest.approx(2 * 1024 / 6)  # twice FP32's
    assert intensity(1024, 1024, 1024, "bf16", "float32") == pytest.approx(2 * 1024**3 / (2 * 2 * 1024**2 + 4 * 1024**2))
    # FP8: one byte per input, a BF16 C unless the result says otherwise.
    assert intensity(1024, 1024, 1024, "fp8") == pytest.approx(2 * 1024**3 / (2 * 1024**2 + 2 * 1024**2))
    assert intensity(1, 4096, 4096, "fp32") == pytest.approx(2 * 4096 * 4096 / (4 * (4096 + 4096 * 4096 + 4096)))
    assert intensity(1, 4096, 4096, "fp32") < 1  # a matrix-vector product: memory-bound on any GPU


def test_points_under_both_roofs_with_cublas_and_percent_of_peak(client, cfg):
    add_job(cfg, "aaaa01", [("naive", (1024, 1024, 1024), 3000.0, True, 23_000.0),
                            ("naive", (4096, 4096, 4096), 5000.0, True, 51_000.0),
                            ("warp_tile", (4096, 4096, 4096), 40_000.0, True, 51_000.0),
                            ("smem_tiled", (4096, 4096, 4096), 1.0, False)])
    add_job(cfg, "aaaa01", [("naive", (4096, 4096, 4096), 2000.0, True, 18_000.0)], gpu=A100)
    got = client.get("/roofline?gpu=H100&mode=cold&format=json").json()
    points = {(r["variant"], r["m"]): r for r in got["rows"]}
    assert set(points) == {("naive", 1024), ("naive", 4096), ("warp_tile", 4096), ("cuBLAS", 1024), ("cuBLAS", 4096)}
    warp = points[("warp_tile", 4096)]
    assert warp["intensity_flop_per_byte"] == pytest.approx(intensity(4096, 4096, 4096, "fp32"))
    assert warp["peak_gflops"] == pytest.approx(peak(132, "9.0", 1980).gflops)
    assert warp["pct_of_peak"] == pytest.approx(100 * 40_000 / 66_908.16)
    assert warp["memory_gbs"] == pytest.approx(3352.32)
    assert points[("cuBLAS", 4096)]["gflops"] == 51_000.0 and points[("cuBLAS", 4096)]["pct_of_cublas"] == 100.0

    page = client.get("/roofline?gpu=H100&mode=cold").text
    t = traces(page, "roofline-chart")
    assert t["naive"]["x"] == pytest.approx([intensity(1024, 1024, 1024, "fp32"), intensity(4096, 4096, 4096, "fp32")])
    assert t["cuBLAS FP32"]["y"] == [23_000.0, 51_000.0] and "smem_tiled" not in t  # a wrong kernel has no speed
    assert "failed verification: 1 case(s)" in chart_layout(page, "roofline-chart")["title"]["subtitle"]["text"]
    memory, fp32 = t["memory 3.35 TB/s"], t["FP32 peak 67 TFLOPS"]
    # The roofs meet at the ridge point: peak / bandwidth = 20 flop per byte on the H100.
    assert memory["x"][-1] == pytest.approx(66_908.16 / 3352.32) and fp32["x"][0] == pytest.approx(memory["x"][-1])
    assert memory["y"][-1] == pytest.approx(fp32["y"][0])
    layout = chart_layout(page, "roofline-chart")
    assert layout["xaxis"]["type"] == "log" and layout["yaxis"]["type"] == "log"
    assert "2 × 2619 MHz × 5120 bits / 8" in page  # the arithmetic, under the chart
    assert "% of peak" in page and "% of cuBLAS" in page

    one = client.get("/roofline?gpu=H100&mode=cold&size=1024x1024x1024&format=csv")
    assert {r["variant"] for r in rows_csv(one.text)} == {"naive", "cuBLAS"}
    a100 = client.get("/roofline?gpu=A100&mode=cold&format=json").json()["rows"]
    assert {r["gpu"] for r in a100} == {A100["name"]} and a100[0]["memory_gbs"] == pytest.approx(2039.04)


def test_a_gpu_without_its_bus_recorded_gets_the_compute_roofs_and_says_why_not_the_memory_one(client, cfg):
    old = {k: v for k, v in H100.items() if k not in ("memory_bus_bits", "max_mem_clock_mhz")}
    add_job(cfg, "aaaa01", [("naive", (4096, 4096, 4096), 5000.0, True)], gpu=old)
    page = client.get("/roofline?gpu=H100&mode=cold").text
    assert not any(name.startswith("memory") for name in traces(page, "roofline-chart"))
    assert "memory roof unknown" in page and "FP32 peak 67 TFLOPS" in page


def test_empty_states_say_why(client, cfg):
    assert "No verified results yet" in client.get("/roofline").text
    add_job(cfg, "aaaa01", [("naive", (4096, 4096, 4096), 1.0, False)])
    assert "No verified results on H100 yet" in client.get("/roofline?gpu=H100").text
    assert "all failed verification (naive 4096×4096×4096)" in client.get("/roofline?gpu=H100&mode=cold").text
    add_job(cfg, "aaaa01", [("naive", (4096, 4096, 4096), 5000.0, True)])
    none_there = client.get("/roofline?gpu=H100&mode=cold&size=64x64x64&format=json").json()
    assert none_there["rows"] == [] and "No results on H100 at 64×64×64" in none_there["reason"]
    assert "no commit &#39;ffff&#39; is known" in client.get("/roofline?gpu=H100&sha=ffff").text
    assert client.get("/roofline?sha=zz").status_code == 422
