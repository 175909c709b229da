"""Sweeps process many rows in one transaction; one row that fails must not stop the others.

Each row runs under a savepoint. A failure that is not a database outage rolls back only that
row's work, is logged with the row, and the row is deferred (retried a minute later) so that it
cannot starve the rows queued behind it. Database outages propagate: the transaction is gone
and `Database.run` retries the whole sweep.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from datetime import timedelta
from typing import TypeVar

from amber.history import Cursor, savepoint, step_failure

from ._lifecycle import Wake

_log = logging.getLogger(__name__)

T = TypeVar("T")

RETRY_FAILED_ROW_AFTER = timedelta(minutes=1)
"""How long a row whose sweep failed waits before the next try."""


def each_isolated(
    cur: Cursor,
    rows: Iterable[T],
    step: Callable[[T], list[Wake]],
    *,
    defer: Callable[[T], None],
    what: str,
) -> list[Wake]:
    """Apply `step` to each row, isolating failures; returns the wakes of the rows that worked."""
    wakes: list[Wake] = []
    for row in rows:
        try:
            with savepoint(cur, "amber_sweep_row"):
                wakes += step(row)
        except Exception as exc:
            if step_failure(exc, cur) is None:
                raise
            _log.exception("%s failed for %r; retrying it in %s", what, row, RETRY_FAILED_ROW_AFTER)
            defer(row)
    return wakes
