"""`amber`: the command-line entry point (the top-level parser and dispatch only).

Each verb group is one `_cmd_<group>` module whose `register(sub, common)` adds its parsers and
sets a handler on each: `remote=fn(client, args)` for a verb that talks to a server through
`AmberClient` (dispatch opens the client), `local=fn(args)` for one that runs something here.
To add a verb, add it to its group's `register`; a new group goes in `_GROUPS`.

Importing a group must stay light, so that `amber --help` and the client verbs start without the
engine: a local handler that needs wasmtime, psycopg or Flask imports its body (`_dev`,
`_processes`, `_bench`) when it runs. `tests/tools/test_cli_start.py` checks it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Final, NoReturn

from amber import __version__
from amber.abi import AmberError, InvalidInput

from . import (
    _cmd_approvals,
    _cmd_audit,
    _cmd_auth,
    _cmd_bench,
    _cmd_build,
    _cmd_dev,
    _cmd_processes,
    _cmd_runs,
    _cmd_status,
    _cmd_triage,
    _cmd_versions,
)
from ._build import BuildError
from ._operator import api_token, client_tls, operator_token

SERVER_ENV = "AMBER_SERVER"
DEFAULT_PORT = 7233

if TYPE_CHECKING:
    _Register = Callable[
        [argparse._SubParsersAction[argparse.ArgumentParser], argparse.ArgumentParser], None
    ]

_GROUPS: Final[Sequence[_Register]] = (
    _cmd_dev.register,  # dev
    _cmd_processes.register,  # server, worker
    _cmd_status.register,  # status
    _cmd_build.register,  # build
    _cmd_bench.register,  # bench
    _cmd_versions.register,  # versions ...
    _cmd_runs.register,  # run ... (runs ...)
    _cmd_triage.register,  # triage ...
    _cmd_approvals.register,  # approvals ..., approvers ...
    _cmd_audit.register,  # audit ...
    _cmd_auth.register,  # auth ...
)
"""The verb groups, in the order `amber --help` lists them."""


class _UsageError(Exception):
    """A command line argparse refused, kept until `main` knows whether to answer in JSON."""

    def __init__(self, parser: argparse.ArgumentParser, message: str) -> None:
        super().__init__(message)
        self.parser = parser
        self.message = message


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is raised rather than printed, so that under `--json` it
    becomes the same error object as any other refusal. (Sub-parsers inherit the class.)"""

    def error(self, message: str) -> NoReturn:
        raise _UsageError(self, message)


def _parser() -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = _Parser(
        prog="amber", description="Durable execution on versioned Wasm."
    )
    parser.add_argument("--version", action="version", version=f"amber {__version__}")
    parser.add_argument(
        "--server",
        type=server_address,
        default=os.environ.get(SERVER_ENV, "127.0.0.1:7233"),
        help="server address HOST[:PORT] (default $AMBER_SERVER or 127.0.0.1:7233; port 7233)",
    )
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    # Also accepted after the subcommand (`amber run list --json`, `amber worker --server X`), as
    # users type them.
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--json", action="store_true", default=argparse.SUPPRESS)
    common.add_argument(
        "--server", type=server_address, default=argparse.SUPPRESS, help=argparse.SUPPRESS
    )
    sub = parser.add_subparsers(dest="command", required=True)
    for register in _GROUPS:
        register(sub, common)
    return parser


def server_address(text: str) -> str:
    """`HOST[:PORT]` as gRPC wants it: a bare host gets Amber's port (not gRPC's 443), and an
    `http://` or `grpc://` prefix, as people paste it, is dropped."""
    address = text.strip()
    for scheme in ("http://", "https://", "grpc://", "dns:///"):
        if address.startswith(scheme):
            address = address[len(scheme) :]
    address = address.rstrip("/")
    if not address:
        raise argparse.ArgumentTypeError("empty server address")
    if address.startswith("["):  # [IPv6]:port
        return address if "]:" in address else f"{address}:{DEFAULT_PORT}"
    if address.count(":") == 1 or address.startswith("unix:"):
        return address
    if ":" in address:  # a bare IPv6 address
        return f"[{address}]:{DEFAULT_PORT}"
    return f"{address}:{DEFAULT_PORT}"


def main(argv: Sequence[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    try:
        args = _parser().parse_args(words)
    except _UsageError as exc:
        _usage_error(exc, as_json="--json" in words)
    try:
        return _run(args)
    except BrokenPipeError:  # `amber run list | head`: the reader left, nothing to report
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def _run(args: argparse.Namespace) -> int:
    try:
        local: Callable[[argparse.Namespace], int] | None = getattr(args, "local", None)
        if local is not None:
            return local(args)
        from amber.runtime.client import AmberClient

        tls = client_tls()
        with AmberClient(
            args.server, operator_token=operator_token(), token=api_token(), tls=tls
        ) as client:
            return int(args.remote(client, args))
    except (AmberError, BuildError, FileNotFoundError, IsADirectoryError, PermissionError) as exc:
        _error(args, exc)
        return 2
    except ValueError as exc:
        if not str(exc).startswith(_OUT_OF_RANGE):  # a bug: its traceback says where
            raise
        number = str(exc).removeprefix(_OUT_OF_RANGE).strip(": ")
        _error(args, InvalidInput(f"{number} is out of range for a 64-bit number"))
        return 2
    except KeyboardInterrupt:
        return 130


_OUT_OF_RANGE = "Value out of range"
"""protobuf's refusal of an integer its field cannot hold (a CLI number nobody bounded)."""


def _usage_error(exc: _UsageError, *, as_json: bool) -> NoReturn:
    """Exit 2 as argparse does: its usage and message, or with `--json` the error object."""
    if not as_json:
        exc.parser.print_usage(sys.stderr)
        exc.parser.exit(2, f"{exc.parser.prog}: error: {exc.message}\n")
    doc = {"error": {"type": "UsageError", "message": f"{exc.parser.prog}: {exc.message}"}}
    print(json.dumps(doc), file=sys.stderr)
    raise SystemExit(2)


def _error(args: argparse.Namespace, exc: BaseException) -> None:
    """The error on stderr: a line for people, or with `--json` an object for programs."""
    if getattr(args, "json", False):
        doc = {
            "error": {"type": getattr(exc, "wire_name", type(exc).__name__), "message": str(exc)}
        }
        print(json.dumps(doc), file=sys.stderr)
    else:
        print(f"error: {exc}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
