"""POST /api/imports: another tool's result file stored as a posted run (core/exchange/imports/).

The file is read here, on the server, by the same readers for every client (`gemmwatch import`,
curl): its results are then checked, stored and trusted exactly as POST /api/results's are, with a
mode that says which tool timed them, so a chart or a verdict never mixes them with gemmwatch's."""

import base64
import binascii

from fastapi import APIRouter, HTTPException, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import ValidationError

from api.auth import Credentials
from api.import_schemas import ImportIn, ImportOut
from api.job_body import INVALID, body_openapi, off_the_loop, parsed_from_python
from api.posted_schemas import ResultBatchIn
from api.routes.results import store_run
from core.exchange.imports import ImportRefused, read_import
from core.exchange.imports.imported_run import as_batch
from core.records.db import session_factory

router = APIRouter(prefix="/api/imports", tags=["results"])


@router.post("", response_model=ImportOut, status_code=201, openapi_extra=body_openapi("ImportIn"),
             responses={201: {"description": "stored as a finished job"},
                        200: {"description": "this file (with this mapping and commit) was imported before: its job"},
                        409: {"description": "the GPU, or the commit, is recorded with another identity"},
                        422: INVALID})
async def post_import(request: Request, creds: Credentials):
    """Import an nvbench JSON file, a CUTLASS profiler CSV or a plain table (the body: ImportIn).
    Each measured GEMM becomes a result whose mode names its tool ("nvbench:cold"), whose env.imported
    says where it came from and how it was timed. Idempotent: the same file, mapping and commit again
    adds nothing. Needs a token with the `results` scope."""
    status, content, headers = await off_the_loop(request, store_import, await request.body(), creds)
    if status >= 400:
        raise HTTPException(status_code=status, detail=content["detail"], headers=headers)
    return JSONResponse(content, status_code=status)


def store_import(raw: bytes, cfg, creds) -> tuple[int, dict, dict | None]:
    """Read, convert, check and store an import; (status, JSON, headers) as store_posted_run's."""
    body = parsed_from_python(ImportIn, raw)
    try:
        run = read_import(body.format, body.content, axes=dict(body.axes), dtype=body.dtype, form=body.form,
                          file_name=body.file_name, files=_decoded(body.files), timed=body.timed, device=body.device)
        batch = as_batch(run, gpu=body.gpu.model_dump(exclude_none=True) if body.gpu else None,
                         commit=body.commit.model_dump(mode="json", exclude_none=True) if body.commit else None,
                         run_id=body.run_id, max_samples=cfg.max_posted_samples,
                         digest_of=body.model_dump(mode="json", exclude={"run_id"}))
    except ImportRefused as refused:
        raise _invalid("content", str(refused)) from None
    try:
        posted = ResultBatchIn.model_validate(batch)
    except ValidationError as exc:  # a value the file holds that no result may (a size past 2^20)
        first = exc.errors()[0]
        where = _entry_of(batch, first["loc"])
        raise _invalid("content", f"{where}: {first['msg']} ({'.'.join(map(str, first['loc']))})") from None
    try:
        response = Response(status_code=201)
        with session_factory(cfg)() as db:
            out = store_run(posted, db, cfg, response, creds)
        answer = ImportOut(job_id=out.job_id, created=out.created, results=out.results,
                           modes=sorted({r.mode for r in posted.results}), skipped=run.skipped[:1000])
        return response.status_code, answer.model_dump(mode="json"), None
    except HTTPException as exc:
        return exc.status_code, {"detail": exc.detail}, dict(exc.headers or {}) or None


def _decoded(files: dict[str, str]) -> dict[str, bytes]:
    try:
        return {name: base64.b64decode(text, validate=True) for name, text in files.items()}
    except (binascii.Error, ValueError):
        raise _invalid("files", "a sample file is not base64") from None


def _entry_of(batch: dict, loc: tuple) -> str:
    """The file's own name for the result a validation error is about."""
    if len(loc) > 1 and loc[0] == "results" and isinstance(loc[1], int):
        return batch["results"][loc[1]]["env"]["imported"].get("entry") or f"result {loc[1]}"
    return "the import"


def _invalid(field: str, message: str) -> RequestValidationError:
    return RequestValidationError([{"type": "value_error", "loc": ("body", field), "msg": message, "input": None}])
