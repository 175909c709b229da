"""Per-version health: activations, fuel and failures by reason, so a rollout can be judged.

Counters are additive rows keyed by (digest, kind, reason); servers add what they counted in
memory every few seconds (`add_health_txn`), so a completion costs no extra write and several
servers can report at once. A server that crashes loses at most its last few seconds of counts.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from amber.history import Cursor


OK = "ok"


@dataclass(frozen=True, slots=True, kw_only=True)
class HealthCount:
    """`count` activations of `kind` (workflow/activity) on `digest` that ended with `reason`
    (`ok` for success), using `fuel` in total."""

    digest: str
    kind: str
    reason: str
    count: int
    fuel: int


@dataclass(frozen=True, slots=True, kw_only=True)
class VersionHealth:
    """How one version has been doing."""

    digest: str
    activations: int = 0
    succeeded: int = 0
    fuel: int = 0
    failures: dict[str, int] = field(default_factory=dict)
    """Failed activations by reason (trap, out_of_fuel, non_determinism, worker_lost, ...)."""

    @property
    def failure_rate(self) -> float:
        return 0.0 if not self.activations else 1 - self.succeeded / self.activations


def add_health_txn(cur: Cursor, counts: Sequence[HealthCount]) -> None:
    for c in counts:
        cur.execute(
            "INSERT INTO amber_version_stats (digest, kind, reason, count, fuel)"
            " VALUES (%s, %s, %s, %s, %s) ON CONFLICT (digest, kind, reason) DO UPDATE"
            " SET count = amber_version_stats.count + EXCLUDED.count,"
            " fuel = amber_version_stats.fuel + EXCLUDED.fuel",
            (c.digest, c.kind, c.reason, c.count, c.fuel),
        )


def health_txn(cur: Cursor, digests: Iterable[str]) -> dict[str, VersionHealth]:
    wanted = list(dict.fromkeys(digests))
    cur.execute(
        "SELECT digest, reason, sum(count), sum(fuel) FROM amber_version_stats"
        " WHERE digest = ANY(%s) GROUP BY digest, reason",
        (wanted,),
    )
    totals: dict[str, dict[str, tuple[int, int]]] = {d: {} for d in wanted}
    for digest, reason, count, fuel in cur.fetchall():
        totals[digest][reason] = (int(count), int(fuel))
    result = {}
    for digest, by_reason in totals.items():
        activations = sum(c for c, _ in by_reason.values())
        result[digest] = VersionHealth(
            digest=digest,
            activations=activations,
            succeeded=by_reason.get(OK, (0, 0))[0],
            fuel=sum(f for _, f in by_reason.values()),
            failures={r: c for r, (c, _) in by_reason.items() if r != OK},
        )
    return result
