"""Who the CLI says it is: the API credential it sends, and the operator it names."""

from __future__ import annotations

import argparse
import getpass
import os
from pathlib import Path
from typing import TYPE_CHECKING

from amber.abi import InvalidInput

if TYPE_CHECKING:
    from amber.runtime.api import ClientTls

OPERATOR_TOKEN_ENV = "AMBER_OPERATOR_TOKEN"


def operator_token() -> str:
    """The operator token sent with operator commands (`$AMBER_OPERATOR_TOKEN`)."""
    return os.environ.get(OPERATOR_TOKEN_ENV, "")


def operator_name(args: argparse.Namespace) -> str:
    """`--operator`, else: with a token (an API credential or an operator token) nothing (the
    server takes the name from the token), without one the user name."""
    if operator_token() or api_token():
        return str(getattr(args, "operator", None) or "")
    return str(getattr(args, "operator", None) or getpass.getuser())


def api_token() -> str:
    """The API credential the CLI sends (see `runtime.client.discover_token`); "" when there is
    none (a server that checks credentials then refuses the call)."""
    from amber.runtime.client import discover_token

    return discover_token()


TOKEN_FILE = "token"
"""Where `amber dev` and `--save` keep a credential, under a home (mode 0600)."""


def token_files() -> list[Path]:
    from amber.runtime.client import token_files as files

    return files()


def save_token(home: Path, token: str, file: str = TOKEN_FILE) -> Path:
    """Write `token` to `home/file`, readable by this user only."""
    home.mkdir(parents=True, exist_ok=True)
    path = home / file
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(token + "\n")
    os.chmod(path, 0o600)
    return path


TLS_CA_ENV = "AMBER_TLS_CA"
TLS_CERT_ENV = "AMBER_TLS_CERT"
TLS_KEY_ENV = "AMBER_TLS_KEY"


def client_tls() -> ClientTls | None:
    """TLS for the CLI's and workers' connection: on when `$AMBER_TLS_CA` names the CA file to
    trust (or `system` for the system's roots); `$AMBER_TLS_CERT` and `$AMBER_TLS_KEY` give a
    client certificate for a server that requires one. None: plaintext."""
    ca = os.environ.get(TLS_CA_ENV, "").strip()
    if not ca:
        if os.environ.get(TLS_CERT_ENV) or os.environ.get(TLS_KEY_ENV):
            raise InvalidInput(f"a client certificate needs {TLS_CA_ENV} (a CA file, or system)")
        return None
    from amber.runtime.api import ClientTls  # grpc: loaded only when a call is made

    return ClientTls(
        ca_file=ca,
        cert_file=os.environ.get(TLS_CERT_ENV) or None,
        key_file=os.environ.get(TLS_KEY_ENV) or None,
    )
