"""Decoding a workflow's output envelope when its commands begin as in its last one.

Use `decode_workflow_output_after(raw, known)` where one run's outputs are decoded in turn (a
worker activating the run step after step): it gives exactly what `decode_workflow_output(raw)`
gives, or raises what that raises, and the `KnownCommands` to pass with the run's next output.

Why: every output lists each command the workflow issued since its start, so decoding and
validating all of them again made each step cost time in proportion to the run's length. A
command whose bytes are those of the last output's command at the same position is the same
command (msgpack values are prefix-free, so the bytes of the last output's items, found at the
start of this output's array, are those items), and is taken over; only the new ones are
parsed.

How: msgpack's streaming reader (`_codec.unpacker`) reads the map as the C and Python SDKs
write it, "status" then "commands" first; where the commands array opens with the last
output's item bytes, those items are skipped and their parsed commands reused. Anything else —
another key order, a key read twice, bytes that do not decode, a command refused — is decoded
again by `decode_workflow_output`, so the error (or result) is always the plain decoder's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ._codec import UNPACK_ERRORS, unpacker
from ._commands import Command, MalformedEnvelope, parse_command
from ._envelopes import (
    WorkflowOutcome,
    WorkflowStatus,
    decode_workflow_output,
    workflow_outcome,
    workflow_status,
)

_FIRST = ("status", "commands")


@dataclass(frozen=True, slots=True)
class KnownCommands:
    """The commands of a run's last output, with their bytes (empty: nothing known)."""

    raw: bytes = b""
    """The array items' bytes, concatenated."""
    commands: tuple[Command, ...] = ()


NOTHING_KNOWN = KnownCommands()


def decode_workflow_output_after(
    raw: bytes, known: KnownCommands
) -> tuple[WorkflowOutcome, KnownCommands]:
    """`decode_workflow_output(raw)`, taking over the commands `known` holds where this output
    begins with them; with the `KnownCommands` for the run's next output."""
    try:
        read = _read(raw, known)
    except MalformedEnvelope:
        read = None
    except UNPACK_ERRORS:
        read = None
    if read is None:  # the plain decoder says what is wrong (or decodes an unusual layout)
        return decode_workflow_output(raw), NOTHING_KNOWN
    return read


def _read(raw: bytes, known: KnownCommands) -> tuple[WorkflowOutcome, KnownCommands] | None:
    reader = unpacker(raw)
    fields = reader.read_map_header()
    if fields < 2 or reader.unpack() != _FIRST[0]:
        return None
    doc: dict[str, Any] = {"status": reader.unpack()}
    if reader.unpack() != _FIRST[1]:
        return None
    status: WorkflowStatus = workflow_status(doc)
    count = reader.read_array_header()
    start = reader.tell()
    taken = len(known.commands)
    if taken and taken <= count and raw.startswith(known.raw, start):
        for _ in range(taken):
            reader.skip()
        commands = list(known.commands)
    else:
        commands = []
    for index in range(len(commands), count):
        commands.append(parse_command(index, reader.unpack()))
    items_end = reader.tell()
    for _ in range(fields - 2):
        key = reader.unpack()
        if type(key) is not str or key in doc or key in _FIRST:
            return None  # a key of another type, or twice: the plain decoder's call
        doc[key] = reader.unpack()
    if reader.tell() != len(raw):
        return None
    parsed = tuple(commands)
    return workflow_outcome(status, parsed, doc), KnownCommands(raw[start:items_end], parsed)
