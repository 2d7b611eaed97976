"""The server side of TLS: one certificate and key for both channels (HTTPS and the gRPC
proxy), and optionally a CA whose certificates clients must present."""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import grpc


@dataclass(frozen=True)
class ServerTls:
    """PEM files: the server's certificate chain, its private key, and the CA of the clients'
    certificates (None: clients need none)."""

    cert_file: Path
    key_file: Path
    client_ca_file: Path | None = None

    def check(self) -> None:
        """Load the files as a TLS server would, before anything listens.

        Raises:
            ValueError: a file is missing or unreadable, is not PEM, or the key does not
                belong to the certificate (one line, naming the option).
        """
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        for option, path in (("--tls-cert", self.cert_file), ("--tls-key", self.key_file),
                             ("--tls-client-ca", self.client_ca_file)):
            if path is not None and not path.is_file():
                raise ValueError(f"{option} {path}: no such file; accepted: a PEM file")
        try:
            context.load_cert_chain(self.cert_file, self.key_file)
        except (OSError, ssl.SSLError) as exc:
            raise ValueError(f"--tls-cert {self.cert_file} / --tls-key {self.key_file}: "
                             f"{_reason(exc)}; accepted: a PEM certificate and its own PEM "
                             "private key (unencrypted)") from None
        if self.client_ca_file is not None:
            try:
                context.load_verify_locations(cafile=self.client_ca_file)
            except (OSError, ssl.SSLError) as exc:
                raise ValueError(f"--tls-client-ca {self.client_ca_file}: {_reason(exc)}; "
                                 "accepted: PEM CA certificates") from None

    def uvicorn_options(self) -> dict[str, Any]:
        """The ``uvicorn.run`` keywords serving HTTPS with these files."""
        return {"ssl_certfile": str(self.cert_file), "ssl_keyfile": str(self.key_file),
                "ssl_ca_certs": str(self.client_ca_file) if self.client_ca_file else None,
                "ssl_cert_reqs": ssl.CERT_REQUIRED if self.client_ca_file else ssl.CERT_NONE}

    def grpc_credentials(self) -> grpc.ServerCredentials:
        """The gRPC server credentials with these files (client certificates required when a
        client CA is given)."""
        import grpc

        ca = self.client_ca_file.read_bytes() if self.client_ca_file else None
        return grpc.ssl_server_credentials(
            [(self.key_file.read_bytes(), self.cert_file.read_bytes())],
            root_certificates=ca, require_client_auth=ca is not None)


def _reason(exc: OSError | ssl.SSLError) -> str:
    if isinstance(exc, ssl.SSLError):
        return exc.reason or "not a usable PEM file"
    return exc.strerror or type(exc).__name__
