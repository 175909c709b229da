"""The server's own counters during a bench phase, read from its `/metrics` page: what an
operator scraping it would have seen move (and a check that the engine counts what it does)."""

from __future__ import annotations

import re
import urllib.request
from typing import Final

COUNTERS: Final = {
    "runs_closed": "amber_runs_closed_total",
    "tasks_finished": "amber_tasks_finished_total",
    "rpcs": "amber_rpc_seconds_count",
    "transactions": "amber_db_transaction_seconds_count",
    "stream_batches": "amber_work_batch_items_count",
    "stream_items": "amber_work_batch_items_sum",
}
_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{[^}]*\})? (\S+)$")


def scrape_counters(url: str) -> dict[str, float] | None:
    """Each counter of `COUNTERS` summed over its labels; None without a URL or an answer."""
    if not url:
        return None
    try:
        with urllib.request.urlopen(url, timeout=10) as page:
            text = page.read().decode()
    except OSError:
        return None
    totals = dict.fromkeys(COUNTERS, 0.0)
    by_metric = {metric: key for key, metric in COUNTERS.items()}
    for line in text.splitlines():
        match = _SAMPLE.match(line)
        if match and match.group(1) in by_metric:
            totals[by_metric[match.group(1)]] += float(match.group(2))
    return totals


def counter_deltas(
    before: dict[str, float] | None, after: dict[str, float] | None
) -> dict[str, float] | None:
    """How far each counter moved over the phase."""
    if before is None or after is None:
        return None
    return {key: round(after[key] - before[key]) for key in COUNTERS}
