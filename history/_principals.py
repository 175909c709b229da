"""Principals in the store: who may call the API, in which role, bound to which tenants,
queues and pools, known by the sha256 of their bearer token (never the token).

`"*"` in `tenants`, `queues` or `pools` means all of them. A revoked principal keeps its row
(revoked_at set) and authenticates no more; granting its name again replaces the row with a new
token.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._database import Cursor

ALL = "*"
"""In `Principal.tenants` or `.queues`: every tenant, every queue."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Principal:
    """A caller of the API as stored."""

    name: str
    role: str
    """admin, operator, application or worker."""
    tenants: tuple[str, ...]
    queues: tuple[str, ...]
    created_at: datetime
    pools: tuple[str, ...] = ()
    """A worker's pools (`main`, `surgical`); `*`: both."""
    created_by: str
    rotated_at: datetime | None = None
    revoked_at: datetime | None = None

    def in_tenant(self, tenant: str) -> bool:
        return ALL in self.tenants or tenant in self.tenants

    def serves(self, queue: str) -> bool:
        return ALL in self.queues or queue in self.queues

    def in_pool(self, pool: str) -> bool:
        return ALL in self.pools or pool in self.pools


_COLUMNS = "name, role, tenants, queues, pools, created_at, created_by, rotated_at, revoked_at"


def _principal(row: tuple[Any, ...]) -> Principal:
    name, role, tenants, queues, pools, created_at, created_by, rotated_at, revoked_at = row
    return Principal(
        name=str(name),
        role=str(role),
        tenants=tuple(tenants),
        queues=tuple(queues),
        pools=tuple(pools),
        created_at=created_at,
        created_by=str(created_by),
        rotated_at=rotated_at,
        revoked_at=revoked_at,
    )


def put_principal_txn(cur: Cursor, principal: Principal, token_hash: bytes) -> None:
    """Create the principal, or replace the one of that name (a re-grant: new role, new token)."""
    cur.execute(
        "INSERT INTO amber_principals (name, role, tenants, queues, pools, token_hash,"
        " created_at, created_by) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)"
        " ON CONFLICT (name) DO UPDATE SET role = EXCLUDED.role, tenants = EXCLUDED.tenants,"
        " queues = EXCLUDED.queues, pools = EXCLUDED.pools, token_hash = EXCLUDED.token_hash,"
        " created_at = EXCLUDED.created_at, created_by = EXCLUDED.created_by,"
        " rotated_at = NULL, revoked_at = NULL",
        (
            principal.name,
            principal.role,
            list(principal.tenants),
            list(principal.queues),
            list(principal.pools),
            token_hash,
            principal.created_at,
            principal.created_by,
        ),
    )


def principal_by_token_txn(cur: Cursor, token_hash: bytes) -> Principal | None:
    """The live (not revoked) principal whose token hashes to `token_hash`."""
    cur.execute(
        f"SELECT {_COLUMNS} FROM amber_principals WHERE token_hash = %s AND revoked_at IS NULL",
        (token_hash,),
    )
    row = cur.fetchone()
    return None if row is None else _principal(row)


def get_principal_txn(cur: Cursor, name: str, *, for_update: bool = False) -> Principal | None:
    lock = " FOR UPDATE" if for_update else ""
    cur.execute(f"SELECT {_COLUMNS} FROM amber_principals WHERE name = %s{lock}", (name,))
    row = cur.fetchone()
    return None if row is None else _principal(row)


def list_principals_txn(cur: Cursor) -> list[Principal]:
    cur.execute(f"SELECT {_COLUMNS} FROM amber_principals ORDER BY name")
    return [_principal(row) for row in cur.fetchall()]


def rotate_principal_txn(cur: Cursor, name: str, token_hash: bytes, now: datetime) -> bool:
    """Give a live principal a new token (the old one stops working); False if none is live."""
    cur.execute(
        "UPDATE amber_principals SET token_hash = %s, rotated_at = %s"
        " WHERE name = %s AND revoked_at IS NULL",
        (token_hash, now, name),
    )
    return cur.rowcount == 1


def revoke_principal_txn(cur: Cursor, name: str, now: datetime) -> bool:
    """Revoke a live principal; False if there is none of that name (or it was revoked)."""
    cur.execute(
        "UPDATE amber_principals SET revoked_at = %s WHERE name = %s AND revoked_at IS NULL",
        (now, name),
    )
    return cur.rowcount == 1
