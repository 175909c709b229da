-- An append-only audit log of operator actions (version promotions, run cancellations, ...),
-- and what a run needs for moving between module versions: the version an automatic upgrade
-- already failed to replay on (so it is not tried again), and the run ids by module version.
CREATE TABLE amber_audit (
    audit_id   bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at         timestamptz NOT NULL,
    actor      text NOT NULL,
    action     text NOT NULL,
    target     text NOT NULL,
    reason     text NOT NULL,
    detail     bytea NOT NULL
);
CREATE INDEX amber_audit_by_target ON amber_audit (target, audit_id);

ALTER TABLE amber_runs ADD COLUMN upgrade_blocked text;
CREATE INDEX amber_runs_by_digest ON amber_runs (digest, status);
CREATE INDEX amber_tasks_by_digest ON amber_tasks (digest);
