"""API credentials: grant, rotate, revoke and list principals, and authenticate a bearer token.

A principal is a name, a role (admin, operator, application or worker, see
`runtime.server.access` for what each may call), the tenants it acts in and, for a worker, the
queues it serves. Its credential is a bearer token, `amb_` and 256 bits from `secrets`, shown
once when granted or rotated and stored only as its sha256. Every change is an audited command
(`auth.grant`, `auth.rotate`, `auth.revoke`, target `principal:NAME`).

Authentication looks the hash up and keeps the answer for `CACHE_TTL_S` (unknown tokens too, so
a flood of forged tokens costs no queries): a rotation or revocation through this server takes
effect at once; through another server sharing the database, within that time. Rejected: JWTs
(a revocation would need the same lookup; the signing key becomes the thing to protect) and
per-call database lookups (one query per RPC on the hot path, ~0.3 ms).

The last live admin cannot be revoked or re-granted another role: nobody could grant anything
again without database access (`amber auth bootstrap`).
"""

from __future__ import annotations

import hashlib
import re
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

from amber.abi import Conflict, InvalidInput
from amber.history import (
    ALL,
    AuditEntry,
    Cursor,
    Database,
    Principal,
    get_principal_txn,
    list_principals_txn,
    principal_by_token_txn,
    put_principal_txn,
    record_audit_txn,
    revoke_principal_txn,
    rotate_principal_txn,
)
from amber.runtime.model import DEFAULT_TENANT, Clock, NotAuthorised, PrincipalNotFound

ROLES = ("admin", "operator", "application", "worker")
TOKEN_PREFIX = "amb_"
"""What every API token starts with: secret scanners can recognise a leaked one."""
CACHE_TTL_S = 2.0
CACHE_ENTRIES = 10_000
_NAME = re.compile(r"[A-Za-z0-9_.@\-]{1,128}")
_SCOPE = re.compile(r"\*|[^\s,]{1,200}")


def credential_hash(token: str) -> bytes:
    """What a token is stored and looked up as (b"" for one not shaped like ours, which no
    principal has)."""
    if not token.startswith(TOKEN_PREFIX) or len(token) > 256:
        return b""
    return hashlib.sha256(token.encode()).digest()


@dataclass(frozen=True, slots=True)
class Issued:
    """A principal and its new token: the only time the token exists outside the caller."""

    principal: Principal
    token: str


class CredentialService:
    """Manage principals (audited) and authenticate tokens (cached). Thread-safe."""

    def __init__(self, db: Database, clock: Clock, *, cache_ttl_s: float = CACHE_TTL_S) -> None:
        self._db = db
        self._clock = clock
        self._ttl = cache_ttl_s
        self._cache: OrderedDict[bytes, tuple[Principal | None, float]] = OrderedDict()
        self._lock = threading.Lock()

    # -- authentication --------------------------------------------------------------------

    def authenticate(self, token: str) -> Principal | None:
        """The live principal this token belongs to, or None."""
        return self.by_hash(credential_hash(token))

    def by_hash(self, digest: bytes) -> Principal | None:
        """The live principal whose token has this sha256, or None (cached like `authenticate`)."""
        if not digest:
            return None
        now = time.monotonic()
        with self._lock:
            hit = self._cache.get(digest)
            if hit is not None and hit[1] > now:
                return hit[0]
        found = self._db.run(lambda cur: principal_by_token_txn(cur, digest))
        with self._lock:
            self._cache[digest] = (found, now + self._ttl)
            self._cache.move_to_end(digest)
            while len(self._cache) > CACHE_ENTRIES:
                self._cache.popitem(last=False)
        return found

    def operator_of(self, token: str, claimed: str) -> str:
        """The console's login check: the name of the operator (or admin) bound to every tenant
        this token belongs to; `NotAuthorised` otherwise."""
        principal = self.authenticate(token)
        if principal is None:
            raise NotAuthorised("unknown, rotated or revoked credential")
        if principal.role not in ("operator", "admin") or ALL not in principal.tenants:
            raise NotAuthorised(
                f"{principal.name} ({principal.role}) may not use the console: it needs an"
                " operator bound to every tenant, or an admin"
            )
        if claimed and claimed != principal.name:
            raise NotAuthorised(f"the credential belongs to {principal.name!r}, not {claimed!r}")
        return principal.name

    def holder_of(self, sha256_hex: str) -> str | None:
        """The live principal's name for a token's sha256 (hex), or None (the console re-checks
        its sessions with this: a revoked credential logs out)."""
        try:
            principal = self.by_hash(bytes.fromhex(sha256_hex))
        except ValueError:
            return None
        return None if principal is None else principal.name

    def _forget(self) -> None:
        with self._lock:
            self._cache.clear()

    # -- management ------------------------------------------------------------------------

    def grant(
        self,
        name: str,
        role: str,
        *,
        tenants: Sequence[str] = (),
        queues: Sequence[str] = (),
        pools: Sequence[str] = (),
        by: str,
        reason: str,
    ) -> Issued:
        """Create the principal (or replace one of that name) with a new token."""
        if not _NAME.fullmatch(name):
            raise InvalidInput("a principal's name is 1–128 letters, digits or _.@-")
        if role not in ROLES:
            raise InvalidInput(f"role must be one of {', '.join(ROLES)}, not {role!r}")
        tenants, queues = _scope(role, tenants, queues)
        pools = _pools(role, pools)
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        principal = Principal(
            name=name,
            role=role,
            tenants=tenants,
            queues=queues,
            pools=pools,
            created_at=self._clock.now(),
            created_by=by,
        )

        def txn(cur: Cursor) -> None:
            old = get_principal_txn(cur, name, for_update=True)
            if old is not None and old.revoked_at is None and old.role == "admin" != role:
                _keep_an_admin(cur, name)
            put_principal_txn(cur, principal, credential_hash(token))
            self._audit(cur, "auth.grant", name, by, reason, principal)

        self._db.run(txn)
        self._forget()
        return Issued(principal, token)

    def rotate(self, name: str, *, by: str, reason: str) -> Issued:
        """A new token for a live principal; the old one stops working."""
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)

        def txn(cur: Cursor) -> Principal:
            if not rotate_principal_txn(cur, name, credential_hash(token), self._clock.now()):
                raise PrincipalNotFound(f"no live principal named {name!r}")
            principal = get_principal_txn(cur, name)
            assert principal is not None
            self._audit(cur, "auth.rotate", name, by, reason, principal)
            return principal

        principal = self._db.run(txn)
        self._forget()
        return Issued(principal, token)

    def revoke(self, name: str, *, by: str, reason: str) -> Principal:
        """Revoke a live principal: its token stops working."""

        def txn(cur: Cursor) -> Principal:
            old = get_principal_txn(cur, name, for_update=True)
            if old is None or old.revoked_at is not None:
                raise PrincipalNotFound(f"no live principal named {name!r}")
            if old.role == "admin":
                _keep_an_admin(cur, name)
            revoke_principal_txn(cur, name, self._clock.now())
            self._audit(cur, "auth.revoke", name, by, reason, old)
            found = get_principal_txn(cur, name)
            assert found is not None
            return found

        principal = self._db.run(txn)
        self._forget()
        return principal

    def list(self) -> list[Principal]:
        """Every principal, live and revoked, by name (never a token or its hash)."""
        return self._db.run(list_principals_txn)

    def _audit(
        self, cur: Cursor, action: str, name: str, by: str, reason: str, p: Principal
    ) -> None:
        record_audit_txn(
            cur,
            AuditEntry(
                actor=by,
                action=action,
                target=f"principal:{name}",
                reason=reason,
                detail={
                    "role": p.role,
                    "tenants": list(p.tenants),
                    "queues": list(p.queues),
                    "pools": list(p.pools),
                },
                at=self._clock.now(),
            ),
        )


def _scope(
    role: str, tenants: Sequence[str], queues: Sequence[str]
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The tenants and queues a principal of `role` is bound to: an admin to all; a worker to
    the queues given (all by default) and no tenant of its own (tasks name theirs); the others
    to the tenants given (`default` by default) and no queue."""
    for value in (*tenants, *queues):
        if not _SCOPE.fullmatch(value):
            raise InvalidInput(f"not a tenant or queue name: {value!r}")
    if role == "admin":
        if (tenants and tuple(tenants) != (ALL,)) or (queues and tuple(queues) != (ALL,)):
            raise InvalidInput("an admin acts in every tenant: give no --tenant or --queue")
        return (ALL,), (ALL,)
    if role == "worker":
        if tenants:
            raise InvalidInput("a worker serves queues, not tenants: give --queue, not --tenant")
        return (ALL,), tuple(dict.fromkeys(queues)) or (ALL,)
    if queues:
        raise InvalidInput(f"an {role} principal is bound to tenants: give --tenant, not --queue")
    return tuple(dict.fromkeys(tenants)) or (DEFAULT_TENANT,), ()


def _pools(role: str, pools: Sequence[str]) -> tuple[str, ...]:
    """A worker's pools (both by default); an admin's all; nobody else's any."""
    for pool in pools:
        if pool not in ("main", "surgical", ALL):
            raise InvalidInput(f"a pool is main or surgical, not {pool!r}")
    if role == "worker":
        return tuple(dict.fromkeys(pools)) or (ALL,)
    if pools:
        raise InvalidInput("only a worker is bound to pools")
    return (ALL,) if role == "admin" else ()


def _keep_an_admin(cur: Cursor, name: str) -> None:
    cur.execute(
        "SELECT count(*) FROM amber_principals WHERE role = 'admin' AND revoked_at IS NULL"
        " AND name <> %s",
        (name,),
    )
    row = cur.fetchone()
    if not row or not row[0]:
        raise Conflict(f"{name} is the last admin: grant another admin first")
