"""A triage bundle: everything needed to replay a run's failures away from the engine.

One msgpack file: the run (input, type, pinned digest, suspension), its whole history, the bytes
of every module version the history, the run or a failure names, and the run's failure records
with their repros. Replaying it needs no database and no network (`surgical_pool.replay_bundle`).
Module bytes are checked against their digests when a bundle is read, so replaying other code
than the run's is refused. The rest is not signed: a bundle is evidence the operator holds, and
a replay compares against the failure records inside it.

Rejected: a tarball of JSON files (bytes payloads would need base64 and a second format); a
database dump (ties the laptop to PostgreSQL and leaks every other run).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from amber.abi import InvalidInput, NotMsgpack, pack, unpack
from amber.history import (
    Event,
    EventType,
    FailureRecord,
    Run,
    RunStatus,
    Suspension,
)

from ._clock import from_ms, to_ms

BUNDLE_FORMAT = "amber-triage-bundle"
BUNDLE_VERSION = 1
MAX_BUNDLE_FAILURES = 200
"""The most recent failures a bundle carries."""
MAX_BUNDLE_REPRO_BYTES = 24 * 1024 * 1024
"""Repro bytes a bundle carries (the newest first; one per task and fingerprint): with modules
and history it stays well inside one 64 MiB response."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Bundle:
    """A run, its history, its modules and its failures, as exported for triage."""

    run: Run
    events: tuple[Event, ...]
    modules: dict[str, bytes]
    """Module bytes by digest."""
    failures: tuple[FailureRecord, ...]
    """Newest first."""
    exported_at: datetime
    exported_by: str

    def encode(self) -> bytes:
        run = self.run
        doc = {
            "format": BUNDLE_FORMAT,
            "version": BUNDLE_VERSION,
            "exported_ms": to_ms(self.exported_at),
            "exported_by": self.exported_by,
            "run": {
                "run_id": run.run_id,
                "tenant": run.tenant,
                "workflow_id": run.workflow_id,
                "workflow_type": run.workflow_type,
                "digest": run.digest,
                "queue": run.queue,
                "status": run.status.value,
                "input": run.input,
                "last_seq": run.last_seq,
                "created_ms": to_ms(run.created_at),
                "suspended_ms": to_ms(run.suspension.since) if run.suspension else None,
                "suspended_reason": run.suspension.reason if run.suspension else None,
                "suspended_fingerprint": run.suspension.fingerprint if run.suspension else None,
            },
            "events": [
                [e.seq, e.type.value, e.raw, e.digest, to_ms(e.created_at)] for e in self.events
            ],
            "modules": self.modules,
            "failures": [_failure_doc(f) for f in self.failures],
        }
        return pack(doc)

    @staticmethod
    def decode(data: bytes) -> Bundle:
        """Read a bundle; raises `InvalidInput` for anything else, or a tampered module."""
        try:
            doc: dict[str, Any] = unpack(data, what="the bundle", any_keys=True)
        except NotMsgpack as exc:
            raise InvalidInput(f"not a triage bundle: {exc}") from None
        if not isinstance(doc, dict) or doc.get("format") != BUNDLE_FORMAT:
            raise InvalidInput("not a triage bundle (no amber-triage-bundle header)")
        if doc.get("version") != BUNDLE_VERSION:
            raise InvalidInput(f"bundle version {doc.get('version')!r} is not {BUNDLE_VERSION}")
        try:
            return _decode(doc)
        except (KeyError, TypeError, ValueError) as exc:
            raise InvalidInput(f"malformed triage bundle: {exc!r}") from None


def _decode(doc: dict[str, Any]) -> Bundle:
    modules = {str(k): bytes(v) for k, v in doc["modules"].items()}
    for digest, wasm in modules.items():
        if hashlib.sha256(wasm).hexdigest() != digest:
            raise InvalidInput(f"module {digest[:12]} in the bundle does not match its digest")
    r = doc["run"]
    created = from_ms(int(r["created_ms"]))
    suspension = None
    if r.get("suspended_ms") is not None:
        suspension = Suspension(
            since=from_ms(int(r["suspended_ms"])),
            reason=str(r.get("suspended_reason") or ""),
            fingerprint=r.get("suspended_fingerprint"),
        )
    run = Run(
        run_id=str(r["run_id"]),
        tenant=str(r["tenant"]),
        workflow_id=str(r["workflow_id"]),
        workflow_type=str(r["workflow_type"]),
        digest=str(r["digest"]),
        queue=str(r["queue"]),
        status=RunStatus(r["status"]),
        input=bytes(r["input"]),
        result=None,
        error_type=None,
        error_message=None,
        last_seq=int(r["last_seq"]),
        next_cmd=0,
        created_at=created,
        updated_at=created,
        closed_at=None,
        suspension=suspension,
    )
    events = tuple(
        Event(
            run_id=run.run_id,
            seq=int(seq),
            type=EventType(kind),
            raw=bytes(payload),
            digest=str(digest),
            created_at=from_ms(int(ms)),
        )
        for seq, kind, payload, digest, ms in doc["events"]
    )
    failures = tuple(_failure_of(run.run_id, f) for f in doc["failures"])
    return Bundle(
        run=run,
        events=events,
        modules=modules,
        failures=failures,
        exported_at=from_ms(int(doc["exported_ms"])),
        exported_by=str(doc["exported_by"]),
    )


def _failure_doc(f: FailureRecord) -> dict[str, Any]:
    return {
        "task_id": f.task_id,
        "kind": f.kind,
        "cmd": f.cmd,
        "attempt": f.attempt,
        "digest": f.digest,
        "reason": f.reason,
        "trap_code": f.trap_code,
        "message": f.message,
        "fuel_used": f.fuel_used,
        "memory_bytes": f.memory_bytes,
        "worker": f.worker,
        "at_ms": to_ms(f.created_at),
        "fingerprint": f.fingerprint,
        "pool": f.pool,
        "trace_id": f.trace_id,
        "host_calls": list(f.host_calls),
        "repro": f.repro,
    }


def _failure_of(run_id: str, d: dict[str, Any]) -> FailureRecord:
    return FailureRecord(
        task_id=int(d["task_id"]),
        run_id=run_id,
        kind=str(d["kind"]),
        cmd=d["cmd"],
        attempt=int(d["attempt"]),
        digest=str(d["digest"]),
        reason=str(d["reason"]),
        trap_code=d["trap_code"],
        message=str(d["message"]),
        fuel_used=d["fuel_used"],
        memory_bytes=d["memory_bytes"],
        worker=d["worker"],
        created_at=from_ms(int(d["at_ms"])),
        fingerprint=d["fingerprint"],
        pool=d["pool"],
        trace_id=d["trace_id"],
        host_calls=tuple(d["host_calls"]),
        repro=None if d["repro"] is None else bytes(d["repro"]),
    )
