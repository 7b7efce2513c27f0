#!/usr/bin/env python3
"""Screenshots of the compare view, a commit page and the roofline from real runs, for
docs/DASHBOARD.md: a database that scripts/studies/ci_two_commits.sh filled on an H100 and then an
H200 (START_DB), served by `gemmwatch serve`. Each chart must show what the runs measured, or the
script stops with what it found instead.
  GEMMWATCH_DATA_DIR=/tmp/views gemmwatch serve --port 8812 &   # /tmp/views/gemmwatch.db: the runs
  python3 scripts/studies/views_from_runs.py --server http://127.0.0.1:8812 --out docs/screenshots
"""

import argparse
from pathlib import Path

from playwright.sync_api import sync_playwright

CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"]
BASE, HEAD = "c0ffee0001", "c0ffee0002"  # the study's two commits: HEAD cut smem_tiled's tile to 16
# name: (path, the chart's element or None for a table page, what the page must show)
VIEWS = {
    "compare-h100-h200-runs": (f"/compare?by=gpu&a=H100&b=H200&sha={HEAD}&mode=cold", "compare-chart", "tail_split_k_overlap"),
    "compare-h100-h200-bf16-runs": (f"/compare?by=gpu&a=H100&b=H200&sha={HEAD}&mode=cold&precision=bf16",
                                    "compare-chart", "bf16_wgmma_ss"),
    "compare-commits-runs": (f"/compare?by=commit&a={BASE}&b={HEAD}&gpu=H100&mode=cold", "compare-chart", "smem_tiled"),
    "compare-commits-bf16-runs": (f"/compare?by=commit&a={BASE}&b={HEAD}&gpu=H100&mode=cold&precision=bf16",
                                  "compare-chart", "bf16_wgmma_ss"),
    "commit-runs": (f"/commits/{HEAD}", None, "regression"),
    "roofline-h100-runs": ("/roofline?gpu=H100&mode=cold", "roofline-chart", "memory 3.35 TB/s"),
    "roofline-h200-runs": ("/roofline?gpu=H200&mode=cold", "roofline-chart", "memory 4.81 TB/s"),
}


def drawn_text(page, div_id: str) -> str:
    """Every trace's name and category labels, as Plotly drew them."""
    page.wait_for_function(f"document.getElementById('{div_id}') && document.getElementById('{div_id}')._fullLayout")
    return page.evaluate(f"JSON.stringify(document.getElementById('{div_id}').data.map(t => [t.name, t.y]))")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--server", required=True)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1200, "height": 820})
        for name, (path, div_id, expect) in VIEWS.items():
            page.goto(args.server + path)
            seen = drawn_text(page, div_id) if div_id else page.inner_text("body")
            if expect not in seen:
                raise SystemExit(f"{path}: no {expect!r} in what it drew: {seen[:400]}")
            page.screenshot(path=str(args.out / f"{name}.png"), full_page=True)
            print(f"{name}.png  {path}")
        browser.close()


if __name__ == "__main__":
    main()
