-- The audit log is append-only in PostgreSQL itself: an UPDATE or DELETE of an audit record is
-- refused by a trigger, whatever the connecting role, so neither a bug nor someone holding the
-- application's credentials can quietly edit or remove records. Someone who can disable
-- triggers (the table's owner, a superuser) still can; the hash chain and the heads anchored
-- outside the database (`amber audit anchor`) are what catch that. TRUNCATE is not a row change
-- and passes; `amber audit verify` reports it (the head names records the log no longer holds).
CREATE FUNCTION amber_audit_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'amber_audit is append-only: % of an audit record refused', TG_OP
        USING ERRCODE = 'insufficient_privilege';
END
$$;
CREATE TRIGGER amber_audit_append_only
    BEFORE UPDATE OR DELETE ON amber_audit
    FOR EACH ROW EXECUTE FUNCTION amber_audit_append_only();
