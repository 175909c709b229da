"""Poison-pill handling and operator triage (issue #5): failure fingerprints, the surgical
worker pool, suspension and audited triage commands.

Nothing lives here yet. What it will build on is in place: every failed activation is recorded
with a typed reason, trap code, fuel and memory (`history.record_failure_txn`), and each task row
keeps a consecutive-failure counter updated in the same transaction.
"""
