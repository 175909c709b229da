-- Human approval steps (issue #6). An approval is requested by a workflow command and decided by
-- people holding single-use tokens. Tokens are stored only as sha256 hashes, each bound to the
-- approval (tenant, run, step, action, policy version) and to one approver; a token moves from
-- pending to used or revoked by a conditional update, never back. Decisions are one per approver
-- per approval, so a duplicate click is counted once. Role membership is a small directory the
-- decision re-checks at submission. An approval whose run closes first ends `cancelled`.
CREATE TABLE amber_approvals (
    approval_id    uuid PRIMARY KEY,
    tenant         text NOT NULL,
    run_id         uuid NOT NULL,
    cmd            integer NOT NULL,
    action         text NOT NULL,
    approvers      text[] NOT NULL,
    roles          text[] NOT NULL,
    required       integer NOT NULL CHECK (required >= 1),
    policy_version text NOT NULL,
    status         text NOT NULL DEFAULT 'pending'
                   CHECK (status IN ('pending', 'approved', 'rejected', 'expired', 'cancelled')),
    created_at     timestamptz NOT NULL,
    expires_at     timestamptz NOT NULL,
    decided_at     timestamptz,
    delivered_at   timestamptz,  -- tokens minted and handed to the delivery sink
    UNIQUE (run_id, cmd)
);
CREATE INDEX amber_approvals_pending ON amber_approvals (delivered_at) WHERE status = 'pending';
CREATE INDEX amber_approvals_by_tenant ON amber_approvals (tenant, status, created_at);

CREATE TABLE amber_approval_tokens (
    token_hash     bytea PRIMARY KEY,
    approval_id    uuid NOT NULL REFERENCES amber_approvals (approval_id) ON DELETE CASCADE,
    approver       text NOT NULL,
    tenant         text NOT NULL,
    run_id         uuid NOT NULL,
    cmd            integer NOT NULL,
    action_sha256  bytea NOT NULL,
    policy_version text NOT NULL,
    status         text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'used', 'revoked')),
    issued_at      timestamptz NOT NULL,
    expires_at     timestamptz NOT NULL,
    closed_at      timestamptz,
    issued_by      text  -- the operator who minted it by hand (`approvals issue`); NULL: the sink
);
CREATE INDEX amber_approval_tokens_by_approval ON amber_approval_tokens (approval_id, approver);

CREATE TABLE amber_approval_decisions (
    approval_id uuid NOT NULL REFERENCES amber_approvals (approval_id) ON DELETE CASCADE,
    approver    text NOT NULL,
    approve     boolean NOT NULL,
    comment     text NOT NULL,
    via         text NOT NULL,
    decided_at  timestamptz NOT NULL,
    PRIMARY KEY (approval_id, approver)
);

CREATE TABLE amber_approver_roles (
    tenant     text NOT NULL,
    role       text NOT NULL,
    approver   text NOT NULL,
    granted_at timestamptz NOT NULL,
    PRIMARY KEY (tenant, role, approver)
);
