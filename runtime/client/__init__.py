"""The Python client: what applications, the CLI and workers use to talk to an Amber server.

Rule: imports only `api` and `model`, so `import amber.runtime.client` loads neither wasmtime,
Flask nor psycopg.
"""

from __future__ import annotations

from ._client import DEFAULT_TARGET, AmberClient, decode, encode

__all__ = [
    "DEFAULT_TARGET",
    "AmberClient",
    "decode",
    "encode",
]
