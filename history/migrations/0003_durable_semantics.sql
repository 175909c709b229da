-- Durable semantics (issue #3): timers, signals, cancellation, activity timeouts and retry
-- policies, children, continue-as-new, reset, queries, history limits, and a record of
-- deliveries that were refused (duplicates, late or stale reports) so they can be audited.

-- A workflow id names a chain of runs (continue-as-new, reset); this table points at the
-- chain's first run (what an idempotent start compares with) and its current run.
CREATE TABLE amber_workflow_ids (
    tenant       text NOT NULL,
    workflow_id  text NOT NULL,
    first_run_id uuid NOT NULL,
    run_id       uuid NOT NULL,
    PRIMARY KEY (tenant, workflow_id)
);
INSERT INTO amber_workflow_ids (tenant, workflow_id, first_run_id, run_id)
    SELECT tenant, workflow_id, run_id, run_id FROM amber_runs;
ALTER TABLE amber_runs DROP CONSTRAINT amber_runs_workflow_id;
CREATE INDEX amber_runs_by_workflow_id ON amber_runs (tenant, workflow_id);

ALTER TABLE amber_runs
    ADD COLUMN parent_run_id       uuid,
    ADD COLUMN parent_cmd          integer,
    ADD COLUMN parent_close_policy text,
    ADD COLUMN cancel_seq          integer,
    ADD COLUMN cancel_reason       text,
    ADD COLUMN history_bytes       bigint NOT NULL DEFAULT 0,
    ADD COLUMN history_warned      boolean NOT NULL DEFAULT false;
CREATE INDEX amber_runs_children ON amber_runs (parent_run_id) WHERE parent_run_id IS NOT NULL;

-- Activity options and timeouts live on the task row; `timeout_at` is the earliest deadline
-- that applies to the task's current state, so one index finds everything due.
ALTER TABLE amber_tasks
    ADD COLUMN options              bytea,
    ADD COLUMN start_to_close_ms    integer,
    ADD COLUMN schedule_to_start_ms integer,
    ADD COLUMN heartbeat_ms         integer,
    ADD COLUMN start_by          timestamptz,
    ADD COLUMN close_by          timestamptz,
    ADD COLUMN attempt_deadline  timestamptz,
    ADD COLUMN heartbeat_by      timestamptz,
    ADD COLUMN timeout_at        timestamptz,
    ADD COLUMN heartbeat_details bytea,
    ADD COLUMN cancel_requested  boolean NOT NULL DEFAULT false;
CREATE INDEX amber_tasks_timeouts ON amber_tasks (timeout_at) WHERE timeout_at IS NOT NULL;

-- Durable timers (workflow timers and workflow execution timeouts). A row is deleted in the
-- transaction that records its firing, so two servers can never fire one twice.
CREATE TABLE amber_timers (
    run_id   uuid NOT NULL,
    timer_id text NOT NULL,
    kind     text NOT NULL,
    cmd      integer,
    fire_at  timestamptz NOT NULL,
    PRIMARY KEY (run_id, timer_id)
);
CREATE INDEX amber_timers_due ON amber_timers (fire_at);

-- Signal deliveries carry a request id; a second delivery with the same id is refused.
CREATE TABLE amber_signal_ids (
    run_id     uuid NOT NULL,
    request_id text NOT NULL,
    seq        integer NOT NULL,
    PRIMARY KEY (run_id, request_id)
);

-- Deliveries that changed nothing: duplicate signals and timer fires, late or stale reports.
CREATE TABLE amber_discarded (
    discarded_id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    run_id       uuid,
    kind         text NOT NULL,
    detail       text NOT NULL,
    created_at   timestamptz NOT NULL
);
CREATE INDEX amber_discarded_by_run ON amber_discarded (run_id, discarded_id);

-- Answers to queries, written by the worker that ran the query task, read once by the server
-- that waits for them.
CREATE TABLE amber_query_results (
    task_id    bigint PRIMARY KEY,
    result     bytea,
    error_type text,
    message    text,
    created_at timestamptz NOT NULL
);
