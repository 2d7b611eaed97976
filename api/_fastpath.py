"""A cache in front of the router for ``GET /v1/best`` query strings already answered.

Kernel launchers repeat identical requests. The route validates each new query string once
and registers it with the index (:meth:`BestIndex.alias`); after that, this middleware answers
the same query string from the index's ready bytes without routing, dependency solving or
pydantic validation, which is most of FastAPI's cost per request. The answer is the same bytes
and headers the route sends; anything it does not know falls through to the app unchanged.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Receive, Scope, Send

BEST_PATH = "/v1/best"


class BestFastPath:
    """ASGI middleware; needs ``app.state.best_index`` (set by the lifespan)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] == BEST_PATH and scope["method"] == "GET":
            index = getattr(scope["app"].state, "best_index", None)
            answer = index.cached_raw(scope["query_string"]) if index is not None else None
            if answer is not None:
                await send({"type": "http.response.start", "status": answer.status,
                            "headers": answer.headers})
                await send({"type": "http.response.body", "body": answer.body})
                return
        await self.app(scope, receive, send)
