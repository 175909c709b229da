"""Which version new runs start on: per workflow type a current version and, during a rollout, a
candidate that a deterministic share of new runs go to.

A new run's side is chosen from a hash of its workflow id (`bucket` 0–99, candidate when below
the ramp percentage), so the same workflow id always lands on the same side and the split is
close to the ramp over many ids. Every change is audited. Moving *existing* runs is a separate,
replay-checked operation (the runtime's migration), recorded here as the outcome of checks.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from amber.abi import InvalidInput
from amber.history import (
    AuditEntry,
    VersionChoice,
    VersionUse,
    record_audit_txn,
    version_use_txn,
)

from ._errors import InvalidModule, UnknownWorkflowType
from ._health import VersionHealth, health_txn
from ._registry import get_version_txn, version_for_type_txn

if TYPE_CHECKING:
    from amber.history import Cursor, Database


@dataclass(frozen=True, slots=True, kw_only=True)
class TypeRollout:
    """A workflow type's rollout state."""

    workflow_type: str
    current: str
    candidate: str | None
    ramp_percent: int
    previous: str | None
    auto_upgrade_to: str | None


def bucket_of(workflow_type: str, workflow_id: str) -> int:
    """A workflow id's bucket (0–99) for a type: stable across servers and releases."""
    digest = hashlib.sha256(f"{workflow_type}\x00{workflow_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % 100


def _rollout_txn(cur: Cursor, workflow_type: str, *, lock: bool = False) -> TypeRollout:
    cur.execute(
        "SELECT current_digest, candidate_digest, ramp_percent, previous_digest, auto_upgrade_to"
        " FROM amber_workflow_types WHERE workflow_type = %s" + (" FOR UPDATE" if lock else ""),
        (workflow_type,),
    )
    row = cur.fetchone()
    if row is None:
        raise UnknownWorkflowType(f"no uploaded module declares workflow type {workflow_type!r}")
    current, candidate, ramp, previous, auto = row
    return TypeRollout(
        workflow_type=workflow_type,
        current=current,
        candidate=candidate,
        ramp_percent=ramp,
        previous=previous,
        auto_upgrade_to=auto,
    )


def rollout_of_txn(cur: Cursor, workflow_type: str) -> TypeRollout:
    """A type's rollout state (for the server's automatic upgrades)."""
    return _rollout_txn(cur, workflow_type)


def select_version_txn(
    cur: Cursor, workflow_type: str, workflow_id: str, requested: str | None
) -> VersionChoice:
    """The version a new run of `workflow_type` starts on: `requested` (a digest, prefix or
    label), else the candidate for the ids its ramp covers, else the current version."""
    if requested:
        version = version_for_type_txn(cur, requested, workflow_type, lock=True)
        return VersionChoice(digest=version.digest, via="requested")
    rollout = _rollout_txn(cur, workflow_type)
    if rollout.candidate is None or rollout.ramp_percent == 0:
        selection = VersionChoice(digest=rollout.current, via="current")
    else:
        bucket = bucket_of(workflow_type, workflow_id)
        chosen = rollout.candidate if bucket < rollout.ramp_percent else rollout.current
        via = "candidate" if chosen == rollout.candidate else "current"
        selection = VersionChoice(digest=chosen, via=via, bucket=bucket, ramp=rollout.ramp_percent)
    version_for_type_txn(cur, selection.digest, workflow_type, lock=True)  # orders vs retire
    return selection


@dataclass(frozen=True, slots=True, kw_only=True)
class VersionStatus:
    """One version of a type during a rollout, side by side with the others."""

    digest: str
    role: str
    """current, candidate, upgrade_target (open runs move to it as they next activate),
    previous, or draining (only runs pinned to it are left)."""
    labels: tuple[str, ...]
    use: VersionUse
    health: VersionHealth


@dataclass(frozen=True, slots=True, kw_only=True)
class TypeStatus:
    rollout: TypeRollout
    versions: tuple[VersionStatus, ...]


class Rollout:
    """Promote, ramp, roll back and auto-upgrade workflow types; each change is audited."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def status(self, workflow_type: str) -> TypeStatus:
        """The type's rollout with every version that matters to it, and their health."""

        def txn(cur: Cursor) -> TypeStatus:
            rollout = _rollout_txn(cur, workflow_type)
            cur.execute(
                "SELECT digest FROM amber_module_workflows WHERE workflow_type = %s",
                (workflow_type,),
            )
            digests = [row[0] for row in cur.fetchall()]
            health = health_txn(cur, digests)
            roles = {rollout.current: "current"}
            if rollout.candidate:
                roles[rollout.candidate] = "candidate"
            if rollout.auto_upgrade_to and rollout.auto_upgrade_to not in roles:
                roles[rollout.auto_upgrade_to] = "upgrade_target"
            if rollout.previous and rollout.previous not in roles:
                roles[rollout.previous] = "previous"
            versions = []
            for digest in digests:
                use = version_use_txn(cur, digest, workflow_type)
                if digest not in roles and not use.running and not health[digest].activations:
                    continue
                versions.append(
                    VersionStatus(
                        digest=digest,
                        role=roles.get(digest, "draining"),
                        labels=get_version_txn(cur, digest).labels,
                        use=use,
                        health=health[digest],
                    )
                )
            order = {
                "current": 0,
                "candidate": 1,
                "upgrade_target": 2,
                "previous": 3,
                "draining": 4,
            }
            versions.sort(key=lambda v: (order[v.role], v.digest))
            return TypeStatus(rollout=rollout, versions=tuple(versions))

        return self._db.run(txn)

    def promote(
        self, workflow_type: str, ref: str, *, now: datetime, actor: str, reason: str
    ) -> TypeRollout:
        """Make a version the current one: every new run of the type starts on it."""

        def txn(cur: Cursor) -> TypeRollout:
            before = _rollout_txn(cur, workflow_type, lock=True)
            version = version_for_type_txn(cur, ref, workflow_type, lock=True)
            if version.digest == before.current:
                return before  # already current: keep the rollback target
            candidate = None if before.candidate == version.digest else before.candidate
            cur.execute(
                "UPDATE amber_workflow_types SET previous_digest = current_digest,"
                " current_digest = %s, candidate_digest = %s,"
                " ramp_percent = CASE WHEN %s::text IS NULL THEN 0 ELSE ramp_percent END,"
                " updated_at = %s WHERE workflow_type = %s",
                (version.digest, candidate, candidate, now, workflow_type),
            )
            return self._audit(cur, before, "version.promote", actor, reason, now)

        return self._db.run(txn)

    def ramp(
        self, workflow_type: str, ref: str, percent: int, *, now: datetime, actor: str, reason: str
    ) -> TypeRollout:
        """Send `percent` of new runs (by workflow id) to a candidate version."""
        if not 0 <= percent <= 100:
            raise InvalidInput(f"a ramp is a percentage from 0 to 100, not {percent}")

        def txn(cur: Cursor) -> TypeRollout:
            before = _rollout_txn(cur, workflow_type, lock=True)
            version = version_for_type_txn(cur, ref, workflow_type, lock=True)
            if version.digest == before.current:
                raise InvalidInput(
                    f"version {version.digest[:12]} is already current for {workflow_type!r}"
                )
            cur.execute(
                "UPDATE amber_workflow_types SET candidate_digest = %s, ramp_percent = %s,"
                " updated_at = %s WHERE workflow_type = %s",
                (version.digest, percent, now, workflow_type),
            )
            return self._audit(cur, before, "version.ramp", actor, reason, now)

        return self._db.run(txn)

    def rollback(
        self, workflow_type: str, *, now: datetime, actor: str, reason: str
    ) -> TypeRollout:
        """Undo the last step: drop the candidate, or else return to the previous current."""

        def txn(cur: Cursor) -> TypeRollout:
            before = _rollout_txn(cur, workflow_type, lock=True)
            if before.candidate is not None:
                cur.execute(
                    "UPDATE amber_workflow_types SET candidate_digest = NULL, ramp_percent = 0,"
                    " auto_upgrade_to = NULL, updated_at = %s WHERE workflow_type = %s",
                    (now, workflow_type),
                )
            elif before.previous is not None:
                version_for_type_txn(cur, before.previous, workflow_type, lock=True)
                cur.execute(
                    "UPDATE amber_workflow_types SET current_digest = previous_digest,"
                    " previous_digest = NULL, auto_upgrade_to = NULL, updated_at = %s"
                    " WHERE workflow_type = %s",
                    (now, workflow_type),
                )
            else:
                raise InvalidInput(f"{workflow_type!r} has no candidate and no previous version")
            return self._audit(cur, before, "version.rollback", actor, reason, now)

        return self._db.run(txn)

    def auto_upgrade(
        self, workflow_type: str, ref: str | None, *, now: datetime, actor: str, reason: str
    ) -> TypeRollout:
        """Move open runs of the type to a version at their next activation (None: stop).

        Allowed only after a replay check of that version over the type's runs found no
        incompatible run; each run is still replayed on the new version before it moves.
        """

        def txn(cur: Cursor) -> TypeRollout:
            before = _rollout_txn(cur, workflow_type, lock=True)
            digest = None
            if ref is not None:
                digest = version_for_type_txn(cur, ref, workflow_type, lock=True).digest
                cur.execute(
                    "SELECT incompatible, failed FROM amber_version_checks"
                    " WHERE workflow_type = %s AND candidate = %s ORDER BY check_id DESC LIMIT 1",
                    (workflow_type, digest),
                )
                row = cur.fetchone()
                if row is None or row[0] or row[1]:
                    raise InvalidModule(
                        f"run `amber versions check {digest[:12]} --type {workflow_type}` first:"
                        " automatic upgrades need a check that found every open run compatible"
                        + (
                            ""
                            if row is None
                            else f" (the last one found {row[0]} open run(s) incompatible,"
                            f" {row[1]} failing)"
                        )
                    )
            cur.execute(
                "UPDATE amber_workflow_types SET auto_upgrade_to = %s, updated_at = %s"
                " WHERE workflow_type = %s",
                (digest, now, workflow_type),
            )
            return self._audit(cur, before, "version.auto_upgrade", actor, reason, now)

        return self._db.run(txn)

    def record_check(
        self,
        workflow_type: str,
        candidate: str,
        *,
        now: datetime,
        runs: int,
        compatible: int,
        incompatible: int,
        failed: int,
    ) -> None:
        """Remember the outcome of a replay check (it gates automatic upgrades)."""

        def txn(cur: Cursor) -> None:
            cur.execute(
                "INSERT INTO amber_version_checks (workflow_type, candidate, checked_at, runs,"
                " compatible, incompatible, failed) VALUES (%s, %s, %s, %s, %s, %s, %s)",
                (workflow_type, candidate, now, runs, compatible, incompatible, failed),
            )

        self._db.run(txn)

    @staticmethod
    def _audit(
        cur: Cursor, before: TypeRollout, action: str, actor: str, reason: str, now: datetime
    ) -> TypeRollout:
        after = _rollout_txn(cur, before.workflow_type)
        detail = {
            "before": _state(before),
            "after": _state(after),
        }
        record_audit_txn(
            cur,
            AuditEntry(
                actor=actor,
                action=action,
                target=before.workflow_type,
                reason=reason,
                detail=detail,
                at=now,
            ),
        )
        return after


def _state(rollout: TypeRollout) -> dict[str, Any]:
    return {
        "current": rollout.current,
        "candidate": rollout.candidate,
        "ramp": rollout.ramp_percent,
        "auto_upgrade_to": rollout.auto_upgrade_to,
    }
