"""A worker's metrics."""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from ._server import LATENCY_BUCKETS

FUEL_BUCKETS = (1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10)


class WorkerMetrics:
    """Everything a worker's `/metrics` shows. Thread-safe."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self._activation = Histogram(
            "amber_worker_activation_seconds",
            "Guest activations (sandbox time, replay included), by kind (workflow, activity,"
            " query, check)",
            ["kind"], buckets=LATENCY_BUCKETS, registry=r,
        )  # fmt: skip
        self._task = Histogram(
            "amber_worker_task_seconds",
            "Tasks from lease to report, by kind and outcome (ok, or the failure reason)",
            ["kind", "outcome"], buckets=LATENCY_BUCKETS, registry=r,
        )  # fmt: skip
        self._fuel = Histogram(
            "amber_worker_fuel_used", "Fuel per activation, by kind", ["kind"],
            buckets=FUEL_BUCKETS, registry=r,
        )  # fmt: skip
        self._replayed = Counter(
            "amber_worker_replayed_events", "History events replayed by workflow activations",
            registry=r,
        )  # fmt: skip
        self._continued = Counter(
            "amber_worker_continued_activations",
            "Workflow activations that went on in the run's live instance instead of replaying"
            " its history (sticky instances)",
            registry=r,
        )  # fmt: skip
        self._live = Gauge(
            "amber_worker_live_instances",
            "Live workflow instances parked, one per running workflow (sticky instances)",
            registry=r,
        )  # fmt: skip
        self._warm = Gauge(
            "amber_worker_warm_activity_instances",
            "Python activity instances kept in the worker process for their run's next activity"
            " (its reused child processes keep their own)",
            registry=r,
        )  # fmt: skip
        self._busy = Gauge("amber_worker_tasks_running", "Tasks running now", registry=r)
        self._background = Gauge(
            "amber_worker_background_activities",
            "Activities in the background lane now, held back or running at low priority (they"
            " used up their fuel or CPU slice)",
            registry=r,
        )  # fmt: skip
        self._waiting = Gauge(
            "amber_worker_activities_waiting",
            "Activities waiting in a host call now (a sleep, an HTTP exchange): each holds a"
            " slot but none of the worker's --guests places",
            registry=r,
        )  # fmt: skip

    def activation(self, kind: str, seconds: float, fuel: int) -> None:
        self._activation.labels(kind).observe(seconds)
        if fuel > 0:
            self._fuel.labels(kind).observe(fuel)

    def replayed(self, events: int, *, continued: bool = False) -> None:
        """A workflow activation over `events` history events: replayed, or gone on with in
        its live instance (`continued`)."""
        if continued:
            self._continued.inc()
        else:
            self._replayed.inc(events)

    def watch_live(self, live_instances: Callable[[], int]) -> None:
        """Read the live instance count from `live_instances` at each scrape."""
        self._live.set_function(live_instances)

    def watch_warm(self, kept: Callable[[], int]) -> None:
        """Read the count of kept Python activity instances from `kept` at each scrape."""
        self._warm.set_function(kept)

    def watch_waiting(self, waiting: Callable[[], int]) -> None:
        """Read the count of activities waiting in host calls from `waiting` at each scrape."""
        self._waiting.set_function(waiting)

    def watch_background(self, in_lane: Callable[[], int]) -> None:
        """Read the background lane's activity count from `in_lane` at each scrape."""
        self._background.set_function(in_lane)

    def task_started(self) -> None:
        self._busy.inc()

    def task_ended(self, kind: str, outcome: str, seconds: float) -> None:
        self._busy.dec()
        self._task.labels(kind, outcome).observe(seconds)
