"""Server-side policy knobs, with the defaults a user gets without configuring anything."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import timedelta

from amber.abi import RetryOptions


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryPolicy:
    """Exponential backoff: initial × coefficient^(attempt-1), capped at maximum."""

    initial: timedelta = timedelta(seconds=1)
    coefficient: float = 2.0
    maximum: timedelta = timedelta(seconds=100)
    max_attempts: int = 5
    """Activities only; 0 means unlimited. Workflow tasks retry until the poison policy
    diverts them."""

    non_retryable: tuple[str, ...] = ()
    """Error types that fail the activity at once."""

    def delay(self, attempt: int) -> timedelta:
        """The wait before attempt `attempt + 1`, after attempt `attempt` failed.

        Capped before it is computed, so attempt 1,000 of an unlimited policy is simply the
        maximum (coefficient ** attempt would overflow a float long before that).
        """
        initial, maximum = self.initial.total_seconds(), self.maximum.total_seconds()
        exponent = max(attempt - 1, 0)
        if initial <= 0:
            return timedelta(0)
        if self.coefficient > 1 and exponent >= math.log(max(maximum / initial, 1.0)) / math.log(
            self.coefficient
        ):
            return self.maximum
        return min(timedelta(seconds=initial * self.coefficient**exponent), self.maximum)

    def overlay(self, options: RetryOptions) -> RetryPolicy:
        """This policy with an activity's own retry options on top (Temporal's defaults: the
        maximum interval is 100 × the initial one unless given)."""
        initial = (
            self.initial
            if options.initial_ms is None
            else timedelta(milliseconds=options.initial_ms)
        )
        if options.max_interval_ms is not None:
            maximum = timedelta(milliseconds=options.max_interval_ms)
        elif options.initial_ms is not None:
            maximum = initial * 100
        else:
            maximum = self.maximum
        return RetryPolicy(
            initial=initial,
            coefficient=self.coefficient if options.coefficient is None else options.coefficient,
            maximum=maximum,
            max_attempts=self.max_attempts
            if options.max_attempts is None
            else options.max_attempts,
            non_retryable=options.non_retryable or self.non_retryable,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class PoisonPolicy:
    """When crashing tasks are poisoned and their runs suspended."""

    crashes_to_poison: int = 3
    surgical_delays: tuple[timedelta, ...] = field(
        default=(timedelta(minutes=1), timedelta(minutes=5), timedelta(minutes=30))
    )
    """Visibility delay before each surgical attempt (the last repeats)."""
    suspend_after: timedelta = timedelta(hours=24)
    """A poisoned task still failing this long after it was poisoned suspends its run."""
    crash_backoff: timedelta = timedelta(seconds=1)
    """Delay before retrying a crash that has not poisoned its task yet (doubles per crash)."""
    remember_for: timedelta = timedelta(hours=24)
    """A guest fault's fingerprint that crashed `crashes_to_poison` times within this window,
    in any runs (closed ones too), poisons the next task that crashes with it at its first
    crash: a bug hitting many runs at once costs the healthy pool one attempt per run, not
    three, and a terminated run does not take what was learnt with it."""

    def surgical_delay(self, failures: int) -> timedelta:
        """The wait before the surgical attempt after `failures` surgical failures."""
        return self.surgical_delays[min(failures, len(self.surgical_delays) - 1)]


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
    """How often the server looks for expired leases, timeouts and due timers."""
    history_warn_events: int = 10_240
    history_fail_events: int = 51_200
    history_warn_bytes: int = 10 * 1024 * 1024
    history_fail_bytes: int = 50 * 1024 * 1024
    """A run whose history passes a warn limit gets one HistoryWarning event; past a fail limit
    it fails with `amber.HistoryLimitExceeded` (Temporal's limits: 10,240 / 51,200 events)."""
    poison: PoisonPolicy = field(default_factory=PoisonPolicy)
    """When crashing tasks are poisoned (surgical pool) and their runs suspended."""
