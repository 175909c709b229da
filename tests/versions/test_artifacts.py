"""The on-disk artifact cache with real wasmtime: compile once, then deserialise; damaged or
incompatible artifacts are rebuilt; bytes that do not match their digest are refused.

Engines are created inside fixtures, never at import: wasmtime's trap handlers must be installed
after pytest has started.
"""

from __future__ import annotations

import hashlib
import stat
from collections.abc import Callable
from pathlib import Path

import pytest
import wasmtime

from amber.versions import WASMTIME_VERSION, ArtifactCache, InvalidModule

FLAGS = "fuel=1;epoch=1"


@pytest.fixture(scope="module")
def engine() -> wasmtime.Engine:
    return wasmtime.Engine()


@pytest.fixture
def orders(modules: dict[str, bytes]) -> tuple[str, bytes]:
    wasm = modules["orders"]
    return hashlib.sha256(wasm).hexdigest(), wasm


def _counting(wasm: bytes) -> tuple[Callable[[], bytes], list[int]]:
    calls: list[int] = []

    def fetch() -> bytes:
        calls.append(1)
        return wasm

    return fetch, calls


def _never() -> bytes:
    raise AssertionError("fetch() called although the artifact is cached")


def _export_names(module: wasmtime.Module) -> list[str]:
    return sorted(e.name for e in module.exports)


def _import_signatures(module: wasmtime.Module) -> list[tuple[str, str, str]]:
    # FuncType has no value-based str(); compare the parameter and result types themselves.
    signatures = []
    for imp in module.imports:
        ty = imp.type
        assert isinstance(ty, wasmtime.FuncType)
        params = ",".join(str(p) for p in ty.params)
        results = ",".join(str(r) for r in ty.results)
        signatures.append((f"{imp.module}.{imp.name}", params, results))
    return signatures


def test_a_first_load_compiles_and_writes_the_artifact(
    tmp_path: Path, engine: wasmtime.Engine, orders: tuple[str, bytes]
) -> None:
    digest, wasm = orders
    directory = tmp_path / "cache" / "artifacts"
    cache = ArtifactCache(directory, engine, FLAGS)
    fetch, calls = _counting(wasm)

    module = cache.load(digest, fetch)

    flags_key = hashlib.sha256(FLAGS.encode()).hexdigest()[:16]
    expected = directory / f"{digest}.wasmtime-{WASMTIME_VERSION}.{flags_key}.cwasm"
    assert cache.path_for(digest) == expected
    # The artifact and its manifest sidecar (compiled artifacts drop custom sections); no temp
    # file is left behind.
    assert sorted(p.name for p in directory.iterdir()) == sorted(
        [expected.name, f"{digest}.manifest.json"]
    )
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    assert calls == [1]
    assert "amber_workflow.orders" in _export_names(module)


def test_a_second_load_deserialises_without_fetching(
    tmp_path: Path, engine: wasmtime.Engine, orders: tuple[str, bytes]
) -> None:
    digest, wasm = orders
    compiled = ArtifactCache(tmp_path, engine, FLAGS).load(digest, lambda: wasm)
    written = ArtifactCache(tmp_path, engine, FLAGS).path_for(digest).read_bytes()

    loaded = ArtifactCache(tmp_path, engine, FLAGS).load(digest, _never)

    assert _export_names(loaded) == _export_names(compiled)
    assert _import_signatures(loaded) == _import_signatures(compiled)
    assert ArtifactCache(tmp_path, engine, FLAGS).path_for(digest).read_bytes() == written


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(lambda artifact: b"junk" * 100, id="junk"),
        pytest.param(lambda artifact: b"", id="empty"),
        pytest.param(lambda artifact: artifact[:64], id="truncated-header"),
        pytest.param(lambda artifact: artifact[: len(artifact) // 2], id="truncated-half"),
    ],
)
def test_a_damaged_artifact_is_discarded_and_rebuilt(
    tmp_path: Path,
    engine: wasmtime.Engine,
    orders: tuple[str, bytes],
    damage: Callable[[bytes], bytes],
) -> None:
    digest, wasm = orders
    cache = ArtifactCache(tmp_path, engine, FLAGS)
    cache.load(digest, lambda: wasm)
    path = cache.path_for(digest)
    good = path.read_bytes()
    path.write_bytes(damage(good))
    fetch, calls = _counting(wasm)

    module = cache.load(digest, fetch)

    assert calls == [1]
    assert "amber_alloc" in _export_names(module)
    assert path.read_bytes() == good
    assert _export_names(cache.load(digest, _never)) == _export_names(module)


def test_an_artifact_from_an_incompatible_engine_is_rebuilt(
    tmp_path: Path, engine: wasmtime.Engine, orders: tuple[str, bytes]
) -> None:
    digest, wasm = orders
    config = wasmtime.Config()
    config.consume_fuel = True
    fuel_engine = wasmtime.Engine(config)
    plain = ArtifactCache(tmp_path / "plain", engine, FLAGS)
    fuelled = ArtifactCache(tmp_path / "fuel", fuel_engine, FLAGS)
    plain.load(digest, lambda: wasm)
    # As if the flags string had failed to change with the engine's configuration.
    fuelled.path_for(digest).write_bytes(plain.path_for(digest).read_bytes())
    fetch, calls = _counting(wasm)

    fuelled.load(digest, fetch)

    assert calls == [1]
    assert fuelled.path_for(digest).read_bytes() != plain.path_for(digest).read_bytes()
    fuelled.load(digest, _never)


def test_bytes_that_do_not_match_the_digest_are_refused(
    tmp_path: Path, engine: wasmtime.Engine, modules: dict[str, bytes]
) -> None:
    digest = hashlib.sha256(modules["orders"]).hexdigest()
    cache = ArtifactCache(tmp_path, engine, FLAGS)

    with pytest.raises(InvalidModule, match=f"do not match digest {digest}"):
        cache.load(digest, lambda: modules["chain"])

    assert list(tmp_path.iterdir()) == []


def test_bytes_that_do_not_compile_are_refused(tmp_path: Path, engine: wasmtime.Engine) -> None:
    wasm = b"\x00asm\x01\x00\x00\x00\x01\x02\xff\xff"
    digest = hashlib.sha256(wasm).hexdigest()
    cache = ArtifactCache(tmp_path, engine, FLAGS)

    with pytest.raises(InvalidModule, match="does not compile"):
        cache.load(digest, lambda: wasm)

    assert list(tmp_path.iterdir()) == []


def test_engine_flags_are_part_of_the_artifact_path(
    tmp_path: Path, engine: wasmtime.Engine, orders: tuple[str, bytes]
) -> None:
    digest, wasm = orders
    one = ArtifactCache(tmp_path, engine, "fuel=1")
    other = ArtifactCache(tmp_path, engine, "fuel=0")
    same = ArtifactCache(tmp_path, engine, "fuel=1")

    assert one.path_for(digest) != other.path_for(digest)
    assert one.path_for(digest) == same.path_for(digest)
    assert one.path_for(digest).parent == other.path_for(digest).parent == tmp_path
    one.load(digest, lambda: wasm)
    fetch, calls = _counting(wasm)
    other.load(digest, fetch)  # a different configuration never reuses the other's artifact
    assert calls == [1]
    assert len(list(tmp_path.glob(f"{digest}.*.cwasm"))) == 2
