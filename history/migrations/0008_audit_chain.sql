-- The audit log becomes tamper-evident (issue #6): every record takes the next place in one
-- gap-free chain (`seq` from 1) and stores `hash = sha256(prev_hash || its canonical bytes)`, so
-- editing or deleting a record breaks the chain where it happened. A single head row (the last
-- record's seq and hash), updated in each append's transaction, makes concurrent appenders on
-- any number of servers queue on one row lock instead of an advisory lock, and shows when the
-- last records were deleted. Existing rows are chained here in audit_id order, with the same
-- encoding as `history/_audit.py` (see its docstring); this one-time backfill uses PostgreSQL's
-- sha256()/int8send(), everything after it is plain SQL.
ALTER TABLE amber_audit
    ADD COLUMN seq       bigint,
    ADD COLUMN prev_hash bytea,
    ADD COLUMN hash      bytea;

UPDATE amber_audit
   SET seq = numbered.seq
  FROM (SELECT audit_id, row_number() OVER (ORDER BY audit_id) AS seq FROM amber_audit) AS numbered
 WHERE amber_audit.audit_id = numbered.audit_id;
ALTER TABLE amber_audit ADD CONSTRAINT amber_audit_seq UNIQUE (seq);
ANALYZE amber_audit;  -- so that the chaining below walks the new index, one row per step

-- First each row's canonical bytes, parked in `hash`: seq and the time in microseconds since
-- the Unix epoch (UTC) as 8-byte big-endian integers, then actor, action, target, reason (UTF-8)
-- and detail, each as a 4-byte big-endian length and its bytes.
UPDATE amber_audit AS a
   SET hash = int8send(a.seq)
           || int8send(EXTRACT(EPOCH FROM date_trunc('second', a.at AT TIME ZONE 'UTC'))::bigint
                       * 1000000
                       + EXTRACT(MICROSECONDS FROM a.at AT TIME ZONE 'UTC')::bigint % 1000000)
           || int4send(octet_length(convert_to(a.actor, 'UTF8'))) || convert_to(a.actor, 'UTF8')
           || int4send(octet_length(convert_to(a.action, 'UTF8'))) || convert_to(a.action, 'UTF8')
           || int4send(octet_length(convert_to(a.target, 'UTF8'))) || convert_to(a.target, 'UTF8')
           || int4send(octet_length(convert_to(a.reason, 'UTF8'))) || convert_to(a.reason, 'UTF8')
           || int4send(octet_length(a.detail)) || a.detail;

-- Then the chain, from the genesis hash (32 zero bytes), one record after the other.
WITH RECURSIVE chain (seq, prev_hash, hash) AS (
    SELECT 0::bigint, NULL::bytea, decode(repeat('00', 32), 'hex')
    UNION ALL
    SELECT a.seq, chain.hash, sha256(chain.hash || a.hash)
      FROM chain JOIN amber_audit AS a ON a.seq = chain.seq + 1
)
UPDATE amber_audit
   SET prev_hash = chain.prev_hash, hash = chain.hash
  FROM chain
 WHERE amber_audit.seq = chain.seq AND chain.seq > 0;

ALTER TABLE amber_audit
    ALTER COLUMN seq       SET NOT NULL,
    ALTER COLUMN prev_hash SET NOT NULL,
    ALTER COLUMN hash      SET NOT NULL;

CREATE TABLE amber_audit_head (
    id   integer PRIMARY KEY CHECK (id = 1),
    seq  bigint NOT NULL,
    hash bytea NOT NULL
);
INSERT INTO amber_audit_head (id, seq, hash)
    SELECT 1, 0, decode(repeat('00', 32), 'hex') WHERE NOT EXISTS (SELECT 1 FROM amber_audit);
INSERT INTO amber_audit_head (id, seq, hash)
    SELECT 1, seq, hash FROM amber_audit ORDER BY seq DESC LIMIT 1;

-- Listing by target pages in chain order.
DROP INDEX amber_audit_by_target;
CREATE INDEX amber_audit_by_target ON amber_audit (target, seq);
