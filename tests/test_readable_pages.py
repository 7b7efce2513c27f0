"""A dashboard a person can read (issue 38): no page shows the word None, none answers 5xx, and a
missing job, an address a page cannot read, a page that does not exist or a server error is a page in
the dashboard's layout with its status kept, while the API under /api keeps its JSON.

The pages are found from the app itself (every GET route whose endpoint lives in dashboard/), so a
page added later is walked too; each is opened on an empty database and on a small seeded one, bare,
with each of its query parameters empty, odd or set to what the database holds. SQLite only: what is
checked is how pages word their values, which no database changes.
"""

import html
import json
import re
from datetime import timedelta
from urllib.parse import urlencode

import pytest
from fastapi import APIRouter
from fastapi.testclient import TestClient
from sqlalchemy import select

from api.app import create_app
from core.records.db import session_factory, upgrade_database
from core.records.models import Commit, Gpu, Job, Result, Worker, utcnow
from core.records.store import upsert_gpu
from tests.conftest import make_client, make_settings
from tests.fake_results import A100, H100, add_demo_history, add_job

NONE = re.compile(r"\bNone\b")
# What a person would see or be told: text, attribute values (title, alt, placeholder, a link), and the
# strings of each chart's figure (titles, legends, hover text).
SCRIPT = re.compile(r"<script\b[^>]*>(.*?)</script>", re.S | re.I)
STYLE = re.compile(r"<style\b[^>]*>.*?</style>", re.S | re.I)
TAG = re.compile(r"<[^>]+>")
ATTR = re.compile(r"""\s([a-zA-Z_:-]+)\s*=\s*(?:"([^"]*)"|'([^']*)')""")

# A GPU whose record lacks what peaks are made of, and a commit with nothing but its sha.
ODD_GPU = {"uuid": "GPU-odd-0001", "name": "Odd GPU", "model": "Odd"}


def visible_text(page: str) -> str:
    body = STYLE.sub(" ", SCRIPT.sub(" ", page))
    return " ".join(html.unescape(TAG.sub(" ", body)).split())


def attribute_values(page: str) -> list[tuple[str, str]]:
    out = []
    for tag in TAG.findall(STYLE.sub(" ", SCRIPT.sub(" ", page))):
        out += [(name, html.unescape(a if a is not None and a != "" else b)) for name, a, b in ATTR.findall(tag)]
    return out


def figure_strings(page: str) -> list[str]:
    out = []

    def walk(value):
        if isinstance(value, str):
            out.append(value)
        elif isinstance(value, dict):
            for v in value.values():
                walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)

    for match in re.finditer(r'<script type="application/json"[^>]*>(.*?)</script>', page, re.S):
        walk(json.loads(match.group(1)))
    return out


def nones(resp) -> list[str]:
    """Where the answer says None to a person: the places in the text, attributes or charts."""
    found = []
    if "text/html" not in resp.headers.get("content-type", ""):
        return [resp.text[max(0, m.start() - 60):m.end() + 30] for m in NONE.finditer(resp.text)]
    text = visible_text(resp.text)
    found += [text[max(0, m.start() - 80):m.end() + 40] for m in NONE.finditer(text)]
    found += [f"{name}={value!r}" for name, value in attribute_values(resp.text) if NONE.search(value)]
    found += [f"chart: {s[:160]!r}" for s in figure_strings(resp.text) if NONE.search(s)]
    return found


class _Answer:
    def __init__(self, text: str, content_type: str = "text/html; charset=utf-8"):
        self.text, self.headers = text, {"content-type": content_type}


def test_the_check_finds_none_wherever_a_person_would_meet_it():
    figure = json.dumps({"data": [{"name": "warp_tile", "y": [None]}], "layout": {"title": {"text": "H100, None L2"}}})
    page = (f'<html><head><title>job None</title><script src="/x.js">var None = 1;</script></head><body>'
            f'<p>on H100 <b>in None mode</b></p><img alt="None" src="/a.png"><a title="None yet" href="/">x</a>'
            f'<select><option value="None">choose</option></select>'
            f'<script type="application/json" id="c-figure">{figure}</script><p>none measured · Nonesuch</p></body></html>')
    found = nones(_Answer(page))
    assert [w for w in found if w.startswith("alt=")] == ["alt='None'"]
    assert any(w.startswith("title=") for w in found) and any(w.startswith("value=") for w in found)
    text = [w for w in found if not re.match(r"(\w+=|chart:)", w)]  # the text itself: the title and the <b>
    assert len(text) == 2 and "job None" in text[0] and "in None mode" in text[1], text  # not the code, not Nonesuch
    assert [w for w in found if w.startswith("chart:")] == ["chart: 'H100, None L2'"]  # a JSON null is no word
    assert nones(_Answer("a,b\nNone,1\n", "text/csv")) and not nones(_Answer('{"x": null}', "application/json"))
    assert not nones(_Answer("<p>no results yet for the H100 at 4096×4096×4096 in cold mode</p>"))


def test_an_absent_value_a_template_prints_is_a_dash():
    from dashboard.templating import templates

    page = templates.env.from_string("{{ x }}|{{ x | blank }}|{{ y }}|{{ 0 }}|{{ '' }}").render(x=None, y="H100")
    assert page == "—||H100|0|"


# -- the pages, from the app -----------------------------------------------------------------------

def _flat(routes):
    for route in routes:
        if hasattr(route, "effective_route_contexts"):  # an included router
            yield from _flat(route.effective_route_contexts())
        elif hasattr(route, "dependant"):
            yield route


def _query_names(dependant) -> list[str]:
    names = [p.alias or p.name for p in dependant.query_params]
    for sub in dependant.dependencies:
        names += [n for n in _query_names(sub) if n not in names]
    return names


def dashboard_pages(app) -> list[tuple[str, list[str], list[str]]]:
    """(path, its query parameters, its path parameters) of every GET route the dashboard serves."""
    out = []
    for route in _flat(app.routes):
        if "GET" in (route.methods or ()) and route.endpoint.__module__.startswith("dashboard."):
            out.append((route.path, _query_names(route.dependant), [p.name for p in route.dependant.path_params]))
    return out


def test_the_walk_finds_the_dashboard_pages_and_only_them(tmp_path):
    pages = {path: (query, params) for path, query, params in dashboard_pages(create_app(make_settings(
        tmp_path, f"sqlite:///{tmp_path / 'x.db'}")))}
    assert {"/", "/history", "/sweep", "/compare", "/roofline", "/jobs", "/jobs/{job_id}", "/fleet", "/commits/{sha}",
            "/login"} <= set(pages)
    assert not any(p.startswith("/api") for p in pages)
    assert {"gpu", "size", "mode", "precision", "form", "format"} <= set(pages["/"][0])  # a dependency's too
    assert pages["/jobs/{job_id}"][1] == ["job_id"]


# -- the databases --------------------------------------------------------------------------------

def seed(cfg) -> None:
    """The demo's history, and the rows whose empty fields a page must word: a queued job with no GPU
    or commit, a failed job with no results, a running one, a GPU record with no SM count or clock, a
    result of another form and mode, a commit with no message or repo, a worker that went offline."""
    add_demo_history(cfg)
    add_job(cfg, None, [], status="queued", total=3)
    add_job(cfg, "f00d0001", [], status="failed", total=2)
    add_job(cfg, "f00d0002", [("naive", (64, 64, 64), 10.0, True)], status="running", total=4,
            current_case="smem_tiled 64x64x64")
    add_job(cfg, "f00d0003", [("naive", (4096, 4096, 4096), 100.0, True), ("smem_tiled", (4096, 4096, 4096), 1.0, False)],
            gpu=ODD_GPU, mode="hot")
    add_job(cfg, "f00d0004", [("naive", (16, 4096, 4096), 900.0, True)], gpu=A100, form="rcr+ab+acc16")
    with session_factory(cfg)() as db:
        db.execute(Job.__table__.update().where(Job.status == "failed").values(error="the worker's GPU process died"))
        gpu = upsert_gpu(db, H100)
        db.add(Worker(name="gpu0@seed", host="seed", gpu_id=gpu.id, gpu_index=0, model="H100", queues=["gpu.H100"],
                      version="0.1.0", state="online", last_beat_at=utcnow()))
        db.add(Worker(name="gpu1@seed", host="seed", gpu_id=None, gpu_index=None, model="A100", queues=[],
                      version="0.1.0", state="offline", last_beat_at=utcnow() - timedelta(hours=3),
                      offline_since=utcnow() - timedelta(hours=3)))
        # Kernel resources with most fields unknown, and a same-job confirmation of the newest demo commit.
        head = db.scalars(select(Job).where(Job.kind == "bench", Job.gpu_id == gpu.id).order_by(Job.id.desc())).first()
        for r in head.results[:2]:
            r.env = {**r.env, "resources": {"registers_per_thread": 128, "limited_by": None, "occupancy": None}}
        confirm = Job(kind="confirm", status="succeeded", variants=["warp_tile"], sizes=[[1024] * 3], queue="gpu.H100",
                      gpu_id=gpu.id, confirm={"head_job": head.id, "head_sha": head.commit.sha, "base_sha": None})
        db.add(confirm)
        db.flush()
        same = [1.0 + 0.001 * (i % 5) for i in range(40)]
        db.add(Result(job_id=confirm.id, case_index=0, variant="warp_tile", m=1024, n=1024, k=1024, gpu_id=gpu.id,
                      mode="ab", verified=True, gflops=30000.0, median_ms=1.0, samples_ms=same,
                      env={"ab": {"base_ms": same, "base_gflops": 30000.0}}))
        db.commit()


@pytest.fixture(params=["empty", "seeded"])
def site(request, tmp_path):
    cfg = make_settings(tmp_path, f"sqlite:///{tmp_path / 'gemmwatch.db'}")
    upgrade_database(cfg)
    if request.param == "seeded":
        seed(cfg)
    return cfg, make_client(cfg)


def stored(cfg) -> dict[str, list[str]]:
    with session_factory(cfg)() as db:
        sizes = db.execute(select(Result.m, Result.n, Result.k).distinct()).all()
        return {"gpu": sorted(set(db.scalars(select(Gpu.model)))),
                "mode": sorted(set(db.scalars(select(Result.mode)))),
                "size": [f"{m}x{n}x{k}" for m, n, k in sorted(sizes)[:3]],
                "sha": sorted(set(db.scalars(select(Commit.sha))))[:2],
                "variant": sorted(set(db.scalars(select(Result.variant))))[:2],
                "form": sorted(set(db.scalars(select(Result.form)))),
                "job_id": [str(i) for i in db.scalars(select(Job.id))]}


# Odd values a reader may type or a stale link may carry: each must give a page or a 4xx page, never
# a 5xx, and neither may say None.
ODD = ["", "zz", "0", "99999999999", "abc1234", "ø"]
# What each parameter can take from the database (the rest get the odd values only).
FROM_DB = {"gpu": "gpu", "a": "gpu", "b": "gpu", "mode": "mode", "size": "size", "sha": "sha", "variant": "variant",
           "form": "form"}
CHOICES = {"by": ["commit", "gpu", "mode"], "vary": ["volume", "m", "n", "k"], "precision": ["fp32", "bf16", "fp8"],
           "format": ["csv", "json"], "status": ["queued", "running", "failed"], "failed": ["true"]}


def addresses(pages, db: dict) -> list[str]:
    urls = []
    for path, query, params in pages:
        if params == ["job_id"]:
            bases = [path.replace("{job_id}", j) for j in db["job_id"]] + [path.replace("{job_id}", "424242")]
        elif params == ["sha"]:
            bases = ([path.replace("{sha}", s) for s in db["sha"]] + [path.replace("{sha}", s[:7]) for s in db["sha"]]
                     + [path.replace("{sha}", "0123456789abcdef"), path.replace("{sha}", "abc")])
        else:
            assert not params, f"{path}: a path parameter the walk does not know how to fill: {params}"
            bases = [path]
        for base in bases:
            urls.append(base)
            if base != bases[0]:  # every value of the path, bare; its query walked on the first
                continue
            for name in query:
                for value in ODD + db.get(FROM_DB.get(name, ""), []) + CHOICES.get(name, []):
                    urls.append(f"{base}?{urlencode({name: value})}")
    # Combinations that open a view with data, or a held dimension that matches nothing.
    gpu, mode = (db["gpu"] or ["H100"])[0], (db["mode"] or ["cold"])[0]
    for by in CHOICES["by"]:
        urls += [f"/compare?by={by}", f"/compare?by={by}&gpu={gpu}&mode={mode}", f"/compare?by={by}&a=zz&b=zz"]
    for vary in ("m", "n", "k"):
        urls += [f"/sweep?vary={vary}", f"/sweep?vary={vary}&m=3&n=5&k=7", f"/sweep?vary={vary}&mode={mode}&gpu={gpu}"]
    urls += [f"/history?gpu={gpu}&mode={mode}&size=4096x4096x4096", f"/history?gpu={gpu}&size=1x1x1",
             f"/?gpu={gpu}&mode=hot", "/?precision=fp8&form=rcr%2Bab%2Bacc16", f"/roofline?gpu={gpu}&sha=abc1234",
             "/jobs/1?cancel=denied", "/jobs/1?cancel=zz"]
    return list(dict.fromkeys(urls))


def test_no_page_says_none_or_fails(site):
    cfg, client = site
    pages = dashboard_pages(client.app)
    urls = addresses(pages, stored(cfg))
    assert len(urls) > 150  # the walk reached the parameters, not just the bare pages
    problems, statuses = {}, {}  # each distinct problem, with the first address that shows it
    for url in urls:
        resp = client.get(url, follow_redirects=False)
        statuses[url] = resp.status_code
        if resp.status_code >= 500:
            problems.setdefault(f"{resp.status_code}: {resp.text[:200]}", url)
        for where in nones(resp):
            problems.setdefault(re.sub(r"\d+", "#", where), url)
    assert not problems, "\n".join(f"{url}: {what}" for what, url in list(problems.items())[:40])
    # The walk met the answers it is about: pages, pages with data on the seeded site, and refusals.
    assert statuses["/"] == 200 and statuses["/jobs/424242"] == 404 and statuses["/?size=zz"] == 422


# -- error pages ----------------------------------------------------------------------------------

def page_of(resp) -> str:
    assert resp.headers["content-type"].startswith("text/html"), (resp.status_code, resp.text[:200])
    assert '<nav><b>gemmwatch</b>' in resp.text  # the dashboard's layout
    links = re.findall(r'href="([^"]+)"', resp.text.split('id="error-links"', 1)[1])
    assert "/" in links and "/jobs" in links, links  # the way back
    return visible_text(resp.text)


@pytest.fixture
def client(tmp_path):
    cfg = make_settings(tmp_path, f"sqlite:///{tmp_path / 'gemmwatch.db'}")
    upgrade_database(cfg)
    add_job(cfg, "aaaa01", [("naive", (64, 64, 64), 10.0, True)])
    return make_client(cfg)


def test_a_missing_job_is_a_404_page_and_a_404_in_the_api(client):
    for headers in ({}, {"Accept": "text/html,application/xhtml+xml,*/*;q=0.8"}):
        resp = client.get("/jobs/424242", headers=headers)
        assert resp.status_code == 404
        text = page_of(resp)
        assert "No job 424242" in text and "jobs list" in text and "{" not in text
        assert resp.headers["x-frame-options"] == "DENY" and "script-src 'self'" in resp.headers["content-security-policy"]
    api = client.get("/api/jobs/424242", headers={"Accept": "text/html"})
    assert api.status_code == 404 and api.json() == {"detail": "no job 424242"}
    export = client.get("/jobs/424242?format=json")  # a page's export is read by programs
    assert export.status_code == 404 and export.json() == {"detail": "no job 424242"}
    cancel = client.post("/jobs/424242/cancel", data={"token": ""}, headers={"Origin": "http://testserver"})  # its form
    assert cancel.status_code == 404 and "No job 424242" in page_of(cancel)


def test_an_address_a_page_cannot_read_is_a_422_page_naming_the_field(client):
    resp = client.get("/history?gpu=H100&last=0")
    assert resp.status_code == 422
    text = page_of(resp)
    assert "last" in text and "greater than or equal to 1" in text and "the address says 0" in text
    assert 'href="/history?gpu=H100"' in resp.text  # the same page without the bad value, the rest kept
    size = client.get("/?size=big&mode=cold")
    assert size.status_code == 422 and "expected MxNxK" in page_of(size) and 'href="/?mode=cold"' in size.text
    path = client.get("/jobs/abc")
    assert path.status_code == 422 and re.search(r"job_id : a job's number, such as 12 \(the address says abc \)",
                                                 page_of(path))
    sha = client.get("/commits/xyz")
    assert sha.status_code == 422 and "hexadecimal digits" in page_of(sha)
    api = client.get("/api/jobs?limit=0", headers={"Accept": "text/html"})
    assert api.status_code == 422 and api.json()["detail"][0]["loc"] == ["query", "limit"]


def test_a_page_that_does_not_exist_is_a_page_for_a_browser_and_json_for_a_program(client):
    browser = client.get("/no/such/page", headers={"Accept": "text/html"})
    assert browser.status_code == 404 and "There is no page at /no/such/page" in page_of(browser)
    program = client.get("/no/such/page")
    assert program.status_code == 404 and program.json() == {"detail": "Not Found"}
    assert client.get("/api/nothing", headers={"Accept": "text/html"}).json() == {"detail": "Not Found"}


def test_the_login_redirect_is_still_a_redirect(tmp_path):
    cfg = make_settings(tmp_path, f"sqlite:///{tmp_path / 'gemmwatch.db'}", GEMMWATCH_AUTH_READS="true")
    upgrade_database(cfg)
    resp = TestClient(create_app(cfg)).get("/history?gpu=H100", follow_redirects=False)
    assert resp.status_code == 303 and resp.headers["location"].startswith("/login?next=")


def test_a_server_error_is_a_500_page_without_the_exception_and_json_in_the_api(tmp_path):
    cfg = make_settings(tmp_path, f"sqlite:///{tmp_path / 'gemmwatch.db'}")
    upgrade_database(cfg)
    app = create_app(cfg)
    broken = APIRouter()

    @broken.get("/broken")
    def broken_page():
        raise RuntimeError("secret internals /etc/passwd")

    @broken.get("/api/broken")
    def broken_api():
        raise RuntimeError("secret internals /etc/passwd")

    broken_page.__module__ = "dashboard.pages"  # one of the dashboard's own pages, as far as the app can tell
    app.include_router(broken)
    client = TestClient(app, raise_server_exceptions=False)
    resp = client.get("/broken")
    assert resp.status_code == 500
    text = page_of(resp)
    assert "The server failed to make this page" in text and "secret" not in resp.text
    assert resp.headers["x-content-type-options"] == "nosniff" and "frame-ancestors" in resp.headers[
        "content-security-policy"]
    api = client.get("/api/broken", headers={"Accept": "text/html"})
    assert api.status_code == 500 and api.json() == {"detail": "Internal Server Error"} and "secret" not in api.text
