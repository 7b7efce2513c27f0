"""POST /api/jobs's and POST /api/results's bodies, parsed and checked on a thread instead of the
event loop.

Given `body: JobCreate`, FastAPI validates it on the event loop before the route runs, and a
job's validation is heavy: every source goes through the kernel description's checks and the
source guard (core/description/kernel.py, core/description/source_guard.py). A job of large sources then held every
request of its process, /healthz included, for as long as that took (issue 37, row 1). Here the
route reads the body itself (api/request_gate.py has bounded its size and checked its token by
then) and validates it on a thread, at most all the pool's threads but one at once per process
(GEMMWATCH_API_THREADS), so the others stay free for everything else. Bad input is the same 422
as FastAPI's. A posted run's body (up to GEMMWATCH_MAX_RESULTS_BYTES) the same way: 330 results
with 99 KB errors took 4.2 s a body on the event loop and /healthz waited up to 24.6 s (issue 49,
row 3).
"""

import asyncio
import hashlib
import json

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool

from api import validation_pool
from api.import_schemas import ImportIn
from api.limits import check_job_limits
from api.posted_schemas import ResultBatchIn
from api.schemas import JobCreate
from core.description import source_size
from core.settings import Settings
from core.web_deps import settings_of

_SCHEMAS = "#/components/schemas/{model}"
# The route takes no model, so its body is described here for the OpenAPI schema (and so for
# /docs, schemathesis and the route walk) as FastAPI would have described it.
def body_openapi(model: str) -> dict:
    return {"requestBody": {"required": True, "content": {
        "application/json": {"schema": {"$ref": _SCHEMAS.format(model=model)}}}}}


JOB_BODY_OPENAPI = body_openapi("JobCreate")
RESULTS_BODY_OPENAPI = body_openapi("ResultBatchIn")
INVALID = {"description": "Validation Error", "content": {
    "application/json": {"schema": {"$ref": _SCHEMAS.format(model="HTTPValidationError")}}}}


async def job_from(request: Request) -> JobCreate:
    return await validated_body(request, _checked_job)


async def validated_body(request: Request, check):
    return await off_the_loop(request, check, await request.body())


async def off_the_loop(request: Request, work, raw: bytes, *args):
    """work(raw, cfg, *args): for a small body on a thread, at most the process's validation slots
    at once; for a large one in a validation process (api/validation_pool.py); each writer's
    bodies one at a time (its token, else its address: api/loop_slots.py)."""
    cfg = settings_of(request)
    if cfg.validation_processes and len(raw) > validation_pool.LARGE_BYTES:
        async with request.app.state.heavy_slots.turn(_writer(request)):
            pool = validation_pool.executor(cfg.validation_processes)
            # Submitted from a thread: a submit may start the fork server and wait for its imports
            # (1.5 s the first time), which on the event loop would hold every request of the process.
            done = await run_in_threadpool(pool.submit, work, raw, cfg, *args)
            return await asyncio.wrap_future(done)
    async with request.app.state.validation_slots.turn(_writer(request)):
        return await run_in_threadpool(work, raw, cfg, *args)


def _writer(request: Request) -> str:
    """Who is writing, as far as fairness goes: the bearer token's digest (api/request_gate.py has
    checked it by now), else the client's address."""
    header = request.headers.get("authorization")
    if header:
        return "token:" + hashlib.sha256(header.encode("latin-1", "replace")).hexdigest()
    return "address:" + (request.client.host if request.client else "?")


def _parsed(model, raw: bytes):
    try:
        return model.model_validate_json(raw)
    except ValidationError as exc:
        raise RequestValidationError([{**e, "loc": ("body", *e["loc"])} for e in exc.errors()]) from None


def parsed_from_python(model, raw: bytes):
    """Parsed by Python's json, then validated, as FastAPI parses a model's body: an env nested past
    its schema's depth is refused by the schema's own words ("nested deeper than 4 levels"), not by
    the JSON parser's recursion limit."""
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise RequestValidationError([{"type": "json_invalid", "loc": ("body", 0), "msg": "JSON decode error",
                                       "input": {}, "ctx": {"error": str(exc)[:200]}}]) from None
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise RequestValidationError([{**e, "loc": ("body", *e["loc"])} for e in exc.errors()]) from None


def checked_results(raw: bytes, _cfg: Settings) -> ResultBatchIn:
    return parsed_from_python(ResultBatchIn, raw)


def _checked_job(raw: bytes, cfg: Settings) -> JobCreate:
    _sources_within_limit(raw, cfg)
    body = _parsed(JobCreate, raw)
    check_job_limits(body, cfg)
    return body


def _sources_within_limit(raw: bytes, cfg: Settings) -> None:
    """The deployment's source limit, applied to the body's files before any of them is scanned:
    the source guard then reads at most GEMMWATCH_MAX_SOURCE_BYTES of distinct text a job, never
    the 4 MB a description may hold (issue 49, row 1). A body of another shape is left to the model,
    whose 422 names what is wrong."""
    try:
        data = json.loads(raw)
    except ValueError:
        return
    sources = data.get("sources") if isinstance(data, dict) else None
    if not isinstance(sources, list):
        return
    files = [s["files"] for s in sources if isinstance(s, dict) and isinstance(s.get("files"), dict)]
    texts = [{path: text for path, text in f.items() if isinstance(text, str)} for f in files]
    names = [str(s.get("name"))[:60] for s in sources if isinstance(s, dict)]
    refused = source_size.refusal(names, source_size.distinct_bytes(texts), cfg.max_source_bytes)
    if refused:
        raise RequestValidationError([{"type": "value_error", "loc": ("body", "sources"), "msg": refused,
                                       "input": None}])


def describe_job_body(app: FastAPI) -> None:
    """Put JobCreate, ResultBatchIn, ImportIn and the models they name among the OpenAPI schema's components."""
    make = app.openapi

    def openapi() -> dict:
        if app.openapi_schema is None:
            schema = make()
            components = schema.setdefault("components", {}).setdefault("schemas", {})
            for top in (JobCreate, ResultBatchIn, ImportIn):
                described = top.model_json_schema(ref_template=_SCHEMAS)
                for name, model in {**described.pop("$defs", {}), top.__name__: described}.items():
                    components.setdefault(name, model)
        return app.openapi_schema

    app.openapi = openapi
