"""The module registry: immutable, content-addressed versions and the current one per type."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from abi import Manifest, parse_manifest
from history import Cursor, Database

from ._errors import AmbiguousVersion, InvalidModule, UnknownWorkflowType, VersionNotFound
from ._validate import DEFAULT_MAX_MODULE_BYTES, ManifestCheck, validate_module

_HEX = re.compile(r"[0-9a-f]{8,64}")


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


@dataclass(frozen=True, slots=True, kw_only=True)
class UploadResult:
    version: ModuleVersion
    created: bool
    """False when the same bytes were already stored (the upload was a no-op)."""


def digest_of(wasm: bytes) -> str:
    return hashlib.sha256(wasm).hexdigest()


def _version(row: tuple[Any, ...]) -> ModuleVersion:
    digest, size, manifest, uploaded_at, current_for = row
    return ModuleVersion(
        digest=digest,
        size=size,
        manifest=parse_manifest(json.dumps(manifest).encode()),
        uploaded_at=uploaded_at,
        current_for=tuple(sorted(current_for or ())),
    )


_SELECT = (
    "SELECT m.digest, m.size, m.manifest, m.uploaded_at,"
    " (SELECT array_agg(t.workflow_type) FROM amber_workflow_types t"
    "   WHERE t.current_digest = m.digest)"
    " FROM amber_modules m"
)


def _get_txn(cur: Cursor, ref: str) -> ModuleVersion:
    ref = ref.strip().lower().removeprefix("sha256:")
    if not _HEX.fullmatch(ref):
        raise VersionNotFound(f"{ref!r} is not a version digest (at least 8 hex characters)")
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


def resolve_version_txn(cur: Cursor, workflow_type: str, requested: str | None) -> str:
    """The digest a new run of `workflow_type` starts on: `requested`, or the type's current."""
    if requested:
        version = _get_txn(cur, requested)
        if workflow_type not in version.manifest.workflows:
            raise InvalidModule(
                f"version {version.digest[:12]} does not declare workflow type {workflow_type!r}"
                f" (it declares {', '.join(version.manifest.workflows) or 'none'})"
            )
        return version.digest
    cur.execute(
        "SELECT current_digest FROM amber_workflow_types WHERE workflow_type = %s",
        (workflow_type,),
    )
    row = cur.fetchone()
    if row is None:
        raise UnknownWorkflowType(f"no uploaded module declares workflow type {workflow_type!r}")
    return str(row[0])


class VersionRegistry:
    """Upload, look up and fetch module versions. Public methods own their transactions."""

    def __init__(
        self,
        db: Database,
        *,
        max_module_bytes: int = DEFAULT_MAX_MODULE_BYTES,
        manifest_checks: Sequence[ManifestCheck] = (),
    ) -> None:
        self._db = db
        self.max_module_bytes = max_module_bytes
        self._manifest_checks = tuple(manifest_checks)

    def upload(self, wasm: bytes, *, now: datetime, promote: bool = False) -> UploadResult:
        """Validate and store a module. Same bytes again: a no-op returning the same digest.

        The version becomes current for each workflow type it declares that has no current
        version yet, and for all its types when `promote` is set.
        """
        manifest = validate_module(
            wasm, max_bytes=self.max_module_bytes, manifest_checks=self._manifest_checks
        )
        digest = digest_of(wasm)
        manifest_json = json.dumps(manifest.to_json(), sort_keys=True)

        def txn(cur: Cursor) -> bool:
            cur.execute(
                "INSERT INTO amber_modules (digest, size, manifest, wasm, uploaded_at)"
                " VALUES (%s, %s, %s, %s, %s) ON CONFLICT (digest) DO NOTHING",
                (digest, len(wasm), manifest_json, wasm, now),
            )
            created = cur.rowcount == 1
            for workflow_type in manifest.workflows:
                cur.execute(
                    "INSERT INTO amber_module_workflows (workflow_type, digest) VALUES (%s, %s)"
                    " ON CONFLICT DO NOTHING",
                    (workflow_type, digest),
                )
                update = (
                    " DO UPDATE SET current_digest = EXCLUDED.current_digest,"
                    " updated_at = EXCLUDED.updated_at"
                    if promote
                    else " DO NOTHING"
                )
                cur.execute(
                    "INSERT INTO amber_workflow_types (workflow_type, current_digest, updated_at)"
                    " VALUES (%s, %s, %s) ON CONFLICT (workflow_type)" + update,
                    (workflow_type, digest, now),
                )
            return created

        created = self._db.run(txn)
        return UploadResult(version=self.get(digest), created=created)

    def get(self, ref: str) -> ModuleVersion:
        """A version by full digest or unique prefix (≥ 8 hex digits)."""
        return self._db.run(lambda cur: _get_txn(cur, ref))

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
