"""Every route of the app, who may call it, and every URL a reader could open for what is stored.

tests/test_route_walk.py uses this after hostile writers have posted: each route of the app must be
in exactly one class below (a new route that is not fails the walk, so it gets an auth decision and
a read check), and the walk reads every page, export and API read for every GPU, size, job and
result in the database.
"""

import re
from itertools import islice

from sqlalchemy import func, select
from starlette.routing import Mount

from core.description.builtins import builtin_kernels
from core.records.db import session_factory
from core.records.models import Commit, Gpu, Job, Profile, Result

# Open to anyone, by design: the API's description, health, the login page, static files.
PUBLIC = {("GET", "/healthz"), ("GET", "/openapi.json"), ("GET", "/docs"), ("GET", "/redoc"), ("GET", "/login"),
          ("GET", "/static/plotly/{path}"), ("GET", "/static/dashboard/{path}"), ("GET", "/docs-assets/{path}")}
# Reads that need a token when GEMMWATCH_AUTH_READS is on: 401 without one.
API_READS = {("GET", p) for p in ("/api/jobs", "/api/jobs/{job_id}", "/api/jobs/{job_id}/verdicts",
                                  "/api/jobs/{job_id}/confirmation", "/api/results", "/api/results/{result_id}",
                                  "/api/results/{result_id}/profile", "/api/commits/{sha}/export",
                                  "/api/variants", "/api/gpus", "/api/tuned", "/api/workers", "/api/queues",
                                  "/metrics", "/api/kernels/schema", "/api/kernels/{name}", "/api/limits")}
# Dashboard pages and their exports: a login (303 to /login) without a session or token.
PAGES = {("GET", p) for p in ("/", "/history", "/sweep", "/compare", "/roofline", "/jobs", "/jobs/{job_id}",
                               "/fleet", "/commits/{sha}")}
# Everything that changes state: a token (and its scope), and this site's own origin for forms.
API_WRITES = {("POST", "/api/jobs"), ("POST", "/api/results"), ("POST", "/api/imports"),
              ("POST", "/api/jobs/{job_id}/cancel"),
              ("POST", "/api/jobs/{job_id}/confirm")}
FORM_WRITES = {("POST", "/jobs/{job_id}/cancel"), ("POST", "/jobs/{job_id}/profile"), ("POST", "/login"),
               ("POST", "/logout")}
CLASSES = {"public": PUBLIC, "api read": API_READS, "page": PAGES, "api write": API_WRITES, "form write": FORM_WRITES}


def every_route(app) -> set[tuple[str, str]]:
    """(method, path) of every route the app serves, through included routers and mounts."""
    found: set[tuple[str, str]] = set()

    def walk(routes):
        for route in routes:
            if hasattr(route, "effective_route_contexts"):  # FastAPI's included router
                walk(route.effective_route_contexts())
            elif isinstance(route, Mount):
                found.add(("GET", route.path + "/{path}"))
            else:
                found.update((m, route.path) for m in (route.methods or ()) if m != "HEAD")

    walk(app.routes)
    return found


def unclassified(app) -> set[tuple[str, str]]:
    everything = set().union(*CLASSES.values())
    return every_route(app) - everything


def stale(app) -> set[tuple[str, str]]:
    return set().union(*CLASSES.values()) - every_route(app)


def stored(cfg) -> dict:
    """What the database holds that a reader can ask for."""
    with session_factory(cfg)() as db:
        gpus = db.execute(select(Gpu.model, Gpu.name)).all()
        series = db.execute(select(Result.m, Result.n, Result.k, Result.mode).distinct()).all()
        by_gpu = db.execute(select(Gpu.model, Result.m, Result.n, Result.k, Result.mode)
                            .join(Result, Result.gpu_id == Gpu.id).distinct()).all()
        return {"models": sorted({m for m, _ in gpus}), "names": sorted({n for _, n in gpus}),
                "series": sorted(series), "by_gpu": sorted(by_gpu),
                "jobs": list(db.execute(select(Job.id, Job.kind)).all()),
                "commits": sorted(set(db.scalars(select(Commit.sha)))),
                # Every result is read inside its job (GET /api/jobs/{id} lists them all); alone, with
                # its samples, the first and last of each job.
                "results": sorted(set(db.scalars(select(func.min(Result.id)).group_by(Result.job_id)))
                                  | set(db.scalars(select(func.max(Result.id)).group_by(Result.job_id)))),
                "profiled": set(db.scalars(select(Profile.result_id)))}


def route_of(path: str) -> str:
    """The route a concrete read path is served by: /api/jobs/7/verdicts -> /api/jobs/{job_id}/verdicts."""
    path = re.sub(r"^/api/results/\d+$", "/api/results/{result_id}", path)
    path = re.sub(r"^/api/results/\d+/profile$", "/api/results/{result_id}/profile", path)
    path = re.sub(r"^/api/kernels/(?!schema$)[^/]+$", "/api/kernels/{name}", path)
    path = re.sub(r"^/commits/[0-9a-fA-F]+$", "/commits/{sha}", path)
    path = re.sub(r"^/api/commits/[0-9a-fA-F]+/export$", "/api/commits/{sha}/export", path)
    return re.sub(r"/jobs/\d+", "/jobs/{job_id}", path)


def read_urls(have: dict) -> list[tuple[str, dict, set[int]]]:
    """(path, query, answers allowed) for every read of everything stored. 200 everywhere, except
    a confirmation asked of a job that is no confirmation (422, by design). Every route of
    API_READS and PAGES is among them (tests/test_route_walk.py checks)."""
    urls: list[tuple[str, dict, set[int]]] = []
    ok = {200}

    def page(path: str, **query):
        for fmt in ("html", "csv", "json"):
            urls.append((path, {**query, "format": fmt}, ok))

    for path in ("/api/jobs", "/api/variants", "/api/gpus", "/api/tuned", "/api/workers", "/api/queues", "/metrics",
                 "/api/kernels/schema", "/api/limits"):
        urls.append((path, {}, ok))
    urls += [(f"/api/kernels/{name}", {}, ok) for name in builtin_kernels()]
    urls.append(("/api/kernels/no_such_kernel", {}, {404}))
    urls.append(("/api/jobs", {"limit": 500}, ok))
    urls.append(("/api/results", {"limit": 5000}, ok))
    for status in ("queued", "running", "succeeded", "failed", "cancelled"):
        urls.append(("/api/jobs", {"status": status}, ok))
        page("/jobs", status=status)
    for job_id, kind in have["jobs"]:
        urls += [(f"/api/jobs/{job_id}", {}, ok), (f"/api/jobs/{job_id}/verdicts", {}, ok),
                 (f"/api/jobs/{job_id}/confirmation", {}, ok if kind == "confirm" else {422})]
        page(f"/jobs/{job_id}")
    urls += [(f"/api/results/{rid}", {}, ok) for rid in have["results"]]
    # A result's profile: 200 where a confirmation made one, else a 404 that says so.
    urls += [(f"/api/results/{rid}/profile", {}, ok if rid in have["profiled"] else {404})
             for rid in sorted(set(have["results"]) | have["profiled"])]
    for sha in have["commits"]:
        page(f"/commits/{sha}")
        urls += [(f"/api/commits/{sha}/export", {"format": fmt}, ok) for fmt in ("gemmwatch", "bmf")]
    page("/commits/0123456789abcdef")  # a commit never measured: the page says so
    urls.append(("/api/commits/0123456789abcdef/export", {}, {404}))  # and the export, a 404 that says so
    for gpu in have["models"] + have["names"]:
        urls.append(("/api/results", {"gpu": gpu}, ok))
    for model in have["models"]:
        urls.append(("/api/tuned", {"gpu": model}, ok))
        page("/", gpu=model)
        page("/sweep", gpu=model)
        page("/compare", by="commit", gpu=model)
        page("/compare", by="mode", gpu=model)
        page("/roofline", gpu=model)
    for m, n, k, mode in have["series"]:
        urls.append(("/api/results", {"m": m, "n": n, "k": k}, ok))
        page("/", size=f"{m}x{n}x{k}", mode=mode)
    for n, k, mode in sorted({(n, k, mode) for _, n, k, mode in have["series"]}):  # each line of M held N, K
        page("/sweep", mode=mode, vary="m", n=n, k=k)
    for model, m, n, k, mode in have["by_gpu"]:
        page("/history", gpu=model, size=f"{m}x{n}x{k}", mode=mode)
    for a, b in islice(zip(have["models"], have["models"][1:]), 10):
        page("/compare", by="gpu", a=a, b=b)
    for path in ("/", "/history", "/sweep", "/compare", "/roofline", "/jobs", "/fleet"):
        page(path)
    return urls
