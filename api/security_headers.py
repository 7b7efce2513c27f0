"""Headers every answer carries, so a browser holds the pages to what they are (issue 20).

- Content-Security-Policy: scripts only from this site, none inline (the dashboard's pages carry
  data, never code: dashboard/static/*.js draw them), no plugins, no <base>, forms post only
  here, and `frame-ancestors 'none'`: no other site may frame a page (clickjacking). Styles may be
  inline: Plotly styles what it draws, and a style runs no code.
- X-Content-Type-Options: nosniff (an export is never read as a page or a script).
- Referrer-Policy: same-origin (a page's URL, with its filters, is not sent to other sites).
- X-Frame-Options: DENY, for browsers that predate frame-ancestors.

A route may set its own Content-Security-Policy (the API docs page does, api/docs_page.py); the
others are added where a route set none. Pure ASGI, not BaseHTTPMiddleware: a few microseconds a
request, no extra task.
"""

CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
    "connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; "
    "frame-ancestors 'none'"
)
HEADERS = [
    (b"content-security-policy", CONTENT_SECURITY_POLICY.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),
    (b"x-frame-options", b"DENY"),
]


class SecurityHeaders:
    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message):
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", ()))
                present = {name.lower() for name, _ in headers}
                headers.extend(h for h in HEADERS if h[0] not in present)
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_headers)
