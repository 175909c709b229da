"""The server's metrics."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from amber.history import StoreGauges

_log = logging.getLogger(__name__)

LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
"""Seconds, from half a millisecond (a cached read) to ten (a long poll, an outage)."""


class ServerMetrics:
    """Everything `/metrics` shows for one server. Thread-safe."""

    def __init__(self, gauges: Callable[[], StoreGauges] | None = None) -> None:
        """`gauges` reads the store's queue depths and poisoned and suspended counts (each
        scrape); without it only the counters are served."""
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.rpc_seconds = Histogram(
            "amber_rpc_seconds", "gRPC calls served, by method and status code",
            ["method", "code"], buckets=LATENCY_BUCKETS, registry=r,
        )  # fmt: skip
        self.transaction_seconds = Histogram(
            "amber_db_transaction_seconds",
            "Database transactions (retries included), by outcome (committed, failed)",
            ["outcome"], buckets=LATENCY_BUCKETS, registry=r,
        )  # fmt: skip
        self._runs_started = Counter("amber_runs_started", "Runs started", registry=r)
        self._runs_closed = Counter(
            "amber_runs_closed", "Runs closed, by status", ["status"], registry=r
        )
        self._tasks = Counter(
            "amber_tasks_finished",
            "Task attempts recorded, by kind and outcome (ok, or the failure reason)",
            ["kind", "outcome"], registry=r,
        )  # fmt: skip
        self._fuel = Counter(
            "amber_fuel_used", "Fuel the guests reported using, by task kind", ["kind"], registry=r
        )
        self._batch_items = Histogram(
            "amber_work_batch_items",
            "Items per batch on the workers' streams (a batch's reports commit together)",
            buckets=(1, 2, 4, 8, 16, 32, 64), registry=r,
        )  # fmt: skip
        self._lease_expiries = Counter(
            "amber_lease_expiries", "Leases that ran out (the worker presumed lost)", registry=r
        )
        if gauges is not None:
            r.register(_StoreCollector(gauges))

    def run_started(self) -> None:
        self._runs_started.inc()

    def run_closed(self, status: str) -> None:
        self._runs_closed.labels(status).inc()

    def task_finished(self, kind: str, outcome: str, fuel: int) -> None:
        self._tasks.labels(kind, outcome).inc()
        if fuel > 0:
            self._fuel.labels(kind).inc(fuel)

    def leases_expired(self, count: int) -> int:
        """Count `count` expired leases; returns it (for the sweeper's log)."""
        if count > 0:
            self._lease_expiries.inc(count)
        return count

    def transaction(self, seconds: float, outcome: str) -> None:
        self.transaction_seconds.labels(outcome).observe(seconds)

    def rpc(self, method: str, code: str, seconds: float) -> None:
        self.rpc_seconds.labels(method, code).observe(seconds)

    def work_batch(self, items: int) -> None:
        """A batch of a worker's stream answered."""
        self._batch_items.observe(items)


class _StoreCollector(Collector):
    """Gauges read from the database when scraped."""

    def __init__(self, gauges: Callable[[], StoreGauges]) -> None:
        self._gauges = gauges

    def describe(self) -> Iterator[Metric]:
        return iter(())  # read at scrape time: nothing to describe ahead

    def collect(self) -> Iterator[Metric]:
        up = GaugeMetricFamily("amber_store_up", "1 if the store answered this scrape, else 0")
        try:
            gauges = self._gauges()
        except Exception as exc:  # a scrape must still answer when the database does not
            _log.warning("store gauges unavailable: %s", exc)
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield up
        labels = ["queue", "pool"]
        ready = GaugeMetricFamily(
            "amber_queue_ready", "Tasks waiting for a worker, visible now", labels=labels
        )
        delayed = GaugeMetricFamily(
            "amber_queue_delayed", "Pending tasks visible later (backoff, surgical delays)",
            labels=labels,
        )  # fmt: skip
        leased = GaugeMetricFamily("amber_queue_leased", "Tasks held by workers", labels=labels)
        oldest = GaugeMetricFamily(
            "amber_queue_oldest_ready_seconds",
            "How long the longest-waiting ready task has been visible",
            labels=labels,
        )
        for q in gauges.queues:
            key = [q.queue, q.pool]
            ready.add_metric(key, q.ready)
            delayed.add_metric(key, q.delayed)
            leased.add_metric(key, q.leased)
            oldest.add_metric(key, q.oldest_ready_s)
        yield from (ready, delayed, leased, oldest)
        yield GaugeMetricFamily(
            "amber_tasks_poisoned", "Tasks poisoned (surgical pool or held)",
            value=gauges.tasks_poisoned,
        )  # fmt: skip
        yield GaugeMetricFamily(
            "amber_runs_suspended", "Runs suspended for an operator", value=gauges.runs_suspended
        )
