"""Who the CLI says runs an operator command."""

from __future__ import annotations

import argparse
import getpass
import os

OPERATOR_TOKEN_ENV = "AMBER_OPERATOR_TOKEN"


def operator_token() -> str:
    """The operator token sent with operator commands (`$AMBER_OPERATOR_TOKEN`)."""
    return os.environ.get(OPERATOR_TOKEN_ENV, "")


def operator_name(args: argparse.Namespace) -> str:
    """`--operator`, else: with a token nothing (the server takes the name from the token),
    without one the user name."""
    if operator_token():
        return str(getattr(args, "operator", None) or "")
    return str(getattr(args, "operator", None) or getpass.getuser())
