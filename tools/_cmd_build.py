"""`amber build`: compile a C or Python guest into an Amber module, here (no server involved)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from amber.history import amber_home

from ._build import BuildError, build_module
from ._build_python import build_python_guest
from ._output import emit_json


def build(args: argparse.Namespace) -> int:
    source = Path(args.source)
    output = Path(args.output) if args.output else source.with_suffix(".wasm")
    if source.suffix == ".py":
        if args.define:
            raise BuildError(f"{source}: -D applies to C guests only")
        result = build_python_guest(
            source,
            output,
            paths=[Path(p) for p in args.path],
            artifacts=amber_home() / "artifacts",  # where a local worker finds it compiled
        )
    else:
        defines = dict(d.split("=", 1) if "=" in d else (d, "1") for d in args.define)
        result = build_module(source, output, defines=defines)
    if args.json:
        emit_json({"output": str(result.output), "size": result.size, "sha256": result.sha256,
                   "manifest": dict(result.manifest),
                   "warnings": result.warnings.splitlines()})  # fmt: skip
    else:
        if result.warnings:
            print(result.warnings, file=sys.stderr)
        print(f"built {result.output} ({result.size} bytes, sha256 {result.sha256})")
    return 0


def register(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    """Add `amber build` to the CLI."""
    p = sub.add_parser(
        "build", parents=[common], help="compile a C (.c) or Python (.py) guest to an Amber module"
    )
    p.add_argument("source")
    p.add_argument("-o", "--output")
    p.add_argument("-D", "--define", action="append", default=[], metavar="NAME[=VALUE]")
    p.add_argument(
        "-p", "--path", action="append", default=[], metavar="DIR",
        help="Python guests: another directory of the guest's own modules",
    )  # fmt: skip
    p.set_defaults(local=build)
