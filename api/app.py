"""The application factory: the API's routers, and the dashboard's pages (dashboard/) mounted beside
them. The app is composed here; the dashboard imports nothing of api/."""

from fastapi import FastAPI

from api.auth import Reader
from api.docs_page import install_docs_page
from api.error_handlers import install_error_handlers
from api.intake import JobIntake
from api.job_body import describe_job_body
from api.rate_limit import RateLimit
from api.loop_slots import LoopSlots
from api.metrics import install_metrics
from api.request_gate import RequestGate
from api.routes import catalog, commits, fleet, health, imports, jobs, results
from api.same_origin import SameOriginWrites
from api.security_headers import SecurityHeaders
from api.warm_up import lifespan
from core.settings import Settings
from dashboard.pages import mount_dashboard


def create_app(cfg: Settings, with_dashboard: bool = True) -> FastAPI:
    app = FastAPI(
        title="gemmwatch",
        summary="Benchmark SGEMM kernel variants against cuBLAS, commit by commit and GPU by GPU",
        version="0.1.0",
        lifespan=lifespan,
        docs_url=None,  # served by api/docs_page.py, under a CSP of its own
        redoc_url=None,
    )
    app.state.settings = cfg
    app.state.intake = JobIntake(cfg)  # stores and publishes new jobs in groups
    # Bounds the job bodies this process validates at once, each on a thread (api/job_body.py):
    # half the threads, so the others stay free for reads and /healthz.
    # Small bodies validate on threads, half the pool at once; large ones in a process of their own
    # (api/validation_pool.py), each writer's one at a time.
    app.state.validation_slots = LoopSlots(cfg.api_threads // 2)
    app.state.heavy_slots = LoopSlots(max(1, cfg.validation_processes))
    # Bounds the requests holding a database session at once (core/web_deps.py), so that the pool
    # always has a connection for each of them and no thread ever waits for one.
    app.state.session_slots = LoopSlots(cfg.api_sessions)

    install_error_handlers(app)  # a 422 for any bad input, however unprintable (api/error_handlers.py)
    # A write from another origin is refused before any route or body is touched, then one too large
    # or without its token (api/request_gate.py); the headers wrap those refusals too (a middleware
    # added later sits outside one added earlier).
    app.add_middleware(RequestGate, cfg=cfg)
    app.add_middleware(SameOriginWrites, public_origins=tuple(o for o in cfg.public_origins.split(",") if o.strip()))
    app.add_middleware(SecurityHeaders)
    app.add_middleware(RateLimit, cfg=cfg)  # outermost: a client past its rate is answered before anything else

    for module in (jobs, results, imports, commits, catalog, fleet):
        app.include_router(module.router, dependencies=[Reader])  # public unless GEMMWATCH_AUTH_READS
    app.include_router(health.router)
    install_metrics(app, cfg, dependencies=[Reader])
    install_docs_page(app)
    describe_job_body(app)
    if with_dashboard:  # the dashboard's pages are served by the same app
        mount_dashboard(app)
    return app
