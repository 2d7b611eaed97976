"""The outermost ASGI checks: a Host header this server answers to, and a bounded request body.

A browser on any web page can be made to send requests to a loopback server under a host name
the attacker controls (DNS rebinding) and read the answers; the Host header is the one thing
such a request cannot fake, so every request's Host must be one of the configured names
(loopback by default), else 400. Request bodies are buffered up to ``max_body_bytes`` before the
app sees them, so an oversize body is a 413 whether it declares its length or is chunked. The
rest of an oversize body is read and dropped (up to ``DRAIN_BYTES``) before the 413 is sent:
clients send the whole body before reading the answer, and a server that closes on unread
data resets the connection, so the client would see a reset instead of the 413.
Both answers are JSON ``{"detail": "<one line>"}`` like every other error of the API.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")
DRAIN_BYTES = 64 << 20  # past this an oversize upload is answered mid-way (and likely reset)


def normalize_host(name: str) -> str:
    """A host name as compared: lower case, no trailing dot, IPv6 literals in brackets."""
    name = name.strip().lower().rstrip(".")
    return f"[{name}]" if ":" in name and not name.startswith("[") else name


def _host_of(header: str) -> str:
    """The host part of a Host header value (``name``, ``name:port``, ``[v6]:port``)."""
    header = header.strip()
    if header.startswith("["):
        return normalize_host(header[: header.find("]") + 1])
    return normalize_host(header.rsplit(":", 1)[0] if ":" in header else header)


async def _reject(send: Send, status: int, detail: str) -> None:
    body = json.dumps({"detail": detail}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


class RequestGuard:
    """ASGI wrapper refusing foreign Host headers (400) and oversize bodies (413).

    Lifespan and other non-HTTP scopes pass through unchanged.
    """

    def __init__(self, app: ASGIApp, *, allowed_hosts: Iterable[str],
                 max_body_bytes: int) -> None:
        self.app = app
        self.allowed = frozenset(normalize_host(h) for h in allowed_hosts)
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        host = headers.get(b"host", b"").decode("latin-1")
        if _host_of(host) not in self.allowed:
            shown = host[:80] if host else "(none)"
            await _reject(send, 400, f"Host header {shown!r} is not a name this server answers "
                                     f"to; accepted: {', '.join(sorted(self.allowed))} (xe2tune "
                                     "serve --allowed-host NAME adds one)")
            return
        length = headers.get(b"content-length")
        if length is None and b"transfer-encoding" not in headers:
            await self.app(scope, receive, send)  # no body
            return
        declared = length is not None and (not length.isdigit()
                                           or int(length) > self.max_body_bytes)
        body = None if declared else await self._read_body(receive)
        if body is None:
            await _drain(receive)
            size = f"of {length.decode('latin-1')[:20]}" if declared else \
                f"over {self.max_body_bytes}"
            await _reject(send, 413, f"request body {size} bytes; accepted: at most "
                                     f"{self.max_body_bytes} bytes")
            return
        await self.app(scope, _replay(body, receive), send)

    async def _read_body(self, receive: Receive) -> bytes | None:
        """The whole body, or None as soon as it exceeds the limit (or the client left)."""
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return None
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body_bytes:
                return None
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)


async def _drain(receive: Receive) -> None:
    """Read and drop the rest of a request body, up to DRAIN_BYTES."""
    drained = 0
    while drained <= DRAIN_BYTES:
        message = await receive()
        if message["type"] != "http.request":
            return
        drained += len(message.get("body", b""))
        if not message.get("more_body", False):
            return


def _replay(body: bytes, receive: Receive) -> Receive:
    """A receive channel that yields the buffered body once, then the client's own messages."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay
