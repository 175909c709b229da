"""What replaying one failed activation offline needs, recorded with the failure.

A workflow activation is rebuilt from the run's history (the events up to `last_seq`), so its
repro is small: the position, the limits and a hash of the input envelope the worker built (an
offline rebuild that does not hash the same was not the same activation). An activity
activation is not derived from history; its repro carries the exact input envelope. Both carry
the limits the activation ran under (a crashed task's next attempt runs under no less) and the
clock reading at its start, which is what `now` returns during an offline replay.

Rejected: storing a core dump of the sandbox (large, tied to one wasmtime build) — fuel use is
deterministic, so re-running the same module on the same input reproduces the fault exactly.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from amber.abi import InvalidInput, NotMsgpack, pack, unpack
from amber.runtime.model import from_ms, to_ms

from ._host import ActivationKind
from ._sandbox import ActivationRequest, SandboxLimits

REPRO_VERSION = 1


@dataclass(frozen=True, slots=True, kw_only=True)
class Repro:
    """One activation, as an offline replay needs it."""

    kind: ActivationKind
    digest: str
    export: str
    run_id: str
    step: int | None
    limits: SandboxLimits
    started_at: datetime
    """The clock at the start of the activation (`now` during an offline replay)."""
    input_sha256: str
    input: bytes | None = None
    """The input envelope itself (activities only: a workflow's is rebuilt from history)."""
    last_seq: int | None = None
    """Workflows: the last history event the activation replayed."""
    idempotency_key: str = ""

    def encode(self) -> bytes:
        limits = self.limits
        return pack(
            {
                "v": REPRO_VERSION,
                "kind": self.kind.value,
                "digest": self.digest,
                "export": self.export,
                "run_id": self.run_id,
                "step": self.step,
                "limits": [
                    limits.fuel,
                    limits.memory_bytes,
                    limits.deadline_s,
                    limits.table_elements,
                    limits.max_output_bytes,
                ],
                "started_ms": to_ms(self.started_at),
                "input_sha256": self.input_sha256,
                "input": self.input,
                "last_seq": self.last_seq,
                "idempotency_key": self.idempotency_key,
            }
        )

    @staticmethod
    def decode(data: bytes) -> Repro:
        """Parse a stored repro; raises `InvalidInput` for anything that is not one."""
        try:
            doc: dict[str, Any] = unpack(data, what="the repro")
            if not isinstance(doc, dict):
                raise InvalidInput("not a repro (not a map)")
            if doc.get("v") != REPRO_VERSION:
                raise InvalidInput(f"repro format {doc.get('v')!r} is not {REPRO_VERSION}")
            fuel, memory, deadline, table, output = doc["limits"]
            return Repro(
                kind=ActivationKind(doc["kind"]),
                digest=str(doc["digest"]),
                export=str(doc["export"]),
                run_id=str(doc["run_id"]),
                step=doc["step"],
                limits=SandboxLimits(
                    fuel=int(fuel),
                    memory_bytes=int(memory),
                    deadline_s=float(deadline),
                    table_elements=int(table),
                    max_output_bytes=int(output),
                ),
                started_at=from_ms(int(doc["started_ms"])),
                input_sha256=str(doc["input_sha256"]),
                input=_optional_bytes(doc.get("input")),
                last_seq=doc.get("last_seq"),
                idempotency_key=str(doc.get("idempotency_key") or ""),
            )
        except (ValueError, TypeError, KeyError, NotMsgpack) as exc:
            raise InvalidInput(f"not a repro: {exc}") from None


def _optional_bytes(value: object) -> bytes | None:
    if value is not None and not isinstance(value, bytes):
        raise TypeError("input is not bytes")
    return value


def repro_of(request: ActivationRequest, started_at: datetime, last_seq: int | None) -> Repro:
    """The repro of an activation the worker just ran (`last_seq` for workflow activations)."""
    workflow = request.kind is ActivationKind.WORKFLOW
    return Repro(
        kind=request.kind,
        digest=request.digest,
        export=request.export,
        run_id=request.run_id,
        step=request.step,
        limits=request.limits,
        started_at=started_at,
        input_sha256=hashlib.sha256(request.input).hexdigest(),
        input=None if workflow else request.input,
        last_seq=last_seq if workflow else None,
        idempotency_key=request.activity.idempotency_key if request.activity else "",
    )
