"""TLS for the API's two ends: the server's certificate (and, for mutual TLS, the CA its clients'
certificates must chain to), and what a client trusts (and presents).

Files are PEM, read once at start; a bad file is an `InvalidInput` naming it, not a gRPC crash
later. The approval page and the console are served with the same certificate (an
`ssl.SSLContext` from the same files). Rejected: certificate identities as principals (a
certificate cannot be revoked without a CRL or OCSP the deployment must run; bearer credentials
are revoked in the database at once) — mutual TLS here decides who may connect, credentials who
may do what.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path

import grpc

from amber.abi import InvalidInput


def _read(path: Path, what: str) -> bytes:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InvalidInput(f"cannot read the {what} {path}: {exc.strerror}") from None
    if b"-----BEGIN " not in data:
        raise InvalidInput(f"the {what} {path} is not PEM")
    return data


@dataclass(frozen=True, slots=True)
class ServerTls:
    """The server's certificate chain and key; with `client_ca`, clients must present a
    certificate signed by it (mutual TLS)."""

    cert_file: Path
    key_file: Path
    client_ca_file: Path | None = None

    def grpc_credentials(self) -> grpc.ServerCredentials:
        pair = (_read(self.key_file, "TLS key"), _read(self.cert_file, "TLS certificate"))
        client_ca = None if self.client_ca_file is None else _read(self.client_ca_file, "client CA")
        return grpc.ssl_server_credentials(
            [pair], root_certificates=client_ca, require_client_auth=client_ca is not None
        )

    def ssl_context(self) -> ssl.SSLContext:
        """For the HTTP page and console: the same certificate, TLS 1.2 at least."""
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        try:
            context.load_cert_chain(self.cert_file, self.key_file)
        except (OSError, ssl.SSLError) as exc:
            raise InvalidInput(
                f"cannot load {self.cert_file} with {self.key_file}: {exc}"
            ) from None
        if self.client_ca_file is not None:
            context.load_verify_locations(self.client_ca_file)
            context.verify_mode = ssl.CERT_REQUIRED
        return context


SYSTEM_ROOTS = "system"
"""`ClientTls.ca_file` value meaning the operating system's trusted roots."""


@dataclass(frozen=True, slots=True)
class ClientTls:
    """What a client trusts (a CA file, or `system`), and its own certificate for mutual TLS."""

    ca_file: str = SYSTEM_ROOTS
    cert_file: str | None = None
    key_file: str | None = None

    def grpc_credentials(self) -> grpc.ChannelCredentials:
        if (self.cert_file is None) != (self.key_file is None):
            raise InvalidInput("a client certificate needs its key, and a key its certificate")
        roots = None if self.ca_file == SYSTEM_ROOTS else _read(Path(self.ca_file), "TLS CA")
        cert = None if self.cert_file is None else _read(Path(self.cert_file), "certificate")
        key = None if self.key_file is None else _read(Path(self.key_file), "key")
        return grpc.ssl_channel_credentials(
            root_certificates=roots, private_key=key, certificate_chain=cert
        )
