"""`amber dev`: everything on one machine for a first look (its flags here, its body in
`_dev`)."""

from __future__ import annotations

import argparse
import os


def dev(args: argparse.Namespace) -> int:
    from . import _dev  # wasmtime, psycopg, Flask: loaded only when the verb runs

    return _dev.dev(args)


def register(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    """Add `amber dev` to the CLI."""
    p = sub.add_parser(
        "dev", parents=[common], help="embedded PostgreSQL + server + worker + a demo run"
    )
    p.add_argument("--home", default=os.environ.get("AMBER_HOME", ".amber"))
    p.add_argument("--listen", default="127.0.0.1:7233")
    p.add_argument("--once", action="store_true", help="exit after the demo run")
    p.add_argument("--no-demo", action="store_true")
    p.add_argument(
        "--python",
        action="store_true",
        help="the demo's workflow in Python (abi/samples/orders.py)",
    )
    p.set_defaults(local=dev)
