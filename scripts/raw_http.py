"""A keep-alive HTTP/1.1 client on asyncio streams, for the load and flood studies and the tests
that stand in for many clients at once. It writes a request and reads its answer to the end
(Content-Length or chunked), nothing more: on a 2-core machine an HTTP library's own CPU (httpx
spent ~3 ms a request) would be counted in the server's latencies, and a threaded client's GIL
would spread out requests meant to arrive together.
"""

import asyncio
import json
from urllib.parse import urlsplit


class RawConnection:
    def __init__(self, server: str, token: str | None = None):
        url = urlsplit(server)
        self.host, self.port, self.netloc = url.hostname, url.port or 80, url.netloc
        self.auth = f"Authorization: Bearer {token}\r\n" if token else ""
        self.reader = self.writer = None

    async def __aenter__(self):
        self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        return self

    async def __aexit__(self, *exc):
        self.writer.close()

    def encode(self, method: str, path: str, body: dict | bytes | None = None) -> bytes:
        """A whole request, to encode once and send many times."""
        payload = json.dumps(body).encode() if isinstance(body, dict) else (body or b"")
        head = f"{method} {path} HTTP/1.1\r\nHost: {self.netloc}\r\n{self.auth}"
        if payload:
            head += f"Content-Type: application/json\r\nContent-Length: {len(payload)}\r\n"
        return (head + "\r\n").encode() + payload

    async def send(self, request: bytes) -> int:
        """Send an encoded request; the answer's status, once its body has been read."""
        self.writer.write(request)
        await self.writer.drain()
        head = await self.reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ", 2)[1])
        headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:] if line)}
        if "content-length" in headers:
            await self.reader.readexactly(int(headers["content-length"]))
        elif headers.get("transfer-encoding", "").lower() == "chunked":
            while size := int((await self.reader.readuntil(b"\r\n")).split(b";")[0], 16):
                await self.reader.readexactly(size + 2)
            await self.reader.readuntil(b"\r\n")
        return status
