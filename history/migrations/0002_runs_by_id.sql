-- Runs are listed newest first by their time-ordered (UUIDv7) id, not by created_at: a keyset
-- cursor on a timestamp skipped runs created within the same millisecond as a page boundary.
DROP INDEX IF EXISTS amber_runs_by_time;
CREATE INDEX amber_runs_by_tenant ON amber_runs (tenant, run_id DESC);
