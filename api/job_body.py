"""POST /api/jobs's body, parsed and checked on a thread instead of the event loop.

Given `body: JobCreate`, FastAPI validates it on the event loop before the route runs, and a
job's validation is heavy: every source goes through the kernel description's checks and the
source guard (core/kernel.py, core/source_guard.py). A job of large sources then held every
request of its process, /healthz included, for as long as that took (issue 37, row 1). Here the
route reads the body itself (api/request_gate.py has bounded its size and checked its token by
then) and validates it on a thread, at most half the pool's threads at once per process
(GEMMWATCH_API_THREADS), so the others stay free for everything else. Bad input is the same 422
as FastAPI's.
"""

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool

from api.limits import check_job_limits
from api.schemas import JobCreate
from core.settings import Settings
from core.web_deps import settings_of

_SCHEMAS = "#/components/schemas/{model}"
# The route takes no model, so its body is described here for the OpenAPI schema (and so for
# /docs, schemathesis and the route walk) as FastAPI would have described it.
JOB_BODY_OPENAPI = {"requestBody": {"required": True, "content": {
    "application/json": {"schema": {"$ref": _SCHEMAS.format(model="JobCreate")}}}}}
INVALID = {"description": "Validation Error", "content": {
    "application/json": {"schema": {"$ref": _SCHEMAS.format(model="HTTPValidationError")}}}}


async def job_from(request: Request) -> JobCreate:
    raw = await request.body()
    cfg = settings_of(request)
    async with request.app.state.validation_slots():
        return await run_in_threadpool(_checked, raw, cfg)


def _checked(raw: bytes, cfg: Settings) -> JobCreate:
    try:
        body = JobCreate.model_validate_json(raw)
    except ValidationError as exc:
        raise RequestValidationError([{**e, "loc": ("body", *e["loc"])} for e in exc.errors()]) from None
    check_job_limits(body, cfg)
    return body


def describe_job_body(app: FastAPI) -> None:
    """Put JobCreate and the models it names among the OpenAPI schema's components."""
    make = app.openapi

    def openapi() -> dict:
        if app.openapi_schema is None:
            schema = make()
            job = JobCreate.model_json_schema(ref_template=_SCHEMAS)
            components = schema.setdefault("components", {}).setdefault("schemas", {})
            for name, model in {**job.pop("$defs", {}), "JobCreate": job}.items():
                components.setdefault(name, model)
        return app.openapi_schema

    app.openapi = openapi
