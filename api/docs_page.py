"""The interactive API docs (/docs, Swagger UI) under a Content-Security-Policy of their own.

Swagger UI comes from its CDN and starts from one inline script, which the site-wide policy
(api/security_headers.py) would block. This page allows that CDN and exactly that script, by its
SHA-256, and nothing else inline. The page shows the OpenAPI schema, no stored value. (ReDoc,
which also needs web workers from blob: URLs, is not served.)
"""

import base64
import hashlib
import re

from fastapi import FastAPI
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse

CDN = "https://cdn.jsdelivr.net"


def _csp_for(page: str) -> str:
    hashes = " ".join(
        "'sha256-" + base64.b64encode(hashlib.sha256(body.encode()).digest()).decode() + "'"
        for body in re.findall(r"<script>(.*?)</script>", page, re.S)
    )
    return (f"default-src 'self'; script-src 'self' {CDN} {hashes}; style-src 'self' {CDN} 'unsafe-inline'; "
            "img-src 'self' data: https://fastapi.tiangolo.com; connect-src 'self'; object-src 'none'; "
            "base-uri 'none'; form-action 'self'; frame-ancestors 'none'")


def install_docs_page(app: FastAPI) -> None:
    page = get_swagger_ui_html(openapi_url=app.openapi_url, title=f"{app.title} - Swagger UI").body.decode()
    headers = {"Content-Security-Policy": _csp_for(page)}

    @app.get("/docs", include_in_schema=False)
    async def docs() -> HTMLResponse:
        return HTMLResponse(page, headers=headers)
