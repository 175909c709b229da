"""Amber: durable execution with versioned WebAssembly workflow and activity modules.

The distribution installs one top-level name, `amber`. Its packages are the repository's
top-level folders (`abi`, `history`, `versions`, `runtime`, `surgical_pool`, `tools`), linked
into this folder so that the source tree, the editable install and the wheel all import them as
`amber.<package>`; nothing imports them by their bare names.
"""

from __future__ import annotations

__version__ = "0.1.0"
