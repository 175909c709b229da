"""What `amber status` shows: the server, its database, its URLs, the workers it serves and
the depth of every queue."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from amber.history import QueueGauge


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkerSeen:
    """A worker that polled this server lately, or reported and asked for its next task."""

    worker_id: str
    queue: str
    pool: str
    last_seen: datetime


QueueDepth = QueueGauge
"""One queue in one pool, as the store holds it now (the store's own gauge)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerStatus:
    """A server's view of itself."""

    version: str
    database_ok: bool
    database_detail: str
    console_url: str
    """Empty when the server serves no web pages."""
    metrics_url: str
    """Empty when the server serves no metrics."""
    workers: tuple[WorkerSeen, ...]
    queues: tuple[QueueDepth, ...]
