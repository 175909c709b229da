"""The module registry: versioned Wasm modules, validated at upload, stored immutably.

Design: a version *is* the sha256 of its bytes, so re-uploading is a no-op and a digest recorded
in history names exactly one module forever. Validation happens before anything is written
(manifest from a custom section, exports and imports type-checked against ABI v1, size cap).
Which version new runs of a type start on is a separate pointer (`current`). Workers load
versions through an on-disk artifact cache keyed by (sha256, wasmtime version, engine flags).

Rejected: mutable "latest" module rows (a run could no longer name the code that wrote its
history); deriving a version from the deploying process's source (DBOS #702 stranded runs).
"""

from importlib.resources import files

from history import Database, apply_migrations, load_migrations

from ._artifacts import WASMTIME_VERSION, ArtifactCache
from ._errors import (
    AmbiguousVersion,
    InvalidModule,
    ModuleTooLarge,
    UnknownWorkflowType,
    VersionNotFound,
)
from ._registry import (
    ModuleVersion,
    UploadResult,
    VersionRegistry,
    digest_of,
    resolve_version_txn,
)
from ._validate import DEFAULT_MAX_MODULE_BYTES, ManifestCheck, validate_module


def migrate(db: Database) -> list[int]:
    """Apply this package's pending migrations; return the versions applied."""
    return apply_migrations(db, "versions", load_migrations(files(__package__) / "migrations"))


__all__ = [
    "DEFAULT_MAX_MODULE_BYTES",
    "WASMTIME_VERSION",
    "AmbiguousVersion",
    "ArtifactCache",
    "InvalidModule",
    "ManifestCheck",
    "ModuleTooLarge",
    "ModuleVersion",
    "UnknownWorkflowType",
    "UploadResult",
    "VersionNotFound",
    "VersionRegistry",
    "digest_of",
    "migrate",
    "resolve_version_txn",
    "validate_module",
]
