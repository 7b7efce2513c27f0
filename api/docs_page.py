"""The interactive API docs (/docs, Swagger UI) under a Content-Security-Policy of their own, served
whole by this server: a deployment without internet (a GPU cluster's, an air-gapped lab's) gets the
same page as one with it.

Swagger UI's script and style come from the fastapi-offline wheel's copy of swagger-ui-dist
(mounted at /docs-assets), and the page starts from one inline script, which the site-wide policy
(api/security_headers.py) would block: this page allows exactly that script, by its SHA-256, and
scripts and styles from this server, nothing else. The page shows the OpenAPI schema, no stored
value. /redoc, a name other frameworks' docs live at, leads here (ReDoc itself would need web
workers from blob: URLs).
"""

import base64
import hashlib
import re
from pathlib import Path

import fastapi_offline
from fastapi import FastAPI
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse, RedirectResponse
from fastapi.staticfiles import StaticFiles

ASSETS = "/docs-assets"
_STATIC = Path(fastapi_offline.__file__).parent / "static"


def _csp_for(page: str) -> str:
    hashes = " ".join(
        "'sha256-" + base64.b64encode(hashlib.sha256(body.encode()).digest()).decode() + "'"
        for body in re.findall(r"<script>(.*?)</script>", page, re.S)
    )
    return (f"default-src 'self'; script-src 'self' {hashes}; style-src 'self' 'unsafe-inline'; "
            "img-src 'self' data:; connect-src 'self'; object-src 'none'; "
            "base-uri 'none'; form-action 'self'; frame-ancestors 'none'")


def install_docs_page(app: FastAPI) -> None:
    app.mount(ASSETS, StaticFiles(directory=str(_STATIC)), name="docs-assets")
    page = get_swagger_ui_html(openapi_url=app.openapi_url, title=f"{app.title} - Swagger UI",
                               swagger_js_url=f"{ASSETS}/swagger-ui-bundle.js",
                               swagger_css_url=f"{ASSETS}/swagger-ui.css",
                               swagger_favicon_url=f"{ASSETS}/favicon.png").body.decode()
    headers = {"Content-Security-Policy": _csp_for(page)}

    @app.get("/docs", include_in_schema=False)
    async def docs() -> HTMLResponse:
        return HTMLResponse(page, headers=headers)

    @app.get("/redoc", include_in_schema=False)
    async def redoc() -> RedirectResponse:
        return RedirectResponse("/docs", status_code=307)
