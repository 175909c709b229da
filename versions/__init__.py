"""The module registry and rollouts: versioned Wasm modules, validated at upload, stored
immutably, and the per-type pointers that decide which version new runs start on.

Design: a version *is* the sha256 of its bytes, so re-uploading is a no-op and a digest recorded
in history names exactly one module forever; a label names one digest forever too. Validation
happens before anything is written (manifest from a custom section, exports and imports
type-checked against ABI v1, size cap). Per workflow type, `Rollout` keeps a current version, a
candidate with a ramp (new runs split by a stable hash of their workflow id, recorded in the
run), the previous current (rollback) and an automatic upgrade target gated by a replay check;
every change is audited. Retirement takes a row lock that every transaction depending on a
version share-locks first, so nothing starts, ramps or moves onto a version being retired.
Health counts activations, failures by reason and fuel per version. Workers load versions
through an on-disk artifact cache keyed by (sha256, wasmtime version, engine flags).

Rejected: mutable "latest" module rows (a run could no longer name the code that wrote its
history); deriving a version from the deploying process's source (DBOS #702 stranded runs);
random ramp assignment (a retried start could land on the other side); moving runs on a new
version without replaying their histories first (Temporal users' 1.5 h of non-determinism).
"""

from __future__ import annotations

from amber import _checkout

_checkout.alias(__name__)


from importlib.resources import files
from typing import TYPE_CHECKING

from amber.abi import lazy_exports

if TYPE_CHECKING:
    from amber.history import Database

    from ._artifacts import WASMTIME_VERSION, ArtifactCache
    from ._errors import (
        AmbiguousVersion,
        InvalidModule,
        ModuleTooLarge,
        UnknownWorkflowType,
        VersionNotFound,
    )
    from ._health import OK, HealthCount, VersionHealth, add_health_txn, health_txn
    from ._registry import (
        DEFAULT_MAX_COMPONENT_BYTES,
        DEFAULT_MAX_MODULE_BYTES,
        LABEL,
        LabelConflict,
        ModuleVersion,
        UploadResult,
        VersionInUse,
        VersionRegistry,
        digest_of,
        get_version_txn,
        version_for_type_txn,
    )
    from ._rollout import (
        Rollout,
        TypeRollout,
        TypeStatus,
        VersionStatus,
        bucket_of,
        rollout_of_txn,
        select_version_txn,
    )
    from ._validate import ManifestCheck, validate_module

# Public name -> the private module that defines it. Loaded on first use, so importing one
# type (a client reading `Run`) does not load the database driver or wasmtime.
_LAZY: dict[str, str] = {
    "AmbiguousVersion": "_errors",
    "ArtifactCache": "_artifacts",
    "DEFAULT_MAX_COMPONENT_BYTES": "_registry",
    "DEFAULT_MAX_MODULE_BYTES": "_registry",
    "HealthCount": "_health",
    "InvalidModule": "_errors",
    "LABEL": "_registry",
    "LabelConflict": "_registry",
    "ManifestCheck": "_validate",
    "ModuleTooLarge": "_errors",
    "ModuleVersion": "_registry",
    "OK": "_health",
    "Rollout": "_rollout",
    "TypeRollout": "_rollout",
    "TypeStatus": "_rollout",
    "UnknownWorkflowType": "_errors",
    "UploadResult": "_registry",
    "VersionHealth": "_health",
    "VersionInUse": "_registry",
    "VersionNotFound": "_errors",
    "VersionRegistry": "_registry",
    "VersionStatus": "_rollout",
    "WASMTIME_VERSION": "_artifacts",
    "add_health_txn": "_health",
    "bucket_of": "_rollout",
    "digest_of": "_registry",
    "get_version_txn": "_registry",
    "health_txn": "_health",
    "rollout_of_txn": "_rollout",
    "select_version_txn": "_rollout",
    "validate_module": "_validate",
    "version_for_type_txn": "_registry",
}

__all__ = [
    "DEFAULT_MAX_COMPONENT_BYTES",
    "DEFAULT_MAX_MODULE_BYTES",
    "LABEL",
    "OK",
    "WASMTIME_VERSION",
    "AmbiguousVersion",
    "ArtifactCache",
    "HealthCount",
    "InvalidModule",
    "LabelConflict",
    "ManifestCheck",
    "ModuleTooLarge",
    "ModuleVersion",
    "Rollout",
    "TypeRollout",
    "TypeStatus",
    "UnknownWorkflowType",
    "UploadResult",
    "VersionHealth",
    "VersionInUse",
    "VersionNotFound",
    "VersionRegistry",
    "VersionStatus",
    "add_health_txn",
    "bucket_of",
    "digest_of",
    "get_version_txn",
    "health_txn",
    "migrate",
    "rollout_of_txn",
    "select_version_txn",
    "validate_module",
    "version_for_type_txn",
]


__getattr__, __dir__ = lazy_exports(globals(), _LAZY)


def migrate(db: Database) -> list[int]:
    """Apply this package's pending migrations; return the versions applied."""
    from amber.history import apply_migrations, load_migrations

    return apply_migrations(db, "versions", load_migrations(files(__package__) / "migrations"))
