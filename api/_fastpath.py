"""The outermost ASGI layer: ``GET /v1/best`` query strings already answered skip the app.

Kernel launchers repeat identical requests. The route validates each new query string once
and registers it with the index (:meth:`BestIndex.alias`); after that, this layer answers the
same query string from the index's ready bytes before Starlette's middleware, routing,
dependency solving and pydantic validation run, which are most of the cost of a request (about
4x the cost of this layer). The answer is the same status, bytes and headers the route sends;
anything else, lifespan events included, goes to the app unchanged.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fastapi import FastAPI
    from starlette.types import Receive, Scope, Send

BEST_PATH = "/v1/best"


class BestFastPath:
    """ASGI wrapper of the app; reads ``app.state.best_index`` once the lifespan has set it."""

    def __init__(self, app: FastAPI) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] == BEST_PATH and scope["method"] == "GET":
            index = getattr(self.app.state, "best_index", None)
            answer = index.cached_raw(scope["query_string"]) if index is not None else None
            if answer is not None:
                await send({"type": "http.response.start", "status": answer.status,
                            "headers": answer.headers})
                await send({"type": "http.response.body", "body": answer.body})
                return
        await self.app(scope, receive, send)
