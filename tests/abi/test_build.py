"""The guest build tool (tools/_build.py): manifest section, checks, reproducibility, errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import wasmtime

from amber.abi import MANIFEST_SECTION, custom_sections
from amber.tools._build import BuildError, BuildResult, build_module
from tests.abi.conftest import SOURCES


def custom_section(module: bytes, name: str) -> bytes | None:
    return next((payload for n, payload in custom_sections(module) if n == name), None)


SIZE_BUDGET = 24_000  # bytes; the guests are ~11-22 KB. A jump means the SDK bloated.


def test_manifest_section_matches_the_source(built: dict[str, BuildResult]) -> None:
    orders = built["orders"]
    data = orders.output.read_bytes()
    payload = custom_section(data, MANIFEST_SECTION)
    assert payload == json.dumps(orders.manifest, separators=(",", ":")).encode()
    assert json.loads(payload) == {
        "abi": 1,
        "workflows": ["orders"],
        "activities": [
            "reserve_inventory",
            "charge_payment",
            "ship_order",
            "send_confirmation",
            "release_inventory",
        ],
    }
    assert data.count(MANIFEST_SECTION.encode()) == 1
    wasmtime.Module.validate(wasmtime.Engine(), data)


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_exports_match_manifest_and_imports_are_minimal(
    built: dict[str, BuildResult], name: str
) -> None:
    result = built[name]
    module = wasmtime.Module.from_file(wasmtime.Engine(), str(result.output))
    exports = {e.name for e in module.exports}
    expected = {f"amber_workflow.{n}" for n in result.manifest["workflows"]}
    expected |= {f"amber_activity.{n}" for n in result.manifest["activities"]}
    assert exports == expected | {"memory", "amber_alloc"}
    assert all(i.module == "amber" for i in module.imports)
    assert result.size == len(result.output.read_bytes()) < SIZE_BUDGET


def test_modules_import_only_what_they_use(built: dict[str, BuildResult]) -> None:
    def imports(name: str) -> set[str]:
        module = wasmtime.Module.from_file(wasmtime.Engine(), str(built[name].output))
        return {i.name for i in module.imports if i.name is not None}

    waits = {"await_results", "await_next", "take"}  # every workflow awaits: see amber__wf_wait
    assert imports("orders") == waits | {"now", "log"}
    assert imports("chain") == waits
    assert imports("hostile") == waits | {"sleep", "publish", "now", "log"}
    assert imports("shipment") == waits | {"publish"}
    assert imports("payments") == waits | {
        "http_request",
        "take",
        "heartbeat",
        "cancel_requested",
        "sleep",
    }


def test_capabilities_survive_the_build(built: dict[str, BuildResult]) -> None:
    payments = built["payments"]
    payload = custom_section(payments.output.read_bytes(), MANIFEST_SECTION)
    assert payload is not None
    assert json.loads(payload) == {
        "abi": 1,
        "workflows": ["pay"],
        "activities": ["charge", "slow_charge"],
        "capabilities": {"http": {"allow": ["127.0.0.1", "localhost"]}},
    }


def test_builds_are_reproducible(tmp_path: Path, built: dict[str, BuildResult]) -> None:
    source, _ = SOURCES["orders"]
    again = build_module(source, tmp_path / "elsewhere" / "o.wasm")
    assert again.output.read_bytes() == built["orders"].output.read_bytes()
    assert again.sha256 == built["orders"].sha256
    assert built["orders_reordered"].sha256 != built["orders"].sha256


def _build_text(tmp_path: Path, text: str) -> BuildResult:
    source = tmp_path / "guest.c"
    source.write_text('#include "amber.h"\n' + text)
    return build_module(source, tmp_path / "guest.wasm")


ACTIVITY = "AMBER_ACTIVITY(a) { return amber_act_complete(act, args); }\n"


def test_syntax_error_reports_compiler_output(tmp_path: Path) -> None:
    with pytest.raises(BuildError, match="compilation failed") as error:
        _build_text(tmp_path, "int broken( { return; }\n")
    assert "error:" in error.value.stderr
    assert "guest.c" in str(error.value)
    assert not (tmp_path / "guest.wasm").exists()


def test_missing_manifest(tmp_path: Path) -> None:
    with pytest.raises(BuildError, match="no manifest found"):
        _build_text(tmp_path, ACTIVITY)


@pytest.mark.parametrize(
    ("manifest", "message"),
    [
        ('{"abi": 2, "workflows": [], "activities": ["a"]}', "'abi' must be 1"),
        ('{"abi": true, "workflows": [], "activities": ["a"]}', "'abi' must be 1"),
        ('{"abi": 1, "activities": ["a"]}', "'workflows' must be a list"),
        ('{"abi": 1, "workflows": [], "activities": []}', "no workflows and no activities"),
        ('{"abi": 1, "workflows": [], "activities": ["a", "a"]}', "duplicate names"),
        ('{"abi": 1, "workflows": [], "activities": ["a"], "abi": 1}', "not valid JSON"),
        ("{abi: 1}", "not valid JSON"),
        ('{"abi": 1, "workflows": [], "activities": ["a", "9x"]}', "invalid name '9x'"),
        ('{"abi": 1, "workflows": ["w"], "activities": ["a"]}', "declares amber_workflow.w but"),
        ('{"abi": 1, "workflows": [], "activities": ["a", "b"]}', "declares amber_activity.b"),
    ],
)
def test_bad_manifests(tmp_path: Path, manifest: str, message: str) -> None:
    with pytest.raises(BuildError, match=message):
        _build_text(tmp_path, f"AMBER_MANIFEST({manifest})\n{ACTIVITY}")


def test_undeclared_export(tmp_path: Path) -> None:
    text = 'AMBER_MANIFEST({"abi": 1, "workflows": [], "activities": ["b"]})\n'
    text += ACTIVITY + ACTIVITY.replace("(a)", "(b)")
    with pytest.raises(BuildError, match=r"exports amber_activity\.a, which its manifest"):
        _build_text(tmp_path, text)


def test_foreign_import(tmp_path: Path) -> None:
    text = 'AMBER_MANIFEST({"abi": 1, "workflows": [], "activities": ["a"]})\n'
    text += '__attribute__((import_module("env"), import_name("x"))) int x(void);\n'
    text += "AMBER_ACTIVITY(a) { return x() ? amber_act_complete(act, args) : "
    text += 'amber_act_fail(act, "t", "m", true); }\n'
    with pytest.raises(BuildError, match=r"imports env\.x"):
        _build_text(tmp_path, text)


def test_defines_must_be_identifiers(tmp_path: Path) -> None:
    source, _ = SOURCES["chain"]
    with pytest.raises(BuildError, match="not a C identifier"):
        build_module(source, tmp_path / "c.wasm", defines={"A B": "1"})


def test_missing_source(tmp_path: Path) -> None:
    with pytest.raises(BuildError, match="no such source file"):
        build_module(tmp_path / "nope.c", tmp_path / "nope.wasm")


def test_no_exports_guest_is_valid_but_has_no_abi_surface() -> None:
    wat = (Path(__file__).resolve().parents[1] / "guests" / "no_exports.wat").read_text()
    data = bytes(wasmtime.wat2wasm(wat))
    module = wasmtime.Module(wasmtime.Engine(), data)
    assert {e.name for e in module.exports} == {"memory", "add"}
    assert custom_section(data, MANIFEST_SECTION) is None
