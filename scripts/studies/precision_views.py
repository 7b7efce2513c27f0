#!/usr/bin/env python3
"""Screenshots of one precision's views (history, sweep, compare, overview) from a running gemmwatch,
in Debian's chromium through Playwright, for docs/DASHBOARD.md. Each page must chart the variants
named, or the script stops with what it found instead.
  python3 scripts/studies/precision_views.py --server http://127.0.0.1:8811 --precision bf16 \
      --gpu H100 --a 1febfe9 --b b29e30a --expect bf16_wgmma --out docs/screenshots
"""

import argparse
from pathlib import Path

from playwright.sync_api import sync_playwright

CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"]


def traces(page, div_id: str) -> list[dict]:
    """The chart's traces as Plotly drew them: name, and x and y values of each (the compare view
    names its pairs on y)."""
    page.wait_for_function(f"document.getElementById('{div_id}') && document.getElementById('{div_id}').data")
    return page.evaluate(f"document.getElementById('{div_id}').data.map(t => ({{name: t.name,"
                         " x: Array.from(t.x || []).concat(Array.from(t.y || []))}}))")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--server", required=True)
    ap.add_argument("--precision", required=True)
    ap.add_argument("--gpu", required=True)
    ap.add_argument("--size", default="4096x4096x4096")
    ap.add_argument("--a", required=True, help="the older commit, for compare")
    ap.add_argument("--b", required=True, help="the newer commit")
    ap.add_argument("--expect", required=True, help="a variant every chart must show")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    p, common = args.precision, f"mode=cold&precision={args.precision}"
    views = {
        f"history-{p}": (f"/history?gpu={args.gpu}&size={args.size}&{common}", "history-chart"),
        f"sweep-{p}": (f"/sweep?gpu={args.gpu}&{common}", "sweep-chart"),
        f"compare-{p}": (f"/compare?by=commit&a={args.a}&b={args.b}&gpu={args.gpu}&{common}", "compare-chart"),
        f"overview-{p}": (f"/?gpu={args.gpu}&size={args.size}&{common}", "ladder-0"),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1200, "height": 820})
        for name, (path, div_id) in views.items():
            page.goto(args.server + path)
            drawn = traces(page, div_id)
            names = [t["name"] for t in drawn]
            if not any(args.expect in str(t["name"]) or any(args.expect in str(x) for x in t["x"]) for t in drawn):
                raise SystemExit(f"{path}: no {args.expect} among the traces {names} or their x values")
            page.screenshot(path=str(args.out / f"{name}.png"), full_page=True)
            print(f"{name}.png  {path}  traces: {', '.join(names)}")
        browser.close()


if __name__ == "__main__":
    main()
