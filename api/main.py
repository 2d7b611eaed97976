"""The FastAPI application: created here, with one router per resource."""

from __future__ import annotations

from fastapi import FastAPI
from fastapi_offline import FastAPIOffline

from xe2tune import __version__
from xe2tune.api import _best, _configs, _dashboard, _devices, _health, _results, _studies
from xe2tune.api._errors import install_error_handlers
from xe2tune.api._fastpath import BestFastPath
from xe2tune.api._guards import RequestGuard
from xe2tune.api._lifespan import lifespan
from xe2tune.api.settings import Settings, get_settings

DOCS_ASSETS = "/static/docs"


def create_app(settings: Settings | None = None) -> FastAPI:
    """The xe2tune service: REST API under /v1, dashboard at /, OpenAPI at /docs.

    Given ``settings`` replace :func:`get_settings` for every dependency of this app (tests
    pass their own); otherwise the environment decides.

    Example:
        >>> app = create_app(Settings(db_url="sqlite:////tmp/xe2tune-example.db"))
        >>> sorted(r.path for r in app.routes if r.path.startswith("/v1/best"))
        ['/v1/best']
    """
    chosen = settings or get_settings()
    # Swagger UI and ReDoc from the assets fastapi-offline ships, not a CDN: /docs works offline.
    app = FastAPIOffline(
        static_url=DOCS_ASSETS,
        title="xe2tune",
        version=__version__,
        summary="Best launcher configs of flash-attention SYCL kernels, and their results.",
        lifespan=lifespan,
    )
    app.state.settings = chosen
    if settings is not None:
        app.dependency_overrides[get_settings] = lambda: chosen
    install_error_handlers(app)
    app.add_middleware(RequestGuard, allowed_hosts=chosen.allowed_hosts,
                       max_body_bytes=chosen.max_body_bytes)
    for module in (_best, _configs, _results, _devices, _studies, _health, _dashboard):
        app.include_router(module.router)
    return app


def create_asgi_app(settings: Settings | None = None) -> RequestGuard:
    """What ``xe2tune serve`` runs: :func:`create_app` behind the ``/v1/best`` fast path.

    The fast path answers before the app's middleware, so the request guard wraps it as well
    (requests that reach the app are checked twice, at the cost of a header lookup).
    """
    chosen = settings or get_settings()
    return RequestGuard(BestFastPath(create_app(chosen)), allowed_hosts=chosen.allowed_hosts,
                        max_body_bytes=chosen.max_body_bytes)
