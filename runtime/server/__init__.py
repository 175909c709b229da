"""The composition root: builds the services over one database, serves the gRPC API (each handler
validates, calls a service, maps the answer), runs the sweepers and the approval page.

Rule: may import every other sub-package except `client` and `worker`.
"""

from __future__ import annotations

from ._access import ROLE_METHODS, AccessCheck
from ._operators import Operators, token_hash
from ._server import AmberServer, ApprovalPageOptions, migrate_all

__all__ = [
    "ROLE_METHODS",
    "AccessCheck",
    "AmberServer",
    "ApprovalPageOptions",
    "Operators",
    "migrate_all",
    "token_hash",
]
