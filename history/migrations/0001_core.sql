-- The core of a durable run: the run row (identity, pinned module, status, the head of its
-- history), the append-only event log, the task queue workers lease from, and a record of every
-- failed activation. Later migrations add columns; nothing here is ever rewritten.

CREATE TABLE amber_runs (
    run_id        uuid PRIMARY KEY,
    tenant        text NOT NULL,
    workflow_id   text NOT NULL,
    workflow_type text NOT NULL,
    digest        text NOT NULL,
    queue         text NOT NULL,
    status        text NOT NULL,
    input         bytea NOT NULL,
    result        bytea,
    error_type    text,
    error_message text,
    last_seq      integer NOT NULL,
    next_cmd      integer NOT NULL DEFAULT 0,
    created_at    timestamptz NOT NULL,
    updated_at    timestamptz NOT NULL,
    closed_at     timestamptz,
    CONSTRAINT amber_runs_workflow_id UNIQUE (tenant, workflow_id)
);
CREATE INDEX amber_runs_by_time ON amber_runs (tenant, created_at DESC, run_id);

CREATE TABLE amber_events (
    run_id     uuid NOT NULL,
    seq        integer NOT NULL,
    type       text NOT NULL,
    payload    bytea NOT NULL,
    digest     text NOT NULL,
    created_at timestamptz NOT NULL,
    PRIMARY KEY (run_id, seq)
);

CREATE TABLE amber_tasks (
    task_id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    run_id               uuid NOT NULL,
    kind                 text NOT NULL,
    queue                text NOT NULL,
    cmd                  integer,
    name                 text NOT NULL,
    digest               text NOT NULL,
    args                 bytea,
    state                text NOT NULL,
    visible_at           timestamptz NOT NULL,
    lease_owner          text,
    lease_expires_at     timestamptz,
    fencing              bigint NOT NULL DEFAULT 0,
    attempt              integer NOT NULL DEFAULT 1,
    max_attempts         integer NOT NULL,
    consecutive_failures integer NOT NULL DEFAULT 0,
    last_failure         text,
    scheduled_at         timestamptz NOT NULL
);
CREATE INDEX amber_tasks_ready ON amber_tasks (queue, visible_at) WHERE state = 'pending';
CREATE INDEX amber_tasks_leases ON amber_tasks (lease_expires_at) WHERE state = 'leased';
CREATE INDEX amber_tasks_by_run ON amber_tasks (run_id);
CREATE UNIQUE INDEX amber_tasks_one_pending_workflow ON amber_tasks (run_id)
    WHERE kind = 'workflow' AND state = 'pending';
CREATE UNIQUE INDEX amber_tasks_one_per_activity ON amber_tasks (run_id, cmd)
    WHERE kind = 'activity';

CREATE TABLE amber_task_failures (
    failure_id   bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    task_id      bigint NOT NULL,
    run_id       uuid NOT NULL,
    kind         text NOT NULL,
    cmd          integer,
    attempt      integer NOT NULL,
    digest       text NOT NULL,
    reason       text NOT NULL,
    trap_code    text,
    message      text NOT NULL,
    fuel_used    bigint,
    memory_bytes bigint,
    worker       text,
    created_at   timestamptz NOT NULL
);
CREATE INDEX amber_task_failures_by_run ON amber_task_failures (run_id, failure_id);
