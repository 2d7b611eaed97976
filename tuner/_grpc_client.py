"""The worker's side of the remote channels: TLS that verifies the server, and a credential on
every gRPC storage call.

optuna's ``GrpcStorageProxy`` opens a plain channel in its ``_setup`` (also run after
unpickling) and has no other hook, so :class:`TokenGrpcStorage` overrides that one method and
builds the same stub and cache on a channel of its own: TLS, or plain to loopback when asked,
and every call carrying ``authorization: Bearer <token>`` through a client interceptor (call
credentials would need TLS, and plain loopback must carry the token too).
"""

from __future__ import annotations

import ssl
import warnings
from collections import namedtuple
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
from optuna.exceptions import ExperimentalWarning
from optuna.storages import GrpcStorageProxy
from optuna.storages._grpc.auto_generated.api_pb2_grpc import StorageServiceStub
from optuna.storages._grpc.client import GrpcClientCache

MAX_MESSAGE = -1  # no limit on answers, as optuna's own channel


@dataclass(frozen=True)
class ClientTls:
    """PEM files: the CA the server's certificate must chain to (None: the system's CAs), and
    this worker's certificate and key for a server that requires one (None: no certificate)."""

    ca_file: Path | None = None
    cert_file: Path | None = None
    key_file: Path | None = None

    def ssl_context(self) -> ssl.SSLContext:
        """The context for HTTPS requests: the server verified, host name included.

        Raises:
            ValueError: a file is missing or unusable (one line, naming the option).
        """
        for option, path in (("--tls-ca", self.ca_file), ("--tls-cert", self.cert_file),
                             ("--tls-key", self.key_file)):
            if path is not None and not path.is_file():
                raise ValueError(f"{option} {path}: no such file; accepted: a PEM file")
        if (self.cert_file is None) != (self.key_file is None):
            raise ValueError("--tls-cert and --tls-key go together: this worker's certificate "
                             "and its private key")
        try:
            context = ssl.create_default_context(cafile=self.ca_file)
            if self.cert_file is not None:
                context.load_cert_chain(self.cert_file, self.key_file)
        except (OSError, ssl.SSLError) as exc:
            reason = exc.reason if isinstance(exc, ssl.SSLError) else exc.strerror
            raise ValueError(f"TLS files (--tls-ca, --tls-cert, --tls-key): {reason}; "
                             "accepted: PEM files, the key unencrypted") from None
        return context

    def grpc_credentials(self) -> grpc.ChannelCredentials:
        """The channel credentials with the same files."""
        return grpc.ssl_channel_credentials(
            root_certificates=self.ca_file.read_bytes() if self.ca_file else _system_roots(),
            private_key=self.key_file.read_bytes() if self.key_file else None,
            certificate_chain=self.cert_file.read_bytes() if self.cert_file else None)


def _system_roots() -> bytes | None:
    """The system's CA bundle (grpc otherwise trusts the roots it ships, not the system's)."""
    paths = ssl.get_default_verify_paths()
    for name in (paths.cafile, paths.openssl_cafile):
        if name and Path(name).is_file():
            return Path(name).read_bytes()
    return None


class _CallDetails(namedtuple("_CallDetails", ("method", "timeout", "metadata", "credentials",
                                               "wait_for_ready", "compression")),
                   grpc.ClientCallDetails):
    """A call's details with the credential added (grpc's own type is private)."""


class _Bearer(grpc.UnaryUnaryClientInterceptor):
    def __init__(self, token: str) -> None:
        self._entry = ("authorization", f"Bearer {token}")

    def intercept_unary_unary(self, continuation: Any, details: grpc.ClientCallDetails,
                              request: Any) -> Any:
        return continuation(_CallDetails(
            details.method, details.timeout, [*(details.metadata or ()), self._entry],
            details.credentials, details.wait_for_ready, details.compression), request)


class TokenGrpcStorage(GrpcStorageProxy):
    """optuna's gRPC storage client over TLS (``tls``; None: plain, for loopback only), every
    call carrying ``token`` (None: none, which a server refuses)."""

    def __init__(self, *, host: str, port: int, token: str | None,
                 tls: ClientTls | None) -> None:
        self._token, self._tls = token, tls
        with warnings.catch_warnings():  # optuna flags every instance experimental; we chose it
            warnings.simplefilter("ignore", ExperimentalWarning)
            super().__init__(host=host, port=port)

    def _setup(self) -> None:
        address = f"{self._host}:{self._port}"
        options = [("grpc.max_receive_message_length", MAX_MESSAGE)]
        self._plain_channel = (
            grpc.secure_channel(address, self._tls.grpc_credentials(), options=options)
            if self._tls is not None else grpc.insecure_channel(address, options=options))
        self._channel = (grpc.intercept_channel(self._plain_channel, _Bearer(self._token))
                         if self._token else self._plain_channel)
        self._stub = StorageServiceStub(self._channel)
        self._cache = GrpcClientCache(self._stub)

    def wait_server_ready(self, timeout: float | None = None) -> None:
        """Wait until the channel connects (and, with TLS, its handshake succeeded).

        Raises:
            ConnectionError: not within ``timeout`` seconds.
        """
        try:
            grpc.channel_ready_future(self._plain_channel).result(timeout=timeout)
        except grpc.FutureTimeoutError as exc:
            raise ConnectionError("gRPC connection timeout") from exc

    def __getstate__(self) -> dict[Any, Any]:
        state = super().__getstate__()
        del state["_plain_channel"]
        return state
