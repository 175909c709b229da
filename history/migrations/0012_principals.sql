-- Who may call the API: one row per principal (a person, an application, a worker fleet), with
-- its role, the tenants, queues and pools it is bound to, and the sha256 of its bearer token (the
-- token itself is never stored). A revoked principal keeps its row, so its name stays in the
-- audit log's sense; granting the name again replaces the row.
CREATE TABLE amber_principals (
    name        text PRIMARY KEY,
    role        text NOT NULL CHECK (role IN ('admin', 'operator', 'application', 'worker')),
    tenants     text[] NOT NULL,
    queues      text[] NOT NULL,
    pools       text[] NOT NULL,
    token_hash  bytea NOT NULL UNIQUE,
    created_at  timestamptz NOT NULL,
    created_by  text NOT NULL,
    rotated_at  timestamptz,
    revoked_at  timestamptz
);
