from fastapi import APIRouter
from fastapi.responses import JSONResponse
from sqlalchemy import text

from core.web_deps import SessionDep

router = APIRouter(tags=["health"])


@router.get("/healthz")
def healthz(db: SessionDep):
    try:
        db.execute(text("SELECT 1"))
    except Exception as exc:
        return JSONResponse(status_code=503, content={"status": "unhealthy", "database": str(exc)[:200]})
    return {"status": "ok", "database": "ok"}
