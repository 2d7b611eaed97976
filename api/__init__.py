"""The HTTP service: REST lookup of the best launcher configs, result listings, the dashboard.

Build the app with :func:`create_app`; ``xe2tune serve`` runs it on uvicorn.
"""

from __future__ import annotations

from xe2tune.api._credentials import Caller, CredentialRefused, Credentials, Refusal
from xe2tune.api._grpc_proxy import start_grpc_proxy
from xe2tune.api._tls import ServerTls
from xe2tune.api.main import create_app, create_asgi_app
from xe2tune.api.settings import Settings, get_settings

__all__ = [
    "Caller",
    "CredentialRefused",
    "Credentials",
    "Refusal",
    "ServerTls",
    "Settings",
    "create_app",
    "create_asgi_app",
    "get_settings",
    "start_grpc_proxy",
]
