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
import os
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Final

from amber.abi import AmberError

from . import (
    _cmd_approvals,
    _cmd_audit,
    _cmd_bench,
    _cmd_build,
    _cmd_dev,
    _cmd_processes,
    _cmd_runs,
    _cmd_triage,
    _cmd_versions,
)
from ._build import BuildError
from ._operator import operator_token

SERVER_ENV = "AMBER_SERVER"

if TYPE_CHECKING:
    _Register = Callable[
        [argparse._SubParsersAction[argparse.ArgumentParser], argparse.ArgumentParser], None
    ]

_GROUPS: Final[Sequence[_Register]] = (
    _cmd_dev.register,  # dev
    _cmd_processes.register,  # server, worker
    _cmd_build.register,  # build
    _cmd_bench.register,  # bench
    _cmd_versions.register,  # versions ...
    _cmd_runs.register,  # run ... (runs ...)
    _cmd_triage.register,  # triage ...
    _cmd_approvals.register,  # approvals ..., approvers ...
    _cmd_audit.register,  # audit ...
)
"""The verb groups, in the order `amber --help` lists them."""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="amber", description="Durable execution on versioned Wasm."
    )
    parser.add_argument(
        "--server",
        default=os.environ.get(SERVER_ENV, "127.0.0.1:7233"),
        help="server address (default $AMBER_SERVER or 127.0.0.1:7233)",
    )
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    # Also accepted after the subcommand (`amber run list --json`), as users type it.
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--json", action="store_true", default=argparse.SUPPRESS)
    sub = parser.add_subparsers(dest="command", required=True)
    for register in _GROUPS:
        register(sub, common)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        local: Callable[[argparse.Namespace], int] | None = getattr(args, "local", None)
        if local is not None:
            return local(args)
        from amber.runtime.client import AmberClient

        token = operator_token()
        with AmberClient(args.server, operator_token=token) as client:
            return int(args.remote(client, args))
    except (AmberError, BuildError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except (FileNotFoundError, IsADirectoryError, PermissionError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
