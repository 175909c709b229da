"""The Python client: what applications, the CLI and workers use to talk to an Amber server.
`AmberClient` blocks; `AsyncAmberClient` is the application API for asyncio code. Both send the
same calls (`_calls`) and decode results to Python values (`get_result`; raw bytes on request).

Rule: imports only `api`, `tracing` and `model`, so `import amber.runtime.client` loads neither
wasmtime, Flask nor psycopg.
"""

from __future__ import annotations

from amber.runtime.api import ClientTls

from ._async import AsyncAmberClient
from ._calls import decode, encode
from ._client import DEFAULT_TARGET, AmberClient
from ._stream import WorkStream
from ._token import TOKEN_ENV, discover_token, token_files

__all__ = [
    "DEFAULT_TARGET",
    "TOKEN_ENV",
    "AmberClient",
    "AsyncAmberClient",
    "ClientTls",
    "WorkStream",
    "decode",
    "discover_token",
    "encode",
    "token_files",
]
