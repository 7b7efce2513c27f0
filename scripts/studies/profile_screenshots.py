#!/usr/bin/env python3
"""Study (issue 39): screenshots of the commit pages' profile diffs from a database that
scripts/studies/ci_profile_pairs.sh left on a GPU machine (every figure in it measured there).
Serves a copy of that database here and lets Debian's chromium take each commit page, its profile
section with the first kernel's full table open.
  python3 scripts/studies/profile_screenshots.py GEMMWATCH_DB OUT_DIR SHA:NAME [SHA:NAME ...]
"""
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
from playwright.sync_api import sync_playwright

ROOT = Path(__file__).resolve().parents[2]
db, out, pages = Path(sys.argv[1]), Path(sys.argv[2]), [a.split(":", 1) for a in sys.argv[3:]]
out.mkdir(parents=True, exist_ok=True)
data = Path(tempfile.mkdtemp())
shutil.copy(db, data / "gemmwatch.db")
with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
env = {**os.environ, "GEMMWATCH_DATA_DIR": str(data)}
server = subprocess.Popen([sys.executable, "-m", "cli.main", "serve", "--port", str(port)], cwd=ROOT, env=env,
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
base = f"http://127.0.0.1:{port}"
try:
    for _ in range(240):
        try:
            if httpx.get(f"{base}/healthz", timeout=5).status_code == 200:
                break
        except httpx.HTTPError:
            time.sleep(0.25)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--headless", "--no-sandbox"])
        page = browser.new_page(viewport={"width": 1280, "height": 1500})
        for sha, name in pages:
            page.goto(f"{base}/commits/{sha}")
            page.locator("#profiles details").first.evaluate("d => d.open = true")
            page.screenshot(path=str(out / f"{name}.png"))  # the page's top: the row, the line, the ranked rows
            print(out / f"{name}.png")
        browser.close()
finally:
    server.terminate()
    server.wait(20)
