"""The gRPC proxy's gate: every storage call presents a credential before optuna's servicer
sees it, and a worker token reaches only its campaign's studies.

The credential travels in the call's metadata (``authorization: Bearer <token>``). A call
without one or with an unknown one ends UNAUTHENTICATED, with a revoked one PERMISSION_DENIED,
both before the servicer runs, so the database is untouched. A worker token's call names its
study by name (create, look up), by study id or by trial id; the study must be its campaign's
(:meth:`Caller.may_touch_study`), else PERMISSION_DENIED. Listing every study and deleting one
are the API token's alone: no worker needs them. The checks run in the server's thread pool (in
the wrapped handler), not in the thread that dispatches calls, since they read the database.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import grpc

from xe2tune.api._credentials import Caller, CredentialRefused, Credentials, Refusal
from xe2tune.errors import StoreError

WORKER_DENIED = frozenset({"GetAllStudies", "DeleteStudy"})


def _bearer(metadata: tuple[tuple[str, str | bytes], ...] | None) -> str | None:
    for key, value in metadata or ():
        if key == "authorization" and isinstance(value, str) and value.startswith("Bearer "):
            return value[len("Bearer "):]
    return None


class TokenInterceptor(grpc.ServerInterceptor):
    """Admits a call only with a live credential, and a worker token only to its campaign."""

    def __init__(self, credentials: Credentials) -> None:
        self._credentials = credentials

    def intercept_service(self, continuation: Callable[[Any], Any],
                          handler_call_details: grpc.HandlerCallDetails) -> Any:
        handler = continuation(handler_call_details)
        if handler is None:
            return None
        method = handler_call_details.method.rsplit("/", 1)[-1]
        behavior = handler.unary_unary
        if behavior is None:  # optuna's service has unary calls only; refuse anything else
            return grpc.unary_unary_rpc_method_handler(
                lambda _request, context: context.abort(grpc.StatusCode.UNIMPLEMENTED,
                                                        f"{method} is not served here"))

        def admitted(request: Any, context: grpc.ServicerContext) -> Any:
            self._admit(method, request, context)
            return behavior(request, context)

        return grpc.unary_unary_rpc_method_handler(
            admitted, request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer)

    def _admit(self, method: str, request: Any, context: grpc.ServicerContext) -> None:
        """Return when the call may run; abort it otherwise (``context.abort`` raises)."""
        try:
            caller = self._credentials.identify(_bearer(context.invocation_metadata()))
            study = None if caller.campaign_id is None else self._study_of(method, request)
        except CredentialRefused as exc:
            context.abort(grpc.StatusCode.PERMISSION_DENIED if exc.refusal is Refusal.REVOKED
                          else grpc.StatusCode.UNAUTHENTICATED, str(exc))
        except StoreError as exc:
            context.abort(grpc.StatusCode.UNAVAILABLE, str(exc).splitlines()[0])
        if caller.campaign_id is not None and (study is None or
                                               not caller.may_touch_study(study)):
            context.abort(grpc.StatusCode.PERMISSION_DENIED, _out_of_scope(caller, method))

    def _study_of(self, method: str, request: Any) -> str | None:
        """The name of the study the call touches; None for calls no worker token makes."""
        if method in WORKER_DENIED:
            return None
        fields = request.DESCRIPTOR.fields_by_name
        if "study_name" in fields:
            return request.study_name
        tokens = self._credentials.tokens
        if "study_id" in fields:
            return tokens.optuna_study_name(study_id=request.study_id)
        if "trial_id" in fields:
            return tokens.optuna_study_name(trial_id=request.trial_id)
        return None


def _out_of_scope(caller: Caller, method: str) -> str:
    return (f"worker token {caller.token_id} reaches only the studies of campaign "
            f"{caller.campaign_id}; {method} asked for another (or for every study)")
