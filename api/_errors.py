"""Error responses: every 4xx/5xx body is ``{"detail": "<one line>"}`` naming what was wrong."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from xe2tune.errors import InvalidConfig, InvalidProblem, StoreError

_PLACES = {"query": "query parameter", "path": "path parameter", "body": "body field",
           "header": "header"}


def describe(error: dict[str, Any]) -> str:
    """One pydantic error as "query parameter seq: Input should be ... (got '0')"."""
    place, *names = error["loc"] or ("request",)
    name = ".".join(str(part) for part in names)
    label = f"{_PLACES.get(place, place)} {name}".strip()
    if error["type"] == "extra_forbidden":
        return f"{label} is not accepted (see /docs for the accepted parameters)"
    message = f"{label}: {error['msg']}"
    if place in ("query", "path") and error["type"] != "missing":
        message += f" (got {error.get('input')!r})"
    return message


async def _validation_error(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = list(exc.errors())
    return JSONResponse(
        status_code=422,
        content={"detail": "; ".join(describe(e) for e in errors),
                 "errors": [{key: jsonable_encoder(e[key]) for key in ("type", "loc", "msg")}
                            for e in errors]},
    )


async def _bad_input(_request: Request, exc: Exception) -> JSONResponse:
    return JSONResponse(status_code=422, content={"detail": str(exc).splitlines()[0]})


async def _store_unavailable(_request: Request, exc: Exception) -> JSONResponse:
    first_line = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return JSONResponse(status_code=503, content={"detail": f"database error: {first_line}"})


def install_error_handlers(app: FastAPI) -> None:
    """Register the handlers: 422 for bad input of any kind, 503 when the database fails."""
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(InvalidProblem, _bad_input)
    app.add_exception_handler(InvalidConfig, _bad_input)
    app.add_exception_handler(StoreError, _store_unavailable)
