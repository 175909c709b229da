"""The payload reference in docs/events.md is the one generated from the payload classes."""

from __future__ import annotations

import os
from pathlib import Path

from amber.history import PAYLOAD_TYPES, EventType, payload_reference

DOC = Path(__file__).resolve().parents[2] / "docs" / "events.md"


def test_the_committed_reference_is_what_the_classes_generate() -> None:
    text = payload_reference()
    if os.environ.get("AMBER_REGENERATE_DOCS"):
        DOC.write_text(text)
    assert DOC.read_text() == text, (
        "docs/events.md differs from the payload classes: regenerate it with"
        " AMBER_REGENERATE_DOCS=1 pytest tests/history/test_payload_reference.py"
    )


def test_every_event_type_has_its_payload_class_and_a_section() -> None:
    text = payload_reference()
    assert set(PAYLOAD_TYPES) == set(EventType)
    for event_type, cls in PAYLOAD_TYPES.items():
        assert cls.__name__ == event_type.value and cls.TYPE is event_type
        assert f"### {event_type.value}\n" in text


def test_a_field_is_documented_with_its_wire_key_and_meaning() -> None:
    text = payload_reference()
    section = text.split("### RunMigrated\n", 1)[1].split("###", 1)[0]
    assert "| `from` | `str` | required |" in section  # the wire key, not the Python name
    assert "The last event the replay check covered" in section
