"""Forms that can't be forged: a request that changes anything must come from this site's pages.

The dashboard's forms (log in, log out, cancel a job) act on the visitor's session cookie, which
the browser adds by itself. SameSite=Lax keeps it from other *sites*, but a page on another port
of the same host is the same site: it cancelled a job for a logged-in user, and a cross-site POST
/login replaced the visitor's session with the attacker's token (issue 20, findings 4 and 5).

So every POST, PUT, PATCH and DELETE is checked here, before any route, as OWASP's CSRF sheet
advises for origin verification:
- `Sec-Fetch-Site` (sent by every current browser) must be `same-origin` or `none` (typed or
  bookmarked); `same-site` (another port, a sibling subdomain) and `cross-site` are refused.
- `Origin`, where sent (every browser sends it with a POST), must be this server's own: its
  scheme-less host and port as the request's Host header names them, or one of
  GEMMWATCH_PUBLIC_ORIGINS (behind a proxy that rewrites Host). `null` is refused.
- Without Origin, a dashboard form post needs a Referer of this origin. An API request (/api/...)
  may come without both: scripts and the CLI send none, and the API honours no cookie, only a
  bearer token, which no other page can make a browser send.
Pure ASGI: no body is read, a refused request never reaches a route.
"""

import json
from urllib.parse import urlsplit

UNSAFE = frozenset({"POST", "PUT", "PATCH", "DELETE"})
_DEFAULT_PORTS = {"http": "80", "https": "443"}


def _host_port(netloc: str, scheme: str) -> str:
    """'Example.org:443' (https) -> 'example.org'; the default port left out, as browsers write Origin."""
    netloc = netloc.strip().lower()
    host, sep, port = netloc.rpartition(":")
    if sep and port.isdigit() and "]" not in port and port == _DEFAULT_PORTS.get(scheme):
        return host
    return netloc


def _origin_of(url: str) -> str | None:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return None
    return _host_port(parts.netloc, parts.scheme)


class SameOriginWrites:
    def __init__(self, app, public_origins: tuple[str, ...] = ()):
        self.app = app
        self.public = {o for o in (_origin_of(u) for u in public_origins) if o}

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and scope["method"] in UNSAFE:
            refusal = self.refusal(scope)
            if refusal is not None:
                body = json.dumps({"detail": refusal}).encode()
                await send({"type": "http.response.start", "status": 403,
                            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)

    def refusal(self, scope) -> str | None:
        """Why this request may not change anything, or None."""
        headers = {name.decode("latin-1").lower(): value.decode("latin-1") for name, value in scope["headers"]}
        fetch_site = headers.get("sec-fetch-site")
        if fetch_site is not None and fetch_site not in ("same-origin", "none"):
            return f"refused: a {fetch_site} request may not change anything here (forms post from this site only)"
        own = {_host_port(headers.get("host", ""), scope.get("scheme", "http"))} | self.public
        origin = headers.get("origin")
        if origin is not None:
            if _origin_of(origin) not in own:
                return f"refused: a request from {origin[:100]!r} may not change anything here (forms post from this site only)"
            return None
        if scope["path"].startswith("/api/"):
            return None
        referer = headers.get("referer")
        if referer is None or _origin_of(referer) not in own:
            return "refused: a form post must come from this site's own page (no Origin or Referer of this site)"
        return None
