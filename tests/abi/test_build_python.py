"""`amber build x.py` (tools/_build_python.py): what it refuses, and why, before it spends
half a minute in componentize-py; and what a successful build holds."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import pytest

from amber.abi import MANIFEST_SECTION, custom_sections, is_component
from amber.tools._build import BuildError, BuildResult
from amber.tools._build_python import build_python_guest
from tests.conftest import ROOT

HEADER = "from amber_sdk import activity, workflow\n\n"


def _build(tmp_path: Path, source: str, name: str = "guest.py") -> BuildResult:
    path = tmp_path / name
    path.write_text(source)
    return build_python_guest(path, tmp_path / "out.wasm")


def test_a_workflow_naming_an_activity_nobody_declares_is_refused_at_build(
    tmp_path: Path,
) -> None:
    source = HEADER + (
        "@activity.defn\ndef charge(args):\n    return args\n\n\n"
        "@workflow.defn\ndef orders(payload):\n"
        '    return workflow.execute_activity("chrage", payload)\n'
    )
    with pytest.raises(BuildError) as caught:
        _build(tmp_path, source)
    message = str(caught.value)
    assert "guest.py:10" in message and "'chrage'" in message
    assert "declared: charge" in message
    assert not (tmp_path / "out.wasm").exists()


def test_a_workflow_passing_a_function_that_is_no_activity_is_refused_at_build(
    tmp_path: Path,
) -> None:
    source = HEADER + (
        "def charge(args):\n    return args\n\n\n"
        "@activity.defn(name='refund')\ndef give_back(args):\n    return args\n\n\n"
        "@workflow.defn\ndef orders(payload):\n"
        "    workflow.execute_activity(give_back, payload)\n"
        "    return workflow.execute_activity(charge, payload)\n"
    )
    with pytest.raises(BuildError) as caught:
        _build(tmp_path, source)
    message = str(caught.value)
    assert "guest.py:15" in message and "decorate charge with @activity.defn" in message
    assert not (tmp_path / "out.wasm").exists()


def test_a_module_a_function_imports_that_the_guest_cannot_have_fails_the_build(
    tmp_path: Path,
) -> None:
    source = HEADER + (
        "@activity.defn\n"
        "def use(args):\n"
        "    try:\n"
        "        import ujson_not_here  # a fallback below: no failure\n"
        "    except ImportError:\n"
        "        pass\n"
        "    import no_such_module_xyz\n"
        "    return no_such_module_xyz.f()\n"
    )
    with pytest.raises(BuildError) as refused:
        _build(tmp_path, source)
    message = str(refused.value)
    assert message.startswith(f"{tmp_path / 'guest.py'}:9 imports 'no_such_module_xyz' inside")
    assert "put the import in a try block" in message  # what to do if it never runs there
    assert "ujson_not_here" not in message and "\n" not in message  # one line, no backtrace


def test_a_module_that_does_not_import_shows_its_traceback(tmp_path: Path) -> None:
    with pytest.raises(BuildError, match="importing the module failed") as caught:
        _build(tmp_path, HEADER + "@workflow.defn\ndef broken(payload)\n    return 1\n")
    assert "SyntaxError" in caught.value.stderr


def test_a_module_without_workflows_or_activities_is_refused(tmp_path: Path) -> None:
    with pytest.raises(BuildError, match="declares no workflow or activity"):
        _build(tmp_path, "VALUE = 1\n")


def test_a_bad_name_is_refused_where_it_is_declared(tmp_path: Path) -> None:
    source = HEADER + '@workflow.defn(name="no spaces")\ndef w(payload):\n    return 1\n'
    with pytest.raises(BuildError, match="no spaces"):
        _build(tmp_path, source)


def test_the_file_name_must_be_a_module_name(tmp_path: Path) -> None:
    with pytest.raises(BuildError, match="must be a Python module name"):
        _build(tmp_path, HEADER, name="my-guest.py")


def test_the_cli_reports_a_build_error_on_one_line_and_exits_2(tmp_path: Path) -> None:
    source = tmp_path / "empty.py"
    source.write_text("VALUE = 1\n")
    done = subprocess.run(
        [sys.executable, "-m", "amber.tools.cli", "build", str(source)],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2
    assert "declares no workflow or activity" in done.stderr


def test_a_built_component_carries_its_manifest_for_upload(
    python_built: Mapping[str, BuildResult],
) -> None:
    built = python_built["py_guest"]
    data = built.output.read_bytes()
    assert is_component(data) and built.size == len(data) > 10_000_000
    (payload,) = [p for name, p in custom_sections(data) if name == MANIFEST_SECTION]
    manifest = json.loads(payload)
    assert manifest == dict(built.manifest)
    assert manifest["abi"] == 1
    assert {"hello", "gated", "spins"} <= set(manifest["workflows"])
    assert {"greet", "flaky", "dials"} <= set(manifest["activities"])


def test_the_imports_a_build_reads_inside_functions_and_which_may_fail() -> None:
    import ast

    from amber.tools._guest_imports import late_imports

    source = (
        "import json\n"  # the top level runs in the build anyway
        "def f():\n"
        "    import fractions\n"
        "    from xml.etree import ElementTree\n"
        "    from . import sibling\n"  # the guest's own package
        "    try:\n"
        "        import ujson\n"
        "    except ImportError:\n"
        "        import simplejson\n"  # a handler is not guarded
        "    if TYPE_CHECKING:\n"
        "        import typing_extensions\n"
        "    g = lambda: __import__('x')\n"
        "class C:\n"
        "    def m(self):\n"
        "        import statistics\n"
        "def h():\n"
        "    import xml.etree.ElementTree\n"  # firmer than the from-import's maybe-a-name
    )
    found = {i.module: (i.guarded, i.maybe_name, i.where) for i in
             late_imports(ast.parse(source), Path("guest.py"))}  # fmt: skip
    assert found == {
        "fractions": (False, False, "guest.py:3"),
        "xml.etree": (False, False, "guest.py:4"),
        "xml.etree.ElementTree": (False, False, "guest.py:17"),
        "ujson": (True, False, "guest.py:7"),
        "simplejson": (False, False, "guest.py:9"),
        "typing_extensions": (True, False, "guest.py:11"),
        "statistics": (False, False, "guest.py:15"),
    }
