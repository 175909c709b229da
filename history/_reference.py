"""The payload reference (docs/events.md), generated from the payload classes themselves.

Each section comes from one class: its docstring, and per field the wire key, the annotation as
written in the source, the default, and the attribute docstring. A test compares the committed
file with this output, so the reference cannot drift from what the code writes.
"""

from __future__ import annotations

import ast
import inspect
import json
from functools import cache

import msgspec

from amber.abi import ActivityOptions, RetryOptions

from . import _payloads
from ._payloads import (
    PAYLOAD_TYPES,
    DecisionRecord,
    ParentLink,
    ResetPoint,
    UpgradeDetail,
    VersionChoice,
)

_NESTED: tuple[type[msgspec.Struct], ...] = (
    VersionChoice,
    ParentLink,
    ResetPoint,
    UpgradeDetail,
    DecisionRecord,
    ActivityOptions,
    RetryOptions,
)

_HEADER = """\
# Event payloads

<!-- Generated from history/_payloads.py by history/_reference.py; do not edit by hand.
     Regenerate: AMBER_REGENERATE_DOCS=1 pytest tests/history/test_payload_reference.py -->

A run's history is a sequence of events; each event has a type and a payload, stored as a
msgpack map whose keys are listed below. User data (inputs, arguments, results, signal payloads)
is itself msgpack, kept as bytes. A field at its default is not written; a key a type does not
declare is ignored on read (older engines wrote `max_attempts` in `ActivityScheduled`).
Events that record a command the workflow issued carry its index `cmd`; replay rebuilds the
command from them and compares it with the one the workflow issues again.
"""


def payload_reference() -> str:
    """The whole reference, as markdown."""
    parts = [_HEADER, "## Event types\n"]
    parts += [_section(cls, level=3) for cls in PAYLOAD_TYPES.values()]
    parts.append("## Nested values\n")
    parts += [_section(cls, level=3) for cls in _NESTED]
    return "\n".join(parts)


def _section(cls: type[msgspec.Struct], *, level: int) -> str:
    lines = [f"{'#' * level} {cls.__name__}", "", _docstring(cls), ""]
    fields = msgspec.structs.fields(cls)
    if not fields:
        lines += ["No fields.", ""]
        return "\n".join(lines)
    lines += ["| key | type | default | meaning |", "|---|---|---|---|"]
    notes = _attribute_notes(cls)
    for f in fields:
        annotation, meaning = notes.get(f.name, ("", ""))
        annotation = annotation.replace("|", "\\|")
        lines.append(f"| `{f.encode_name}` | `{annotation}` | {_default(f)} | {meaning} |")
    lines.append("")
    return "\n".join(lines)


def _default(f: msgspec.structs.FieldInfo) -> str:
    """A field's default in its wire form (what reading a payload without the key gives)."""
    if f.default is msgspec.NODEFAULT:
        return "required"
    if f.default is None:
        return "absent"
    return f"`{json.dumps(msgspec.to_builtins(f.default), sort_keys=True)}`"


def _docstring(cls: type) -> str:
    return " ".join((inspect.getdoc(cls) or "").split())


@cache
def _attribute_notes(cls: type) -> dict[str, tuple[str, str]]:
    """Field name -> (annotation as written, attribute docstring), along the class's MRO."""
    notes: dict[str, tuple[str, str]] = {}
    for klass in reversed(cls.__mro__):
        if klass.__module__ not in (_payloads.__name__, ActivityOptions.__module__):
            continue
        tree = ast.parse(inspect.getsource(klass))
        body = tree.body[0].body  # type: ignore[attr-defined]
        for node, following in zip(body, [*body[1:], None], strict=True):
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                doc = ""
                if (
                    isinstance(following, ast.Expr)
                    and isinstance(following.value, ast.Constant)
                    and isinstance(following.value.value, str)
                ):
                    doc = " ".join(following.value.value.split())
                notes[node.target.id] = (ast.unparse(node.annotation), doc.replace("|", "\\|"))
    return notes
