"""Durations, activity options and child options in the form the ABI's command arrays carry.

Only what the caller gave is written, and keys are written in the order `amber_commands.h`
writes them (`amber_activity_options_encode`, `amber__write_retry`, `amber_start_child`), which is
also the field order of the host's own `ActivityOptions`/`RetryOptions`. A workflow built with
either SDK therefore issues the same bytes for the same options.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from enum import StrEnum

__all__ = [
    "ActivityOptions",
    "Duration",
    "ParentClosePolicy",
    "RetryPolicy",
    "child_options",
    "to_ms",
]

Duration = int | float | timedelta
"""Seconds (int or float) or a `timedelta`."""


def to_ms(value: Duration, what: str) -> int:
    """`value` in whole milliseconds (rounded to the nearest); refuses negative values."""
    if isinstance(value, timedelta):
        micros = (value.days * 86_400 + value.seconds) * 1_000_000 + value.microseconds
        ms = (micros + 500) // 1000
    elif isinstance(value, int | float) and not isinstance(value, bool):
        if value != value or value in (float("inf"), float("-inf")):
            raise ValueError(f"{what} must be a finite duration, not {value!r}")
        ms = value * 1000 if isinstance(value, int) else round(value * 1000)
    else:
        raise TypeError(f"{what} must be seconds (int or float) or a timedelta, not {value!r}")
    if ms < 0:
        raise ValueError(f"{what} must not be negative ({value!r})")
    return ms


def _positive_ms(value: Duration | None, what: str) -> int | None:
    if value is None:
        return None
    ms = to_ms(value, what)
    if ms <= 0:
        raise ValueError(f"{what} must be at least 1 ms ({value!r})")
    return ms


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryPolicy:
    """How the host retries a failed activity attempt. `None` fields are left out, so the
    host's defaults apply: 1 s initial interval, coefficient 2.0, maximum interval 100 × the
    initial one, 5 attempts, every error type retryable."""

    initial_interval: Duration | None = None
    """Wait before the first retry."""
    backoff_coefficient: float | None = None
    """Factor applied to the interval after each retry (1 to 100)."""
    maximum_interval: Duration | None = None
    """Upper bound of the interval."""
    maximum_attempts: int | None = None
    """Attempts in all, the first included (1: no retries; 0: unlimited, as in Temporal)."""
    non_retryable_error_types: Sequence[str] = ()
    """Error types never retried (an empty list writes nothing)."""

    def __post_init__(self) -> None:
        types = self.non_retryable_error_types
        if isinstance(types, str) or not all(isinstance(t, str) for t in types):
            raise TypeError("non_retryable_error_types must be a sequence of str")
        object.__setattr__(self, "non_retryable_error_types", tuple(types))
        coefficient = self.backoff_coefficient
        if coefficient is not None and (
            isinstance(coefficient, bool)
            or not isinstance(coefficient, int | float)
            or not 1.0 <= coefficient <= 100.0
        ):
            raise ValueError(
                f"backoff_coefficient must be a number in [1, 100], not {coefficient!r}"
            )
        attempts = self.maximum_attempts
        if attempts is not None and (
            isinstance(attempts, bool) or not isinstance(attempts, int) or attempts < 0
        ):
            raise ValueError(
                f"maximum_attempts must be an int >= 0 (0: unlimited), not {attempts!r}"
            )
        _positive_ms(self.initial_interval, "initial_interval")
        _positive_ms(self.maximum_interval, "maximum_interval")

    def to_map(self) -> dict[str, object]:
        """The ABI's `retry` map: initial_ms, coefficient, max_interval_ms, max_attempts,
        non_retryable, in that order, each only when set."""
        out: dict[str, object] = {}
        initial = _positive_ms(self.initial_interval, "initial_interval")
        if initial is not None:
            out["initial_ms"] = initial
        if self.backoff_coefficient is not None:
            out["coefficient"] = float(self.backoff_coefficient)
        maximum = _positive_ms(self.maximum_interval, "maximum_interval")
        if maximum is not None:
            out["max_interval_ms"] = maximum
        if self.maximum_attempts is not None:
            out["max_attempts"] = self.maximum_attempts
        if self.non_retryable_error_types:
            out["non_retryable"] = list(self.non_retryable_error_types)
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class ActivityOptions:
    """The timeouts and retry policy of one activity command, as the user gave them."""

    start_to_close_timeout: Duration | None = None
    """One attempt, from start to result."""
    schedule_to_close_timeout: Duration | None = None
    """All attempts together, from scheduling to result."""
    schedule_to_start_timeout: Duration | None = None
    """Waiting in the queue."""
    heartbeat_timeout: Duration | None = None
    """Longest gap between two heartbeats."""
    retry_policy: RetryPolicy | None = None

    def to_map(self) -> dict[str, object] | None:
        """The ABI's options map (start_to_close_ms, schedule_to_close_ms,
        schedule_to_start_ms, heartbeat_ms, retry, in that order, each only when set), or None
        when nothing is set: the command then has no options element, as in the C SDK."""
        out: dict[str, object] = {}
        for key, value, what in (
            ("start_to_close_ms", self.start_to_close_timeout, "start_to_close_timeout"),
            ("schedule_to_close_ms", self.schedule_to_close_timeout, "schedule_to_close_timeout"),
            ("schedule_to_start_ms", self.schedule_to_start_timeout, "schedule_to_start_timeout"),
            ("heartbeat_ms", self.heartbeat_timeout, "heartbeat_timeout"),
        ):
            ms = _positive_ms(value, what)
            if ms is not None:
                out[key] = ms
        if self.retry_policy is not None:
            if not isinstance(self.retry_policy, RetryPolicy):
                raise TypeError(f"retry_policy must be a RetryPolicy, not {self.retry_policy!r}")
            out["retry"] = self.retry_policy.to_map()
        return out or None


class ParentClosePolicy(StrEnum):
    """What happens to a child workflow when its parent closes."""

    TERMINATE = "terminate"
    """The host's default."""
    CANCEL = "cancel"
    ABANDON = "abandon"


def child_options(
    parent_close_policy: ParentClosePolicy | str | None, version: str | None
) -> dict[str, object]:
    """The ABI's child options map (parent_close_policy, version; each only when given). It is
    always written, empty or not, as the C SDK does."""
    out: dict[str, object] = {}
    if parent_close_policy is not None:
        out["parent_close_policy"] = ParentClosePolicy(parent_close_policy).value
    if version is not None:
        if not isinstance(version, str) or not version:
            raise ValueError(f"version must be a module digest (a non-empty str), not {version!r}")
        out["version"] = version
    return out
