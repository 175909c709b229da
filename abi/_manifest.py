"""The manifest a module carries in its `amber.manifest` custom section (see abi/README.md)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from ._errors import InvalidInput
from ._wasm import custom_sections

ABI_VERSION = 1
MANIFEST_SECTION = "amber.manifest"
WORKFLOW_EXPORT_PREFIX = "amber_workflow."
ACTIVITY_EXPORT_PREFIX = "amber_activity."
AWAIT_NEXT_DELTA = "delta"
"""In the manifest's `"await_next"` list: the module reads delta answers (abi/README.md)."""
MAX_MANIFEST_BYTES = 64 * 1024
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]{0,127}")
"""What workflow and activity names look like."""


class ManifestError(InvalidInput):
    """The module's manifest is missing, unreadable or inconsistent."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Manifest:
    """What a module declares about itself, read without running it."""

    abi: int
    """ABI version the module speaks."""
    workflows: tuple[str, ...]
    """Workflow type names, each exported as `amber_workflow.<name>`."""
    activities: tuple[str, ...]
    """Activity names, each exported as `amber_activity.<name>`."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Keys this host does not interpret yet, kept verbatim."""

    def workflow_export(self, name: str) -> str:
        return WORKFLOW_EXPORT_PREFIX + name

    def activity_export(self, name: str) -> str:
        return ACTIVITY_EXPORT_PREFIX + name

    def reads_delta(self) -> bool:
        """Whether the module's `await_next` reads delta answers (`"await_next": ["delta"]`)."""
        answers = self.extra.get("await_next")
        return isinstance(answers, list) and AWAIT_NEXT_DELTA in answers

    def to_json(self) -> dict[str, Any]:
        """The manifest as a JSON-ready dict (what is stored and shown)."""
        return {
            **self.extra,
            "abi": self.abi,
            "workflows": list(self.workflows),
            "activities": list(self.activities),
        }


def _names(doc: dict[str, Any], key: str) -> tuple[str, ...]:
    value = doc.get(key)
    if not isinstance(value, list):
        raise ManifestError(f"manifest {key!r} must be a list of names")
    for name in value:
        if not isinstance(name, str) or not NAME.fullmatch(name):
            raise ManifestError(f"invalid name {name!r} in manifest {key!r}")
    if len(set(value)) != len(value):
        raise ManifestError(f"duplicate names in manifest {key!r}")
    return tuple(value)


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [key for key, _ in pairs]
    if len(set(keys)) != len(keys):
        raise ValueError(f"duplicate key among {keys}")
    return dict(pairs)


def parse_manifest(payload: bytes) -> Manifest:
    """Parse and validate a manifest document (the custom section's payload)."""
    if len(payload) > MAX_MANIFEST_BYTES:
        raise ManifestError(f"manifest is {len(payload)} bytes; the limit is {MAX_MANIFEST_BYTES}")
    try:
        doc = json.loads(payload.decode("utf-8"), object_pairs_hook=_no_duplicate_keys)
    except (UnicodeDecodeError, ValueError) as exc:
        raise ManifestError(f"manifest is not valid JSON (UTF-8): {exc}") from exc
    if not isinstance(doc, dict):
        raise ManifestError("manifest must be a JSON object")
    abi = doc.get("abi")
    if type(abi) is not int or abi != ABI_VERSION:
        raise ManifestError(f"manifest 'abi' must be {ABI_VERSION}, got {abi!r}")
    workflows = _names(doc, "workflows")
    activities = _names(doc, "activities")
    if not workflows and not activities:
        raise ManifestError("manifest declares no workflows and no activities")
    extra = {k: v for k, v in doc.items() if k not in ("abi", "workflows", "activities")}
    return Manifest(abi=abi, workflows=workflows, activities=activities, extra=extra)


def read_manifest(module: bytes) -> Manifest:
    """Read the manifest from a module's bytes. Raises `ManifestError` if absent or invalid."""
    found = [payload for name, payload in custom_sections(module) if name == MANIFEST_SECTION]
    if not found:
        raise ManifestError(f"module has no {MANIFEST_SECTION!r} custom section")
    if len(found) > 1:
        raise ManifestError(f"module has {len(found)} {MANIFEST_SECTION!r} sections; expected one")
    return parse_manifest(found[0])
