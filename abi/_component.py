"""The component form of ABI v1, for Python guests (`abi/wit/amber.wit`).

A component exports two functions, `workflow(name, envelope)` and `activity(name, envelope)`,
taking and returning the same msgpack envelopes as a core module's entry points, and imports
only the `amber:guest/host` interface and WASI 0.2 (which the host stubs deterministically).
Envelopes cross as strings holding one byte per character (latin-1): a string is one copy,
where wasmtime-py converts a `list<u8>` element by element.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

COMPONENT_WIT: Final = Path(__file__).resolve().parent / "wit"
"""The WIT package a Python guest is built against (world `guest`)."""
COMPONENT_HOST_INTERFACE: Final = "amber:guest/host@1.0.0"
COMPONENT_WASI_PREFIX: Final = "wasi:"
"""Every other import a component may have: WASI interfaces, stubbed or trapping."""
COMPONENT_EXPORTS: Final = ("workflow", "activity")


def latin1_text(data: bytes) -> str:
    """Bytes as the string that carries them across the component boundary."""
    return data.decode("latin-1")


def latin1_bytes(text: str) -> bytes:
    """The bytes a string from a component carries; `ValueError` if it holds a character past
    U+00FF (a guest that did not encode its envelope as the contract says)."""
    try:
        return text.encode("latin-1")
    except UnicodeEncodeError as exc:
        raise ValueError(
            f"a character past U+00FF at offset {exc.start}: not a latin-1 envelope"
        ) from None
