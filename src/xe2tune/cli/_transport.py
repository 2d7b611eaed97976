"""What crosses a network: TLS or, asked for explicitly, plain text to loopback only.

The server and the worker share the rule: a channel that carries tokens and rewrites studies is
encrypted and the server verified, unless both ends are on this host (``--insecure``, refused
for any other address).
"""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Annotated

import typer

LOOPBACK_NAMES = ("localhost",)

TlsCertOption = Annotated[Path | None, typer.Option(
    "--tls-cert", help="PEM certificate (chain) of this end, for TLS on both channels")]
TlsKeyOption = Annotated[Path | None, typer.Option(
    "--tls-key", help="PEM private key (unencrypted) of --tls-cert")]
InsecureOption = Annotated[bool, typer.Option(
    "--insecure", help="plain text instead of TLS: only to or on a loopback address")]


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name, an IPv4 or a bracketed or bare IPv6 literal) is this host."""
    name = host.strip().strip("[]").rstrip(".").lower()
    if name in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False
