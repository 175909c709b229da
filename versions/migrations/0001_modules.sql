-- Uploaded modules are immutable and content-addressed: the sha256 of the bytes is the key, and
-- a row is never updated. Which version new runs of a workflow type start on is a separate,
-- mutable pointer (amber_workflow_types), so changing it never touches a module.

CREATE TABLE amber_modules (
    digest      text PRIMARY KEY,
    size        integer NOT NULL,
    manifest    jsonb NOT NULL,
    wasm        bytea NOT NULL,
    uploaded_at timestamptz NOT NULL
);

CREATE TABLE amber_module_workflows (
    workflow_type text NOT NULL,
    digest        text NOT NULL,
    PRIMARY KEY (workflow_type, digest)
);

CREATE TABLE amber_workflow_types (
    workflow_type  text PRIMARY KEY,
    current_digest text NOT NULL,
    updated_at     timestamptz NOT NULL
);
