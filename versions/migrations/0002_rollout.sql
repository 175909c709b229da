-- Rollout (issue #4): human labels for digests; per workflow type a candidate version with a
-- ramp percentage beside the current one, the previous current (for rollback) and an optional
-- automatic upgrade target; retirement of versions nothing uses any more; per-version health
-- counters; and the outcome of replay checks (what gates migration and automatic upgrades).
CREATE TABLE amber_version_labels (
    label      text PRIMARY KEY,
    digest     text NOT NULL,
    created_at timestamptz NOT NULL
);

ALTER TABLE amber_workflow_types
    ADD COLUMN candidate_digest text,
    ADD COLUMN ramp_percent     integer NOT NULL DEFAULT 0,
    ADD COLUMN previous_digest  text,
    ADD COLUMN auto_upgrade_to  text;

ALTER TABLE amber_modules ADD COLUMN retired_at timestamptz;

CREATE TABLE amber_version_stats (
    digest text NOT NULL,
    kind   text NOT NULL,
    reason text NOT NULL,
    count  bigint NOT NULL,
    fuel   bigint NOT NULL,
    PRIMARY KEY (digest, kind, reason)
);

CREATE TABLE amber_version_checks (
    check_id      bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    workflow_type text NOT NULL,
    candidate     text NOT NULL,
    checked_at    timestamptz NOT NULL,
    runs          integer NOT NULL,
    compatible    integer NOT NULL,
    incompatible  integer NOT NULL,
    failed        integer NOT NULL
);
CREATE INDEX amber_version_checks_by_type ON amber_version_checks (workflow_type, candidate, check_id);
