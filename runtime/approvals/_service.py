"""Human approval: minting and delivering single-use tokens, deciding with them, expiry.

A decision is validated completely before anything is written — the token (known, pending, not
expired), its bindings (tenant, run, step, action, policy version; and the tenant, run and step
the caller says it is deciding, when it says so), the approval (still pending, its run open),
the approver's identity (the token's, or a claimed one that must match) and authorisation
(named by the policy, or a *current* member of one of its roles). A refusal writes only an
audit record of the attempt and raises `InvalidToken`/`ApprovalClosed`; an accepted decision
uses the token (pending → used, conditional), records one decision per approver (a second one
from the same approver is counted once), and when the policy is met or someone rejects, closes
the approval, revokes its other tokens, cancels its expiry timer and delivers
`ApprovalResolved` to the run — all in one transaction. Decisions that arrive before the
workflow awaits the approval are simply in its history when it does.

Tokens: `apv_` and 192 bits from `secrets` (URL-safe base64), stored as sha256. The prefix
lets secret scanners recognise a leaked token and keeps one from starting with "-", which a
command line would take for an option (`amber approvals decide TOKEN`). The plain token exists
only in memory on its way to the delivery sink (a webhook, the dev console, a test) or, for
`amber approvals issue`, in the operator's terminal. Minting happens after the workflow's
transaction committed, in the sweeper (`deliver_pending`): if delivery fails, an operator re-issues.

Rejected: HMAC-signed stateless tokens (cannot be single-use or revoked without state anyway);
storing tokens encrypted for re-sending (a stolen key would expose every live token).
"""

from __future__ import annotations

import functools
import hashlib
import logging
import secrets
import uuid
from collections.abc import Callable
from datetime import datetime
from typing import Protocol

from amber.abi import InvalidInput, NotFound
from amber.history import (
    Approval,
    ApprovalToken,
    AuditEntry,
    Cursor,
    Database,
    Decision,
    approval_tokens_txn,
    decisions_txn,
    get_approval_txn,
    get_run_txn,
    get_token_txn,
    grant_role_txn,
    has_role_txn,
    insert_token_txn,
    list_approvals_txn,
    mark_delivered_txn,
    record_audit_txn,
    record_decision_txn,
    revoke_role_txn,
    revoke_tokens_txn,
    role_members_txn,
    roles_txn,
    undelivered_approvals_txn,
    use_token_txn,
)
from amber.runtime.model import (
    ApprovalClosed,
    ApprovalDetail,
    ApprovalView,
    DecisionOutcome,
    DecisionRequest,
    InvalidToken,
    IssuedToken,
)
from amber.runtime.services import (
    Lifecycle,
    Notifier,
    Wake,
    find_run_txn,
    poke,
    resolve_approval_txn,
)

_log = logging.getLogger(__name__)
MAX_TOKEN_CHARS = 128
TOKEN_PREFIX = "apv_"
"""What every approval token starts with (see the module's docstring)."""
MAX_COMMENT_CHARS = 1000
UNKNOWN_APPROVER = "unauthenticated"
"""The actor of a refused decision whose token names no approver (unknown or malformed)."""
MAX_CLAIM_CHARS = 256
"""How much of a refused caller's claimed identity its audit record keeps."""
_STATUSES = ("pending", "approved", "rejected", "expired", "cancelled")


class ApprovalSink(Protocol):
    """Delivers tokens to approvers (a webhook to a mail or chat gateway, a console, a test)."""

    def deliver(self, issued: IssuedToken) -> None: ...


def token_hash(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


def _action_hash(action: str) -> bytes:
    return hashlib.sha256(action.encode()).digest()


class _Refused(Exception):
    """A decision refused during validation (nothing but its audit record is written)."""

    def __init__(
        self, error: InvalidToken | ApprovalClosed, detail: str, approval_id: str = ""
    ) -> None:
        super().__init__(detail)
        self.error = error
        self.detail = detail
        self.approval_id = approval_id
        """The approval the token named, when it named one (the audit record's target)."""


class ApprovalService:
    """Approvals for operators (list, show, issue, revoke, roles) and approvers (view, decide).
    Public methods own their transactions."""

    def __init__(
        self,
        db: Database,
        life: Lifecycle,
        notifier: Notifier | None,
        *,
        sink: ApprovalSink | None = None,
        link_base: Callable[[], str] | None = None,
    ) -> None:
        self._db = db
        self._clock = life.clock
        self._notifier = notifier
        self._life = life
        self.sink = sink
        self._link_base = link_base

    # -- approvers ----------------------------------------------------------------------------

    def view(self, token: str) -> ApprovalView:
        """The approval a valid, pending token belongs to; `InvalidToken` otherwise."""

        def txn(cur: Cursor) -> ApprovalView:
            stored = self._token_txn(cur, token, for_update=False)
            approval = get_approval_txn(cur, stored.approval_id)
            run = get_run_txn(cur, stored.run_id)
            if approval is None or run is None:
                raise InvalidToken("this approval link is invalid, expired, used or revoked")
            approvals = sum(d.approve for d in decisions_txn(cur, approval.approval_id))
            return ApprovalView(
                approval_id=approval.approval_id,
                tenant=approval.tenant,
                run_id=approval.run_id,
                workflow_type=run.workflow_type,
                step=approval.cmd,
                action=approval.action,
                approver=stored.approver,
                status=approval.status,
                required=approval.required,
                approvals=approvals,
                expires_at=approval.expires_at,
            )

        return self._db.run(txn)

    def decide(self, token: str, *, approve: bool, comment: str, via: str) -> DecisionOutcome:
        """`ApprovalDesk.decide`: the HTTP page's path."""
        return self.submit(DecisionRequest(token=token, approve=approve, comment=comment, via=via))

    def submit(self, request: DecisionRequest) -> DecisionOutcome:
        """Approve or reject. Validated first; a refusal is audited and raised, and changes
        nothing else."""
        if len(request.comment) > MAX_COMMENT_CHARS:
            raise InvalidInput(f"a comment has at most {MAX_COMMENT_CHARS} characters")

        def txn(cur: Cursor) -> tuple[DecisionOutcome | _Refused, list[Wake]]:
            try:
                return self._decide_txn(cur, request)
            except _Refused as refusal:
                self._audit_refusal_txn(cur, request, refusal)
                return refusal, []

        outcome, wakes = self._db.run(txn)
        if isinstance(outcome, _Refused):
            raise outcome.error
        poke(self._notifier, wakes)
        return outcome

    def _token_txn(
        self, cur: Cursor, token: str, *, for_update: bool, lock: bool = True
    ) -> ApprovalToken:
        """The pending, unexpired token; a refusal otherwise (`for_update`: one to audit)."""
        invalid = InvalidToken("this approval link is invalid, expired, used or revoked")
        if not token or len(token) > MAX_TOKEN_CHARS or not token.isascii():
            raise _Refused(invalid, "malformed token") if for_update else invalid
        stored = get_token_txn(cur, token_hash(token), for_update=for_update and lock)
        if stored is None:
            raise _Refused(invalid, "unknown token") if for_update else invalid
        problem = self._token_problem(stored)
        if problem:
            raise _Refused(invalid, problem, stored.approval_id) if for_update else invalid
        return stored

    def _token_problem(self, stored: ApprovalToken) -> str:
        if stored.status == "used":
            return "token already used"
        if stored.status == "revoked":
            return "token revoked"
        if stored.expires_at <= self._clock.now():
            return "token expired"
        return ""

    def _decide_txn(
        self, cur: Cursor, request: DecisionRequest
    ) -> tuple[DecisionOutcome | _Refused, list[Wake]]:
        # Lock order, as everywhere: run, approval, token (the token is read first unlocked,
        # to find the others, then locked and checked again).
        seen = self._token_txn(cur, request.token, for_update=True, lock=False)
        run = get_run_txn(cur, seen.run_id, for_update=True)
        approval = get_approval_txn(cur, seen.approval_id, for_update=True)
        stored = self._token_txn(cur, request.token, for_update=True)
        if approval is None or run is None:
            raise _Refused(InvalidToken("this approval no longer exists"), "approval gone")
        self._check_bindings(stored, approval, request)
        if approval.status != "pending" or run.status.closed:
            state = approval.status if approval.status != "pending" else f"run {run.status.value}"
            raise _Refused(
                ApprovalClosed(f"this approval is already {state}"),
                f"closed: {state}",
                approval.approval_id,
            )
        if approval.expires_at <= self._clock.now():
            raise _Refused(
                ApprovalClosed("this approval has expired"),
                "approval expired",
                approval.approval_id,
            )
        if request.approver and request.approver != stored.approver:
            raise _Refused(
                InvalidToken("this approval link belongs to someone else"),
                f"identity mismatch: claimed {request.approver[:64]!r}",
                approval.approval_id,
            )
        if not self._authorised_txn(cur, approval, stored.approver):
            raise _Refused(
                InvalidToken(f"{stored.approver} is no longer authorised to decide this"),
                "approver no longer authorised by the current policy",
                approval.approval_id,
            )
        now = self._clock.now()
        if not use_token_txn(cur, stored.token_hash, now):  # the row lock makes this certain
            raise _Refused(InvalidToken("this approval link was already used"), "token raced")
        decision = Decision(
            approval_id=approval.approval_id,
            approver=stored.approver,
            approve=request.approve,
            comment=request.comment,
            via=request.via,
            decided_at=now,
        )
        counted = record_decision_txn(cur, decision)
        self._audit_txn(
            cur,
            actor=stored.approver,
            action=("approval.approve" if request.approve else "approval.reject")
            if counted
            else "approval.duplicate",
            approval=approval,
            reason=request.comment,
            detail={
                "via": request.via,
                "token": stored.token_hash.hex()[:12],
                "issued_by": stored.issued_by,
            },
        )
        decisions = decisions_txn(cur, approval.approval_id)
        approvals = sum(d.approve for d in decisions)
        rejected = any(not d.approve for d in decisions)
        status = "rejected" if rejected else "approved" if approvals >= approval.required else ""
        wakes: list[Wake] = []
        if status:
            wakes = resolve_approval_txn(cur, self._life, run, approval, status, decisions)
        return (
            DecisionOutcome(
                approval_id=approval.approval_id,
                status=status or "pending",
                counted=counted,
                approvals=approvals,
                required=approval.required,
            ),
            wakes,
        )

    @staticmethod
    def _check_bindings(
        stored: ApprovalToken, approval: Approval, request: DecisionRequest
    ) -> None:
        bound = (
            stored.tenant == approval.tenant
            and stored.run_id == approval.run_id
            and stored.cmd == approval.cmd
            and stored.action_sha256 == _action_hash(approval.action)
            and stored.policy_version == approval.policy_version
        )
        if not bound:
            raise _Refused(
                InvalidToken("this approval link does not match its approval"),
                "binding mismatch",
                approval.approval_id,
            )
        wrong = [
            what
            for what, asked, actual in (
                ("tenant", request.tenant, approval.tenant),
                ("run", request.run_id, approval.run_id),
            )
            if asked and asked != actual
        ]
        if request.step is not None and request.step != approval.cmd:
            wrong.append("step")
        if wrong:
            raise _Refused(
                InvalidToken(f"this token is for another {' and '.join(wrong)}"),
                f"wrong {', '.join(wrong)}",
                approval.approval_id,
            )

    def _authorised_txn(self, cur: Cursor, approval: Approval, approver: str) -> bool:
        if approver in approval.approvers:
            return True
        return has_role_txn(cur, approval.tenant, approval.roles, approver)

    # -- delivery -------------------------------------------------------------------------------

    def deliver_pending(self, *, limit: int = 100) -> int:
        """Mint and deliver the tokens of newly requested approvals (the sweeper calls this;
        without a sink, tokens are minted only by `issue`)."""
        sink = self.sink
        if sink is None:
            return 0

        def txn(cur: Cursor) -> list[IssuedToken]:
            now = self._clock.now()
            issued: list[IssuedToken] = []
            for approval in undelivered_approvals_txn(cur, now, limit=limit):
                members = role_members_txn(cur, approval.tenant, approval.roles)
                for approver in dict.fromkeys([*approval.approvers, *members]):
                    issued.append(self._mint_txn(cur, approval, approver, now))
                mark_delivered_txn(cur, approval.approval_id, now)
            return issued

        issued = self._db.run(txn)
        for token in issued:
            try:
                sink.deliver(token)
            except Exception as exc:
                _log.exception(
                    "approval %s: delivery to %s failed (re-issue with `amber approvals issue`)",
                    token.approval_id,
                    token.approver,
                )
                self._db.run(functools.partial(self._undelivered_txn, issued=token, error=exc))
        return len(issued)

    def _undelivered_txn(self, cur: Cursor, *, issued: IssuedToken, error: Exception) -> None:
        """A token that never reached its approver is revoked (nobody holds it) and the failure
        is audited, so an operator sees it and re-issues."""
        revoke_tokens_txn(cur, issued.approval_id, self._clock.now(), approver=issued.approver)
        record_audit_txn(
            cur,
            AuditEntry(
                actor="amber",
                action="approval.undelivered",
                target=f"approval:{issued.approval_id}",
                reason=f"{type(error).__name__}: {error}"[:500],
                detail={"approver": issued.approver, "token": token_hash(issued.token).hex()[:12]},
                at=self._clock.now(),
            ),
        )

    def _mint_txn(
        self,
        cur: Cursor,
        approval: Approval,
        approver: str,
        now: datetime,
        issued_by: str | None = None,
    ) -> IssuedToken:
        token = TOKEN_PREFIX + secrets.token_urlsafe(24)
        insert_token_txn(
            cur,
            ApprovalToken(
                token_hash=token_hash(token),
                approval_id=approval.approval_id,
                approver=approver,
                tenant=approval.tenant,
                run_id=approval.run_id,
                cmd=approval.cmd,
                action_sha256=_action_hash(approval.action),
                policy_version=approval.policy_version,
                status="pending",
                issued_at=now,
                expires_at=approval.expires_at,
                issued_by=issued_by,
            ),
        )
        base = self._link_base() if self._link_base is not None else ""
        return IssuedToken(
            approval_id=approval.approval_id,
            approver=approver,
            token=token,
            link=f"{base}/approvals/{token}" if base else "",
            action=approval.action,
            tenant=approval.tenant,
            run_id=approval.run_id,
            expires_at=approval.expires_at,
        )

    # -- operators ------------------------------------------------------------------------------

    def issue(
        self, approval_id: str, approver: str, *, operator: str, reason: str, tenant: str
    ) -> IssuedToken:
        """Mint a fresh token for an approver the policy authorises (their earlier pending
        tokens are revoked); the plain token is returned once, never stored."""

        def txn(cur: Cursor) -> IssuedToken:
            found = self._approval_txn(cur, approval_id, tenant)
            get_run_txn(cur, found.run_id, for_update=True)  # lock order: run, approval, tokens
            approval = self._approval_txn(cur, approval_id, tenant, for_update=True)
            if approval.status != "pending":
                raise ApprovalClosed(f"approval {approval_id} is already {approval.status}")
            if not self._authorised_txn(cur, approval, approver):
                raise InvalidInput(f"{approver!r} is not an approver of {approval_id}")
            now = self._clock.now()
            revoked = revoke_tokens_txn(cur, approval.approval_id, now, approver=approver)
            issued = self._mint_txn(cur, approval, approver, now, issued_by=operator)
            self._audit_txn(
                cur,
                actor=operator,
                action="approval.issue",
                approval=approval,
                reason=reason,
                detail={
                    "approver": approver,
                    "revoked": revoked,
                    "token": token_hash(issued.token).hex()[:12],
                },
            )
            return issued

        return self._db.run(txn)

    def revoke(
        self,
        approval_id: str,
        *,
        operator: str,
        reason: str,
        tenant: str,
        approver: str | None = None,
    ) -> int:
        """Revoke an approval's pending tokens (or one approver's); how many were revoked."""

        def txn(cur: Cursor) -> int:
            found = self._approval_txn(cur, approval_id, tenant)
            get_run_txn(cur, found.run_id, for_update=True)  # lock order: run, approval, tokens
            approval = self._approval_txn(cur, approval_id, tenant, for_update=True)
            count = revoke_tokens_txn(
                cur, approval.approval_id, self._clock.now(), approver=approver
            )
            self._audit_txn(
                cur,
                actor=operator,
                action="approval.revoke",
                approval=approval,
                reason=reason,
                detail={"approver": approver, "revoked": count},
            )
            return count

        return self._db.run(txn)

    def list_approvals(
        self, *, tenant: str, status: str = "", run_id: str = "", limit: int = 100
    ) -> list[Approval]:
        if status and status not in _STATUSES:
            raise InvalidInput(f"status must be one of {', '.join(_STATUSES)}")
        if not 1 <= limit <= 1000:
            raise InvalidInput("limit must be between 1 and 1000")

        def txn(cur: Cursor) -> list[Approval]:
            # A run id or a workflow id (its current run), as every run-taking command accepts.
            run = find_run_txn(cur, run_id, tenant).run_id if run_id else None
            return list_approvals_txn(
                cur, tenant=tenant, status=status or None, run_id=run, limit=limit
            )

        return self._db.run(txn)

    def show(self, approval_id: str, *, tenant: str) -> ApprovalDetail:
        def txn(cur: Cursor) -> ApprovalDetail:
            approval = self._approval_txn(cur, approval_id, tenant)
            return ApprovalDetail(
                approval=approval,
                tokens=tuple(approval_tokens_txn(cur, approval.approval_id)),
                decisions=tuple(decisions_txn(cur, approval.approval_id)),
            )

        return self._db.run(txn)

    def change_role(
        self, *, grant: bool, tenant: str, role: str, approver: str, operator: str, reason: str
    ) -> bool:
        """Grant or remove a role; decisions re-check membership when they arrive."""
        for label, value in (("role", role), ("approver", approver)):
            if not value or len(value) > 256 or not value.isprintable():
                raise InvalidInput(f"{label} must be 1-256 printable characters")

        def txn(cur: Cursor) -> bool:
            now = self._clock.now()
            changed = (
                grant_role_txn(cur, tenant, role, approver, now)
                if grant
                else revoke_role_txn(cur, tenant, role, approver)
            )
            record_audit_txn(
                cur,
                AuditEntry(
                    actor=operator,
                    action="approver.grant" if grant else "approver.revoke",
                    target=f"role:{tenant}/{role}",
                    reason=reason,
                    detail={"approver": approver, "changed": changed},
                    at=now,
                ),
            )
            return changed

        return self._db.run(txn)

    def roles(self, *, tenant: str) -> list[tuple[str, str]]:
        return self._db.run(lambda cur: roles_txn(cur, tenant))

    # -- shared ---------------------------------------------------------------------------------

    def _approval_txn(
        self, cur: Cursor, approval_id: str, tenant: str, *, for_update: bool = False
    ) -> Approval:
        try:
            uuid.UUID(approval_id)
        except ValueError:
            raise NotFound(f"no approval {approval_id[:64]!r}") from None
        approval = get_approval_txn(cur, approval_id, for_update=for_update)
        if approval is None or approval.tenant != tenant:
            raise NotFound(f"no approval {approval_id[:64]!r}")
        return approval

    def _audit_txn(
        self,
        cur: Cursor,
        *,
        actor: str,
        action: str,
        approval: Approval,
        reason: str,
        detail: dict[str, object],
    ) -> None:
        record_audit_txn(
            cur,
            AuditEntry(
                actor=actor,
                action=action,
                target=f"approval:{approval.approval_id}",
                reason=reason,
                detail={"run_id": approval.run_id, "step": approval.cmd, **detail},
                at=self._clock.now(),
            ),
        )

    def _audit_refusal_txn(self, cur: Cursor, request: DecisionRequest, refusal: _Refused) -> None:
        digest = token_hash(request.token).hex()[:12] if request.token else ""
        target = f"approval:{refusal.approval_id}" if refusal.approval_id else f"token:{digest}"
        # The caller is unauthenticated: what it claims to be is kept as a claim, never as the
        # record's actor, which is the token's approver when the token exists.
        stored = None
        if request.token and len(request.token) <= MAX_TOKEN_CHARS and request.token.isascii():
            stored = get_token_txn(cur, token_hash(request.token), for_update=False)
        record_audit_txn(
            cur,
            AuditEntry(
                actor=stored.approver if stored is not None else UNKNOWN_APPROVER,
                action="approval.refused",
                target=target,
                reason=refusal.detail,
                detail={
                    "via": request.via,
                    "approve": request.approve,
                    "claimed_approver": request.approver[:MAX_CLAIM_CHARS],
                    "token": digest,
                    "tenant": request.tenant,
                    "run_id": request.run_id,
                    "step": request.step,
                },
                at=self._clock.now(),
            ),
        )
