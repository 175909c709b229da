"""Who may call which RPC: the role table, and the check every call passes when the server
checks credentials (`amber server --auth`, `amber dev`).

| role | may call |
|---|---|
| application | start, signal, query, describe, history, result and list runs — in its tenants |
| operator | the application's calls, cancel, terminate and reset, triage, approvals admin and roles
  — in its tenants; versions, rollout, migration, the audit log and status — only when bound to
  every tenant (`*`), since versions and the audit log are shared by all tenants |
| worker | poll (only the queues and pools it is bound to), complete, fail, heartbeat, answer
  queries, release leases, fetch modules |
| admin | everything, and `amber auth` (grant, rotate, revoke and list credentials) |

Deciding an approval needs no credential: the single-use approval token is the credential (an
approver has a link, not an API account). A method missing from the table is admin-only, so a
new RPC is closed until someone decides who may call it.

Tenant: a request with a `tenant` field acts in that tenant (empty: `default`), which must be
one of the principal's; a request without one touches every tenant and needs `*`. The name an
audited command records is the principal's: the `operator` field is set from it (a different
name claimed in the request is refused). A worker's id is prefixed with its principal's name
(`fleet/w-1`), so leases are held per principal: a worker credential cannot report, heartbeat or
release another fleet's tasks (the task service checks the lease's holder in the report's own
transaction), nor take a next task from a
queue it is not bound to.

Failed authentications are rate-limited per source address (`model.Throttle`: 100 a minute, then
that address's calls are refused unchecked and the crossing is logged), except for tokens that
already authenticated, so a flood of guesses from a shared host does not lock its workers out.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any, Final

from amber.history import ALL, Principal
from amber.runtime.api import AUTHORIZATION_HEADER
from amber.runtime.model import DEFAULT_TENANT, NotAuthenticated, NotAuthorised, Throttle
from amber.runtime.services import credential_hash

_APPLICATION: Final = frozenset(
    {"StartRun", "SignalRun", "QueryRun", "DescribeRun", "GetHistory", "GetResult", "ListRuns"}
)
_OPERATOR: Final = _APPLICATION | {
    "CancelRun", "TerminateRun", "ResetRun",
    "UploadVersion", "ListVersions", "GetVersion", "GetModule", "LabelVersion", "ChangeRollout",
    "GetRollout", "RetireVersion", "CheckVersion", "MigrateRuns",
    "ListTroubled", "ExportRun", "Triage",
    "ListApprovals", "GetApproval", "IssueApprovalToken", "RevokeApprovalTokens",
    "ChangeApproverRole", "ListApproverRoles",
    "VerifyAudit", "ListAudit", "GetStatus",
}  # fmt: skip
_WORKER: Final = frozenset(
    {"PollTask", "CompleteTask", "FailTask", "Heartbeat", "CompleteQuery", "ReleaseLeases",
     "GetModule", "Work"}
)  # fmt: skip
_TRUSTED_TOKENS: Final = 10_000
_log = logging.getLogger("amber.access")
OPEN_METHODS: Final = frozenset({"DecideApproval"})
"""Callable without a credential (the request carries its own)."""
ROLE_METHODS: Final[dict[str, frozenset[str]]] = {
    "application": _APPLICATION,
    "operator": _OPERATOR,
    "worker": _WORKER,
}
"""What each role may call; an admin may call everything."""

Authenticate = Callable[[bytes], Principal | None]
"""The live principal of a token's `credential_hash`, or None."""


class AccessCheck:
    """Authenticates a call's bearer token and authorises its method and tenant."""

    def __init__(
        self,
        authenticate: Authenticate,
        default_queue: str,
        throttle: Throttle | None = None,
    ) -> None:
        """`throttle`: counts failed authentications per source (None: a default one)."""
        self._authenticate = authenticate
        self._default_queue = default_queue
        self.throttle = throttle or Throttle("failed authentications")
        self._trusted: OrderedDict[bytes, None] = OrderedDict()
        """Tokens that authenticated (by hash): a blocked source still gets these checked, so
        a flood of guesses from a host does not lock out the workers that share it."""
        self._lock = threading.Lock()

    def __call__(
        self,
        method: str,
        metadata: Sequence[tuple[str, Any]] | None,
        request: Any,
        source: str = "",
    ) -> Principal | None:
        """The caller (None for an open method called without a credential), or raises
        `NotAuthenticated` / `NotAuthorised`. May set the request's `operator` field. `source`:
        the caller's address, for the rate limit on failed authentications."""
        token = _bearer(metadata)
        if not token and method in OPEN_METHODS:
            return None
        digest = credential_hash(token)  # once: the trust check and the lookup share it
        wait = self.throttle.blocked(source)
        if wait is not None and not self._is_trusted(digest):
            self.throttle.refused(source)
            raise NotAuthenticated(
                f"too many failed authentications from {source}: its calls are refused"
                f" unchecked for {wait:.0f} s more"
            )
        if not token:
            self.throttle.refused(source)
            raise NotAuthenticated(
                f"{method} needs a credential on this server: set AMBER_TOKEN (amber auth grant)"
            )
        principal = self._authenticate(digest)
        if principal is None:
            self.throttle.refused(source)
            raise NotAuthenticated("unknown, rotated or revoked credential")
        self._trust(digest)
        if method in OPEN_METHODS:
            return principal
        try:
            self._authorise(principal, method, request)
        except NotAuthorised as exc:
            # An authenticated caller reaching past its role is worth an operator's look (a
            # bad credential is only counted: it may come by the thousand).
            _log.warning("refused %s from %s at %s: %s", method, principal.name, source, exc)
            raise
        return principal

    def _authorise(self, p: Principal, method: str, request: Any) -> None:
        if p.role != "admin" and method not in ROLE_METHODS.get(p.role, frozenset()):
            raise NotAuthorised(f"{p.name} ({p.role}) may not call {method}")
        fields = request.DESCRIPTOR.fields_by_name
        if method == "PollTask":
            self._serves(p, request.queue)
            if not p.in_pool(request.pool or "main"):
                raise NotAuthorised(f"{p.name} may not serve the {request.pool or 'main'} pool")
        if method in ("CompleteTask", "FailTask") and request.want_next:
            self._serves(p, request.next_queue)
        if "worker_id" in fields and request.worker_id:
            # Leases are held under the principal's name: another fleet's report, heartbeat or
            # release names a different holder and is refused as a lost lease.
            request.worker_id = f"{p.name}/{request.worker_id}"
        if "tenant" in fields:
            tenant = request.tenant or DEFAULT_TENANT
            if not p.in_tenant(tenant):
                raise NotAuthorised(f"{p.name} may not act in tenant {tenant!r}")
        elif p.role != "worker" and ALL not in p.tenants:
            raise NotAuthorised(
                f"{method} touches every tenant: {p.name} is bound to"
                f" {', '.join(p.tenants)} (grant it --tenant '*')"
            )
        if "operator" in fields:
            if request.operator and request.operator != p.name:
                raise NotAuthorised(
                    f"the credential belongs to {p.name!r}, not {request.operator!r}"
                )
            request.operator = p.name

    def _is_trusted(self, digest: bytes) -> bool:
        with self._lock:
            return digest in self._trusted

    def _trust(self, digest: bytes) -> None:
        with self._lock:
            self._trusted[digest] = None
            self._trusted.move_to_end(digest)
            while len(self._trusted) > _TRUSTED_TOKENS:
                self._trusted.popitem(last=False)

    def _serves(self, p: Principal, queue: str) -> None:
        if not p.serves(queue or self._default_queue):
            raise NotAuthorised(f"{p.name} may not serve queue {queue or self._default_queue!r}")


def _bearer(metadata: Sequence[tuple[str, Any]] | None) -> str:
    for key, value in metadata or ():
        if key == AUTHORIZATION_HEADER:
            text = value.decode() if isinstance(value, bytes) else str(value)
            scheme, _, token = text.partition(" ")
            return token.strip() if scheme.lower() == "bearer" else ""
    return ""
