"""optuna's gRPC storage proxy, served with TLS (or plain on loopback) behind the token gate.

optuna's ``run_grpc_proxy_server`` takes neither server credentials nor interceptors, so the
server is assembled here from optuna's servicer and generated registration function (private
modules of optuna's ``_grpc`` package, the same two its ``make_server`` uses).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from xe2tune.api._credentials import Credentials

if TYPE_CHECKING:
    import grpc

    from xe2tune.api._tls import ServerTls
    from xe2tune.db import ResultStore

THREADS = 10  # as optuna's own proxy server


def start_grpc_proxy(store: ResultStore, *, host: str, port: int, tls: ServerTls | None,
                     api_token: str | None) -> grpc.Server:
    """Serve the store's optuna studies on ``host:port``; the server, started.

    ``store`` stays open for the server's life: the gate reads worker tokens through it.

    Raises:
        ImportError: grpcio or protobuf is not installed.
        RuntimeError: the address cannot be bound.
    """
    import grpc
    import optuna
    from optuna.storages._grpc.auto_generated.api_pb2_grpc import (
        add_StorageServiceServicer_to_server,
    )
    from optuna.storages._grpc.servicer import OptunaStorageProxyService

    from xe2tune.api._grpc_auth import TokenInterceptor
    from xe2tune.db import open_optuna_storage

    # optuna's caching wrapper, over a storage opened like every writer's (it may be the first)
    storage = optuna.storages.get_storage(open_optuna_storage(store))
    server = grpc.server(ThreadPoolExecutor(max_workers=THREADS),
                         interceptors=[TokenInterceptor(Credentials(store, api_token))])
    add_StorageServiceServicer_to_server(OptunaStorageProxyService(storage), server)
    address = f"{host}:{port}"
    bound = (server.add_secure_port(address, tls.grpc_credentials()) if tls is not None
             else server.add_insecure_port(address))
    if not bound:  # older grpcio returns 0 instead of raising
        raise RuntimeError(f"cannot bind {address}")
    server.start()
    return server
