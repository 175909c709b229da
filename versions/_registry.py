"""The module registry: immutable, content-addressed versions, their labels and retirement."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from amber.abi import Conflict, InvalidInput, Manifest, parse_manifest
from amber.history import (
    AuditEntry,
    VersionUse,
    record_audit_txn,
    version_use_txn,
)

from ._errors import AmbiguousVersion, InvalidModule, VersionNotFound

if TYPE_CHECKING:
    from amber.history import Cursor, Database

    from ._validate import ManifestCheck

DEFAULT_MAX_MODULE_BYTES = 8 * 1024 * 1024
DEFAULT_MAX_COMPONENT_BYTES = 48 * 1024 * 1024
"""A Python guest carries CPython (~18 MB); the cap stays under gRPC's 64 MiB message limit."""

_HEX = re.compile(r"[0-9a-f]{8,64}")
LABEL = re.compile(r"[A-Za-z0-9_.\-]{1,64}@[A-Za-z0-9_.\-+]{1,64}")
"""`name@version`, e.g. `orders@2.0`."""


class LabelConflict(Conflict):
    """The label already names another digest (labels are immutable)."""


class VersionInUse(Conflict):
    """The version cannot be retired: runs, tasks or a workflow type still use it."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ModuleVersion:
    """A stored module version (without its bytes)."""

    digest: str
    """sha256 of the module bytes, lowercase hex: the version's identity."""
    size: int
    manifest: Manifest
    uploaded_at: datetime
    current_for: tuple[str, ...]
    """Workflow types whose new runs start on this version."""
    candidate_for: tuple[str, ...] = ()
    """Workflow types ramping new runs onto this version."""
    labels: tuple[str, ...] = ()
    retired_at: datetime | None = None
    use: VersionUse | None = None
    """Runs and tasks still on it (filled by `get`, for the drain status)."""
    retire_blockers: tuple[str, ...] = ()
    """Why `retire` would refuse it now (filled by `get`; empty: it can be retired)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class UploadResult:
    version: ModuleVersion
    created: bool
    """False when the same bytes were already stored (the upload was a no-op)."""


def digest_of(wasm: bytes) -> str:
    return hashlib.sha256(wasm).hexdigest()


def _version(row: tuple[Any, ...]) -> ModuleVersion:
    digest, size, manifest, uploaded_at, retired_at, current_for, candidate_for, labels = row
    return ModuleVersion(
        digest=digest,
        size=size,
        manifest=parse_manifest(json.dumps(manifest).encode()),
        uploaded_at=uploaded_at,
        current_for=tuple(sorted(current_for or ())),
        candidate_for=tuple(sorted(candidate_for or ())),
        labels=tuple(sorted(labels or ())),
        retired_at=retired_at,
    )


_SELECT = (
    "SELECT m.digest, m.size, m.manifest, m.uploaded_at, m.retired_at,"
    " (SELECT array_agg(t.workflow_type) FROM amber_workflow_types t"
    "   WHERE t.current_digest = m.digest),"
    " (SELECT array_agg(t.workflow_type) FROM amber_workflow_types t"
    "   WHERE t.candidate_digest = m.digest),"
    " (SELECT array_agg(l.label) FROM amber_version_labels l WHERE l.digest = m.digest)"
    " FROM amber_modules m"
)


def get_version_txn(cur: Cursor, ref: str) -> ModuleVersion:
    """A version by full digest, unique prefix (≥ 8 hex digits) or label (`orders@2.0`)."""
    ref = ref.strip()
    if "@" in ref:
        cur.execute("SELECT digest FROM amber_version_labels WHERE label = %s", (ref,))
        row = cur.fetchone()
        if row is None:
            raise VersionNotFound(f"no version is labelled {ref!r}")
        ref = row[0]
    ref = ref.lower().removeprefix("sha256:")
    if not _HEX.fullmatch(ref):
        raise VersionNotFound(
            f"{ref!r} is not a version digest (at least 8 hex characters) or a label (name@ver)"
        )
    if len(ref) == 64:
        cur.execute(_SELECT + " WHERE m.digest = %s", (ref,))
    else:
        cur.execute(_SELECT + " WHERE m.digest LIKE %s ORDER BY m.digest LIMIT 2", (ref + "%",))
    rows = cur.fetchall()
    if not rows:
        raise VersionNotFound(f"no module version matches {ref!r}")
    if len(rows) > 1:
        raise AmbiguousVersion(f"{ref!r} matches more than one version; give more digits")
    return _version(rows[0])


def version_for_type_txn(
    cur: Cursor, ref: str, workflow_type: str, *, lock: bool = False
) -> ModuleVersion:
    """A live version that declares `workflow_type`, or a clear error.

    With `lock`, the version's row is share-locked until the transaction ends, so a concurrent
    retirement waits for it (and this one sees a retirement that committed first): use it
    wherever a run, a ramp or a move is about to depend on the version.
    """
    version = get_version_txn(cur, ref)
    if lock:
        version = _lock_version_txn(cur, version, "FOR SHARE")
    if workflow_type not in version.manifest.workflows:
        raise InvalidModule(
            f"version {version.digest[:12]} does not declare workflow type {workflow_type!r}"
            f" (it declares {', '.join(version.manifest.workflows) or 'none'})"
        )
    if version.retired_at is not None:
        raise InvalidModule(f"version {version.digest[:12]} is retired")
    return version


def _lock_version_txn(cur: Cursor, version: ModuleVersion, mode: str) -> ModuleVersion:
    """Lock a version's row and re-read whether it is retired (it may have just been)."""
    cur.execute(f"SELECT retired_at FROM amber_modules WHERE digest = %s {mode}", (version.digest,))
    row = cur.fetchone()
    return version if row is None else replace(version, retired_at=row[0])


class VersionRegistry:
    """Upload, label, look up, fetch and retire module versions.

    Public methods own their transactions. Rollout (current, candidate, ramp) is `Rollout`.
    """

    def __init__(
        self,
        db: Database,
        *,
        max_module_bytes: int = DEFAULT_MAX_MODULE_BYTES,
        max_component_bytes: int = DEFAULT_MAX_COMPONENT_BYTES,
        manifest_checks: Sequence[ManifestCheck] = (),
    ) -> None:
        self._db = db
        self.max_module_bytes = max_module_bytes
        self.max_component_bytes = max_component_bytes
        self._manifest_checks = tuple(manifest_checks)

    def upload(
        self,
        wasm: bytes,
        *,
        now: datetime,
        label: str = "",
        actor: str = "unnamed",
        reason: str = "",
    ) -> UploadResult:
        """Validate and store a module. Same bytes again: a no-op returning the same digest.

        The version becomes current for each workflow type it declares that has no current
        version yet (promoting it over an existing one is `Rollout.promote`, audited). `label`
        names it too. A new version is audited (`version.upload`) under `actor` with `reason`,
        and the types it became current for.
        """
        # Here, not at the top: wasmtime loads when a module is validated, not when a client
        # reads a version.
        from ._validate import validate_module

        manifest = validate_module(
            wasm,
            max_bytes=self.max_module_bytes,
            max_component_bytes=self.max_component_bytes,
            manifest_checks=self._manifest_checks,
        )
        if label:
            _check_label(label)
        digest = digest_of(wasm)
        manifest_json = json.dumps(manifest.to_json(), sort_keys=True)

        def txn(cur: Cursor) -> bool:
            cur.execute(
                "INSERT INTO amber_modules (digest, size, manifest, wasm, uploaded_at)"
                " VALUES (%s, %s, %s, %s, %s) ON CONFLICT (digest) DO NOTHING",
                (digest, len(wasm), manifest_json, wasm, now),
            )
            created = cur.rowcount == 1
            labelled = bool(label) and _label_txn(cur, digest, label, now)
            current_for = []
            for workflow_type in manifest.workflows:
                cur.execute(
                    "INSERT INTO amber_module_workflows (workflow_type, digest) VALUES (%s, %s)"
                    " ON CONFLICT DO NOTHING",
                    (workflow_type, digest),
                )
                cur.execute(
                    "INSERT INTO amber_workflow_types (workflow_type, current_digest, updated_at)"
                    " VALUES (%s, %s, %s) ON CONFLICT (workflow_type) DO NOTHING",
                    (workflow_type, digest, now),
                )
                if cur.rowcount == 1:
                    current_for.append(workflow_type)
            if created or labelled:
                detail = {
                    "size": len(wasm),
                    "workflows": list(manifest.workflows),
                    "activities": list(manifest.activities),
                    "current_for": current_for,
                    "label": label or None,
                    "created": created,
                }
                record_audit_txn(
                    cur,
                    AuditEntry(
                        actor=actor,
                        action="version.upload",
                        target=digest,
                        reason=reason,
                        detail=detail,
                        at=now,
                    ),
                )
            return created

        created = self._db.run(txn)
        return UploadResult(version=self.get(digest), created=created)

    def label(self, ref: str, label: str, *, now: datetime, actor: str) -> ModuleVersion:
        """Give a version a human label; a label names one digest forever."""
        _check_label(label)

        def txn(cur: Cursor) -> ModuleVersion:
            version = get_version_txn(cur, ref)
            if _label_txn(cur, version.digest, label, now):
                record_audit_txn(
                    cur,
                    AuditEntry(
                        actor=actor,
                        action="version.label",
                        target=version.digest,
                        reason="",
                        detail={"label": label},
                        at=now,
                    ),
                )
            return get_version_txn(cur, version.digest)

        return self._db.run(txn)

    def get(self, ref: str) -> ModuleVersion:
        """A version by digest, prefix or label, with how many runs and tasks still use it."""

        def txn(cur: Cursor) -> ModuleVersion:
            version = get_version_txn(cur, ref)
            use = version_use_txn(cur, version.digest)
            return _with_use(version, use, _retire_blockers_txn(cur, version, use))

        return self._db.run(txn)

    def list(self) -> list[ModuleVersion]:
        """Every stored version, newest first."""

        def txn(cur: Cursor) -> list[ModuleVersion]:
            cur.execute(_SELECT + " ORDER BY m.uploaded_at DESC, m.digest")
            return [_version(row) for row in cur.fetchall()]

        return self._db.run(txn)

    def module_bytes(self, digest: str) -> bytes:
        """The exact bytes of a stored version (what workers compile)."""

        def txn(cur: Cursor) -> bytes:
            cur.execute("SELECT wasm FROM amber_modules WHERE digest = %s", (digest,))
            row = cur.fetchone()
            if row is None:
                raise VersionNotFound(f"no module version {digest}")
            return bytes(row[0])

        return self._db.run(txn)

    def retire(self, ref: str, *, now: datetime, actor: str, reason: str) -> ModuleVersion:
        """Retire a version nothing uses any more: no new run, migration or upgrade may use it.

        Refused (`VersionInUse`, with the counts) while a run is pinned to it, a task will run
        on it, or a workflow type starts new runs on it. Its bytes are kept: histories name it.
        """

        def txn(cur: Cursor) -> ModuleVersion:
            # The row lock orders retirement against every transaction that share-locks the
            # version before depending on it (starts, ramps, moves): either they commit first
            # and are counted below, or they wait and then see it retired.
            version = _lock_version_txn(cur, get_version_txn(cur, ref), "FOR UPDATE")
            if version.retired_at is not None:
                return _with_use(version, version_use_txn(cur, version.digest))
            use = version_use_txn(cur, version.digest)
            blockers = _retire_blockers_txn(cur, version, use)
            if blockers:
                raise VersionInUse(
                    f"version {version.digest[:12]} cannot be retired: {'; '.join(blockers)}"
                )
            cur.execute(
                "UPDATE amber_modules SET retired_at = %s WHERE digest = %s AND retired_at IS NULL",
                (now, version.digest),
            )
            # Nothing may roll back onto it either.
            cur.execute(
                "UPDATE amber_workflow_types SET previous_digest = NULL WHERE previous_digest = %s",
                (version.digest,),
            )
            record_audit_txn(
                cur,
                AuditEntry(
                    actor=actor,
                    action="version.retire",
                    target=version.digest,
                    reason=reason,
                    detail={"closed_runs": use.closed},
                    at=now,
                ),
            )
            return _with_use(get_version_txn(cur, version.digest), use)

        return self._db.run(txn)


def _retire_blockers_txn(cur: Cursor, version: ModuleVersion, use: VersionUse) -> list[str]:
    """Why the version cannot be retired now (empty: it can; a retired one has none)."""
    if version.retired_at is not None:
        return []
    blockers = []
    if use.running:
        blockers.append(f"{use.running} open run(s) are pinned to it")
    if use.tasks:
        blockers.append(f"{use.tasks} task(s) will run on it")
    if version.current_for or version.candidate_for:
        types = ", ".join(version.current_for + version.candidate_for)
        blockers.append(f"new runs of {types} start on it")
    cur.execute(
        "SELECT workflow_type FROM amber_workflow_types WHERE auto_upgrade_to = %s",
        (version.digest,),
    )
    upgrading = [row[0] for row in cur.fetchall()]
    if upgrading:
        blockers.append(f"runs of {', '.join(upgrading)} upgrade to it automatically")
    return blockers


def _with_use(
    version: ModuleVersion, use: VersionUse, blockers: Sequence[str] = ()
) -> ModuleVersion:
    return ModuleVersion(
        digest=version.digest,
        size=version.size,
        manifest=version.manifest,
        uploaded_at=version.uploaded_at,
        current_for=version.current_for,
        candidate_for=version.candidate_for,
        labels=version.labels,
        retired_at=version.retired_at,
        use=use,
        retire_blockers=tuple(blockers),
    )


def _check_label(label: str) -> None:
    if not LABEL.fullmatch(label):
        raise InvalidInput(f"label {label!r} must look like name@version (e.g. orders@2.0)")


def _label_txn(cur: Cursor, digest: str, label: str, now: datetime) -> bool:
    """Bind a label; False if it already named this digest. Raises `LabelConflict`."""
    cur.execute(
        "INSERT INTO amber_version_labels (label, digest, created_at) VALUES (%s, %s, %s)"
        " ON CONFLICT (label) DO NOTHING",
        (label, digest, now),
    )
    if cur.rowcount == 1:
        return True
    cur.execute("SELECT digest FROM amber_version_labels WHERE label = %s", (label,))
    row = cur.fetchone()
    if row is not None and row[0] != digest:
        raise LabelConflict(f"label {label!r} already names version {row[0][:12]}")
    return False
