"""Activity code's API: `from amber_sdk import activity`, then `@activity.defn`,
`activity.info()`, `activity.heartbeat(...)`, `activity.http(...)`, ... (implemented in
`_activity`)."""

from __future__ import annotations

from ._activity import HEARTBEAT_MAX, defn, heartbeat, http, info, is_cancelled, logger, sleep

__all__ = [
    "HEARTBEAT_MAX",
    "defn",
    "heartbeat",
    "http",
    "info",
    "is_cancelled",
    "logger",
    "sleep",
]
