"""Server-side policy knobs, with the defaults a user gets without configuring anything."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryPolicy:
    """Exponential backoff: initial × coefficient^(attempt-1), capped at maximum."""

    initial: timedelta = timedelta(seconds=1)
    coefficient: float = 2.0
    maximum: timedelta = timedelta(seconds=100)
    max_attempts: int = 5
    """Activities only; 0 means unlimited. Workflow tasks retry until issue #5's poison policy."""

    def delay(self, attempt: int) -> timedelta:
        """The wait before attempt `attempt + 1`, after attempt `attempt` failed."""
        factor = self.coefficient ** max(attempt - 1, 0)
        return min(self.initial * factor, self.maximum)


@dataclass(frozen=True, slots=True, kw_only=True)
class EngineSettings:
    """How the server schedules, leases and retries work."""

    lease: timedelta = timedelta(seconds=30)
    """How long a worker holds a task without a heartbeat before it is presumed lost."""
    activity_retry: RetryPolicy = RetryPolicy()
    workflow_retry: RetryPolicy = RetryPolicy(maximum=timedelta(seconds=60), max_attempts=0)
    max_payload_bytes: int = 2 * 1024 * 1024
    """Inputs, arguments and results above this are refused before anything is written."""
    default_queue: str = "main"
    sweep_interval: timedelta = timedelta(seconds=1)
    """How often the server looks for expired leases."""
