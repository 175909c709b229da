"""The module registry on a real PostgreSQL: content-addressed uploads, the current version per
workflow type, lookups by digest or prefix, and refusal of every bad module before anything is
written."""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import wasmtime

from amber.abi import MANIFEST_SECTION, InvalidInput, NotFound, custom_section
from amber.history import Cursor, Database
from amber.versions import (
    AmbiguousVersion,
    InvalidModule,
    ModuleTooLarge,
    Rollout,
    UnknownWorkflowType,
    VersionNotFound,
    VersionRegistry,
    select_version_txn,
)

NOW = datetime(2025, 1, 1, 12, 0, tzinfo=UTC)
GUESTS = Path(__file__).resolve().parents[1] / "guests"
ORDERS_ACTIVITIES = (
    "reserve_inventory",
    "charge_payment",
    "ship_order",
    "send_confirmation",
    "release_inventory",
)
MANIFEST: dict[str, Any] = {"abi": 1, "workflows": ["w"], "activities": ["a"]}
ALLOC = '(func (export "amber_alloc") (param i32) (result i32) (i32.const 0))'
ENTRY = '(func (export "{name}") (param i32 i32) (result i64) (i64.const 0))'


@pytest.fixture
def registry(db: Database) -> VersionRegistry:
    return VersionRegistry(db)


def _sha256(wasm: bytes) -> str:
    return hashlib.sha256(wasm).hexdigest()


def _wat(*, imports: str = "", exports: tuple[str, ...] = ("w", "a"), entry: str = ENTRY) -> bytes:
    """A hand-written module; by default it satisfies ABI v1 for `MANIFEST`."""
    entries = "\n".join(
        entry.format(name=("amber_workflow." if n == "w" else "amber_activity.") + n)
        for n in exports
    )
    text = f'(module {imports} (memory (export "memory") 1) {ALLOC} {entries})'
    return bytes(wasmtime.wat2wasm(text))


def _with_manifest(wasm: bytes, manifest: dict[str, Any] | None = None) -> bytes:
    payload = json.dumps(MANIFEST if manifest is None else manifest).encode()
    return wasm + custom_section(MANIFEST_SECTION, payload)


def _counts(db: Database) -> tuple[int, ...]:
    row = db.run(
        lambda cur: cur.execute(
            "SELECT (SELECT count(*) FROM amber_modules), (SELECT count(*) FROM"
            " amber_module_workflows), (SELECT count(*) FROM amber_workflow_types)"
        ).fetchone()
    )
    assert row is not None
    return tuple(int(n) for n in row)


def _current(db: Database, workflow_type: str) -> str:
    return db.run(lambda cur: select_version_txn(cur, workflow_type, "", None).digest)


def test_an_upload_is_stored_under_the_sha256_of_its_bytes(
    db: Database, registry: VersionRegistry, modules: dict[str, bytes]
) -> None:
    wasm = modules["orders"]

    result = registry.upload(wasm, now=NOW)

    assert result.created
    version = result.version
    assert version.digest == _sha256(wasm)
    assert version.size == len(wasm)
    assert version.manifest.abi == 1
    assert version.manifest.workflows == ("orders",)
    assert version.manifest.activities == ORDERS_ACTIVITIES
    assert version.uploaded_at == NOW
    assert version.current_for == ("orders",)
    assert registry.get(version.digest) == version
    assert _counts(db) == (1, 1, 1)


def test_uploading_the_same_bytes_again_is_a_no_op(
    db: Database, registry: VersionRegistry, modules: dict[str, bytes]
) -> None:
    first = registry.upload(modules["orders"], now=NOW)

    again = registry.upload(bytes(modules["orders"]), now=NOW + timedelta(days=1))

    assert not again.created
    assert again.version == first.version  # same digest, same upload time
    assert _counts(db) == (1, 1, 1)


def test_a_later_version_of_a_type_becomes_current_only_when_promoted(
    db: Database, registry: VersionRegistry, modules: dict[str, bytes]
) -> None:
    first = registry.upload(modules["orders"], now=NOW).version
    later = registry.upload(modules["orders_reordered"], now=NOW + timedelta(minutes=1))

    assert later.created
    assert later.version.digest != first.digest
    assert later.version.manifest.workflows == ("orders",)
    assert later.version.current_for == ()
    assert _current(db, "orders") == first.digest

    Rollout(db).promote("orders", later.version.digest, now=NOW, actor="t", reason="")
    promoted = registry.upload(modules["orders_reordered"], now=NOW)

    assert not promoted.created
    assert promoted.version.current_for == ("orders",)
    assert registry.get(first.digest).current_for == ()
    assert _current(db, "orders") == later.version.digest
    assert _counts(db) == (2, 2, 1)


def test_each_type_gets_its_own_current_version(
    db: Database, registry: VersionRegistry, modules: dict[str, bytes]
) -> None:
    orders = registry.upload(modules["orders"], now=NOW).version
    chain = registry.upload(modules["chain"], now=NOW + timedelta(seconds=1)).version

    assert (_current(db, "orders"), _current(db, "chain")) == (orders.digest, chain.digest)
    assert [v.digest for v in registry.list()] == [chain.digest, orders.digest]  # newest first


def test_get_accepts_a_full_digest_or_a_unique_prefix(
    registry: VersionRegistry, modules: dict[str, bytes]
) -> None:
    digest = registry.upload(modules["orders"], now=NOW).version.digest
    registry.upload(modules["chain"], now=NOW)

    for ref in (digest, digest[:8], digest[:20], digest[:12].upper(), f"sha256:{digest}"):
        assert registry.get(ref).digest == digest, ref


@pytest.mark.parametrize(
    "ref",
    [
        pytest.param(lambda d: "0" * 64 if d[0] != "0" else "f" * 64, id="unknown-digest"),
        pytest.param(lambda d: "0" * 8 if d[0] != "0" else "f" * 8, id="unknown-prefix"),
        pytest.param(lambda d: d[:7], id="too-short"),
        pytest.param(lambda d: "", id="empty"),
        pytest.param(lambda d: "z" * 64, id="not-hex"),
        pytest.param(lambda d: d[:8] + "%", id="like-wildcard"),
        pytest.param(lambda d: d + "0", id="too-long"),
    ],
)
def test_a_ref_that_names_no_version_is_version_not_found(
    registry: VersionRegistry, modules: dict[str, bytes], ref: Callable[[str], str]
) -> None:
    digest = registry.upload(modules["orders"], now=NOW).version.digest

    with pytest.raises(VersionNotFound) as err:
        registry.get(ref(digest))
    assert isinstance(err.value, NotFound)


def test_a_prefix_of_two_versions_is_ambiguous(db: Database, registry: VersionRegistry) -> None:
    # Two real modules sharing an 8-digit prefix would take ~2^32 tries; store two rows instead.
    twins = ["abcdef01" + "0" * 56, "abcdef01" + "1" * 56]
    manifest = json.dumps(MANIFEST)

    def insert_twins(cur: Cursor) -> None:
        cur.executemany(
            "INSERT INTO amber_modules (digest, size, manifest, wasm, uploaded_at)"
            " VALUES (%s, 1, %s, %s, %s)",
            [(digest, manifest, b"\x00", NOW) for digest in twins],
        )

    db.run(insert_twins)

    with pytest.raises(AmbiguousVersion) as err:
        registry.get("abcdef01")
    assert isinstance(err.value, InvalidInput)
    assert registry.get("abcdef010").digest == twins[0]
    assert registry.get("abcdef011").digest == twins[1]
    with pytest.raises(AmbiguousVersion):
        db.run(lambda cur: select_version_txn(cur, "w", "", "abcdef01"))


def test_module_bytes_are_the_exact_uploaded_bytes(
    registry: VersionRegistry, modules: dict[str, bytes]
) -> None:
    digest = registry.upload(modules["orders"], now=NOW).version.digest

    stored = registry.module_bytes(digest)

    assert stored == modules["orders"]
    assert type(stored) is bytes
    with pytest.raises(VersionNotFound):
        registry.module_bytes(_sha256(b"never uploaded"))


def test_resolving_a_version_for_a_new_run(
    db: Database, registry: VersionRegistry, modules: dict[str, bytes]
) -> None:
    orders = registry.upload(modules["orders"], now=NOW).version.digest
    chain = registry.upload(modules["chain"], now=NOW).version.digest
    reordered = registry.upload(modules["orders_reordered"], now=NOW).version.digest

    def resolve(workflow_type: str, requested: str | None) -> str:
        return db.run(lambda cur: select_version_txn(cur, workflow_type, "", requested).digest)

    assert resolve("orders", None) == orders
    assert resolve("orders", reordered[:10]) == reordered
    with pytest.raises(UnknownWorkflowType, match="'payroll'"):
        resolve("payroll", None)
    with pytest.raises(InvalidModule, match="does not declare workflow type 'orders'"):
        resolve("orders", chain)
    with pytest.raises(VersionNotFound):
        resolve("orders", "0" * 64 if orders[0] != "0" else "f" * 64)


def test_a_minimal_hand_written_module_is_accepted(registry: VersionRegistry) -> None:
    # The bad modules below are this one with one thing wrong, so each fails for that reason.
    wasm = _with_manifest(_wat(imports='(import "amber" "now" (func (result i64)))'))

    result = registry.upload(wasm, now=NOW)

    assert result.created
    assert (result.version.manifest.workflows, result.version.manifest.activities) == (
        ("w",),
        ("a",),
    )


def _no_exports() -> bytes:
    return bytes(wasmtime.wat2wasm((GUESTS / "no_exports.wat").read_text()))


BAD_MODULES: dict[str, tuple[Callable[[dict[str, bytes]], bytes], str]] = {
    "garbage": (lambda m: random.Random(7).randbytes(1024), "bad magic number"),
    "empty": (lambda m: b"", "module is empty"),
    "truncated-half": (lambda m: m["orders"][: len(m["orders"]) // 2], "past the end"),
    "truncated-last-byte": (lambda m: m["orders"][:-1], "past the end"),
    "no-manifest": (lambda m: _no_exports(), "no 'amber.manifest' custom section"),
    "manifest-without-abi-exports": (
        lambda m: _with_manifest(_no_exports()),
        "does not export amber_alloc",
    ),
    "two-manifests": (
        lambda m: _with_manifest(_with_manifest(_wat())),
        "2 'amber.manifest' sections",
    ),
    "manifest-abi-2": (lambda m: _with_manifest(_wat(), {**MANIFEST, "abi": 2}), "must be 1"),
    "manifest-names-a-missing-export": (
        lambda m: _with_manifest(_wat(), {**MANIFEST, "activities": ["a", "ghost"]}),
        "declares amber_activity.ghost but the module does not export it",
    ),
    "undeclared-entry-export": (
        lambda m: _with_manifest(_wat(), {**MANIFEST, "activities": []}),
        "exports amber_activity.a, which its manifest does not declare",
    ),
    "entry-with-the-wrong-type": (
        lambda m: _with_manifest(
            _wat(entry='(func (export "{name}") (param i32) (result i64) (i64.const 0))')
        ),
        "must be a function (i32, i32) -> i64",
    ),
    "foreign-import": (
        lambda m: _with_manifest(_wat(imports='(import "env" "x" (func))')),
        "imports env.x, which ABI v1 does not provide",
    ),
    "unknown-amber-import": (
        lambda m: _with_manifest(_wat(imports='(import "amber" "exec" (func))')),
        "imports amber.exec",
    ),
    "amber-now-with-the-wrong-type": (
        lambda m: _with_manifest(_wat(imports='(import "amber" "now" (func (result i32)))')),
        "'amber.now' has type () -> i32; ABI v1 provides () -> i64",
    ),
    "amber-import-that-is-not-a-function": (
        lambda m: _with_manifest(_wat(imports='(import "amber" "now" (global i64))')),
        "must be a function",
    ),
    "manifest-on-code-that-does-not-compile": (
        lambda m: _with_manifest(b"\x00asm\x01\x00\x00\x00" + bytes([1, 2, 0xFF, 0xFF])),
        "does not compile",
    ),
    "component-without-manifest": (
        lambda m: bytes(wasmtime.wat2wasm("(component)")),
        "no 'amber.manifest' custom section",
    ),
    "component-header-only": (
        lambda m: b"\x00asm\x0d\x00\x01\x00",
        "no 'amber.manifest' custom section",
    ),
    "component-outside-amber's-world": (
        lambda m: _with_manifest(bytes(wasmtime.wat2wasm("(component)"))),
        "component does not export workflow",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_MODULES))
def test_a_bad_module_is_refused_and_nothing_is_written(
    db: Database, registry: VersionRegistry, modules: dict[str, bytes], case: str
) -> None:
    make, message = BAD_MODULES[case]
    wasm = make(modules)
    registry.upload(modules["chain"], now=NOW)
    before = _counts(db)

    with pytest.raises(InvalidModule, match=re.escape(message)) as err:
        registry.upload(wasm, now=NOW)

    assert type(err.value) is InvalidModule
    assert _counts(db) == before
    assert [v.digest for v in registry.list()] == [_sha256(modules["chain"])]


def test_a_module_over_the_size_cap_is_refused(db: Database, modules: dict[str, bytes]) -> None:
    small = VersionRegistry(db, max_module_bytes=1000)
    assert len(modules["orders"]) > 1000

    with pytest.raises(ModuleTooLarge, match=f"{len(modules['orders'])} bytes; the cap is 1000"):
        small.upload(modules["orders"], now=NOW)

    assert isinstance(ModuleTooLarge("x"), InvalidModule)
    assert _counts(db) == (0, 0, 0)
    exactly = _with_manifest(_wat())
    assert VersionRegistry(db, max_module_bytes=len(exactly)).upload(exactly, now=NOW).created
