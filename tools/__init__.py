"""Amber's command line (`amber ...`) and the guest build tooling.

Design: the CLI is a thin client of the gRPC API (the same `runtime.AmberClient` applications
use), except for the commands that *are* processes — `dev`, `server`, `worker` — and `build`,
which runs the C toolchain locally. Output is for humans by default and JSON with `--json`.

Rejected: a CLI that reads the database directly (it would bypass validation and the audit
path operators rely on).
"""

from amber import _checkout

_checkout.alias(__name__)
