"""The application factory: API routers, and the dashboard mounted beside them."""

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from sqlalchemy.exc import DataError

from api.auth import Reader
from api.intake import JobIntake
from api.metrics import install_metrics
from api.routes import catalog, fleet, health, jobs, results
from api.warm_up import lifespan
from api.settings import Settings, settings


def create_app(cfg: Settings = settings, with_dashboard: bool = True) -> FastAPI:
    app = FastAPI(
        title="gemmwatch",
        summary="Benchmark SGEMM kernel variants against cuBLAS, commit by commit and GPU by GPU",
        version="0.1.0",
        lifespan=lifespan,
    )
    app.state.settings = cfg
    app.state.intake = JobIntake(cfg)  # stores and publishes new jobs in groups

    @app.exception_handler(DataError)
    def _unstorable_value(request: Request, exc: DataError) -> JSONResponse:
        # Input that passed validation but that the database cannot hold (PostgreSQL refuses
        # NUL characters in text, for one): the request's fault, and nothing was stored.
        return JSONResponse(status_code=422, content={"detail": f"a value cannot be stored: {exc.orig}"})
    for module in (jobs, results, catalog, fleet):
        app.include_router(module.router, dependencies=[Reader])  # public unless GEMMWATCH_AUTH_READS
    app.include_router(health.router)
    install_metrics(app, cfg, dependencies=[Reader])
    if with_dashboard:
        # The one place the API reaches outward: the dashboard is served by the same app.
        from dashboard.pages import mount_dashboard

        mount_dashboard(app)
    return app
