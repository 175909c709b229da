-- Poison pills (issue #5). A task that keeps crashing stays in its queue but moves between
-- pools: `main` (healthy work), `surgical` (poisoned: only the surgical pool leases it), `held`
-- (its run is suspended for an operator: nobody leases it). The crash counter is keyed by the
-- failing step and a fingerprint of the failure, on the task row, changed in the transaction
-- that records the failure. Suspension is a lifecycle state on the run, apart from its status,
-- so releasing it restores exactly where the run was. Attempts that crashed are counted apart
-- so that they do not spend the activity's retry budget.
ALTER TABLE amber_tasks
    ADD COLUMN pool              text NOT NULL DEFAULT 'main',
    ADD COLUMN crash_step        integer,
    ADD COLUMN crash_fingerprint text,
    ADD COLUMN crash_count       integer NOT NULL DEFAULT 0,
    ADD COLUMN crashed_attempts  integer NOT NULL DEFAULT 0,  -- attempts that ended in a crash
    ADD COLUMN poisoned_at       timestamptz,
    ADD COLUMN poison_reason     text,
    ADD CONSTRAINT amber_task_pool CHECK (pool IN ('main', 'surgical', 'held'));
DROP INDEX amber_tasks_ready;
CREATE INDEX amber_tasks_ready ON amber_tasks (queue, pool, visible_at) WHERE state = 'pending';

ALTER TABLE amber_runs
    ADD COLUMN suspended_at          timestamptz,
    ADD COLUMN suspended_reason      text,
    ADD COLUMN suspended_fingerprint text;
CREATE INDEX amber_runs_suspended ON amber_runs (suspended_at) WHERE suspended_at IS NOT NULL;

ALTER TABLE amber_task_failures
    ADD COLUMN fingerprint text,
    ADD COLUMN pool        text,
    ADD COLUMN trace_id    text,
    ADD COLUMN host_calls  text[],
    ADD COLUMN repro       bytea;
CREATE INDEX amber_task_failures_by_fingerprint ON amber_task_failures (fingerprint, failure_id);
